//===- CleaveAttrs.cpp - #cleave.sharding and #cleave.init ----------------===//

#include "cleave/Dialect/CleaveDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::cleave;

#define GET_ATTRDEF_CLASSES
#include "cleave/Dialect/CleaveAttrs.cpp.inc"

void CleaveDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "cleave/Dialect/CleaveAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// ShardingAttr
//===----------------------------------------------------------------------===//

static ArrayAttr getStringArray(MLIRContext *ctx, ArrayRef<StringRef> names) {
  SmallVector<Attribute> attrs;
  for (StringRef name : names)
    attrs.push_back(StringAttr::get(ctx, name));
  return ArrayAttr::get(ctx, attrs);
}

ShardingAttr ShardingAttr::get(MLIRContext *ctx, StringRef mesh,
                               ArrayRef<SmallVector<StringRef>> dims,
                               ArrayRef<StringRef> partial) {
  SmallVector<Attribute> dimAttrs;
  for (const SmallVector<StringRef> &axes : dims)
    dimAttrs.push_back(getStringArray(ctx, axes));
  return Base::get(ctx, FlatSymbolRefAttr::get(ctx, mesh),
                   ArrayAttr::get(ctx, dimAttrs), getStringArray(ctx, partial));
}

ShardingAttr
ShardingAttr::getChecked(function_ref<InFlightDiagnostic()> emitError,
                         MLIRContext *ctx, StringRef mesh,
                         ArrayRef<SmallVector<StringRef>> dims,
                         ArrayRef<StringRef> partial) {
  SmallVector<Attribute> dimAttrs;
  for (const SmallVector<StringRef> &axes : dims)
    dimAttrs.push_back(getStringArray(ctx, axes));
  return Base::getChecked(emitError, ctx, FlatSymbolRefAttr::get(ctx, mesh),
                          ArrayAttr::get(ctx, dimAttrs),
                          getStringArray(ctx, partial));
}

ShardingAttr ShardingAttr::getReplicated(MLIRContext *ctx, StringRef mesh,
                                         unsigned rank) {
  SmallVector<SmallVector<StringRef>> dims(rank);
  return get(ctx, mesh, dims, {});
}

static SmallVector<StringRef> toStrings(ArrayAttr array) {
  SmallVector<StringRef> result;
  for (Attribute attr : array)
    result.push_back(llvm::cast<StringAttr>(attr).getValue());
  return result;
}

SmallVector<StringRef> ShardingAttr::getDimAxes(unsigned dim) const {
  return toStrings(llvm::cast<ArrayAttr>(getDims()[dim]));
}

SmallVector<StringRef> ShardingAttr::getPartialAxes() const {
  return toStrings(getPartial());
}

SmallVector<StringRef> ShardingAttr::getUsedAxes() const {
  SmallVector<StringRef> axes;
  for (unsigned d = 0, e = getRank(); d < e; ++d)
    llvm::append_range(axes, getDimAxes(d));
  llvm::append_range(axes, getPartialAxes());
  return axes;
}

bool ShardingAttr::isFullyReplicated() const { return getUsedAxes().empty(); }

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh, ArrayAttr dims,
                                   ArrayAttr partial) {
  if (!mesh)
    return emitError() << "sharding needs a mesh";
  llvm::StringSet<> seen;
  auto checkAxis = [&](Attribute attr, StringRef where) -> LogicalResult {
    auto name = llvm::dyn_cast<StringAttr>(attr);
    if (!name || name.getValue().empty())
      return emitError() << "sharding axis names must be non-empty strings ("
                         << where << ")";
    if (!seen.insert(name.getValue()).second)
      return emitError() << "mesh axis '" << name.getValue()
                         << "' is used more than once in the sharding ("
                         << where << ")";
    return success();
  };
  for (auto [d, dimAttr] : llvm::enumerate(dims)) {
    auto axes = llvm::dyn_cast<ArrayAttr>(dimAttr);
    if (!axes)
      return emitError() << "sharding entry of dimension " << d
                         << " must be an array of axis names";
    for (Attribute axis : axes)
      if (failed(checkAxis(axis, "dimension " + std::to_string(d))))
        return failure();
  }
  for (Attribute axis : partial)
    if (failed(checkAxis(axis, "partial")))
      return failure();
  return success();
}

/// axis-list ::= `_` | bare-id | `(` bare-id (`,` bare-id)* `)`
static ParseResult parseDimEntry(AsmParser &parser,
                                 SmallVectorImpl<Attribute> &axes) {
  MLIRContext *ctx = parser.getContext();
  if (succeeded(parser.parseOptionalLParen())) {
    if (parser.parseCommaSeparatedList([&]() -> ParseResult {
          std::string name;
          if (parser.parseKeywordOrString(&name))
            return failure();
          axes.push_back(StringAttr::get(ctx, name));
          return success();
        }) ||
        parser.parseRParen())
      return failure();
    return success();
  }
  std::string name;
  if (failed(parser.parseOptionalKeywordOrString(&name)))
    return parser.emitError(parser.getCurrentLocation(),
                            "expected a mesh axis, '_' or '(axes...)'");
  if (name != "_")
    axes.push_back(StringAttr::get(ctx, name));
  return success();
}

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  MLIRContext *ctx = parser.getContext();
  FlatSymbolRefAttr mesh;
  SmallVector<Attribute> dims;
  SmallVector<Attribute> partial;
  if (parser.parseLess() || parser.parseAttribute(mesh) || parser.parseComma())
    return {};
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            SmallVector<Attribute> axes;
            if (parseDimEntry(parser, axes))
              return failure();
            dims.push_back(ArrayAttr::get(ctx, axes));
            return success();
          }))
    return {};
  if (succeeded(parser.parseOptionalComma())) {
    if (parser.parseKeyword("partial") || parser.parseEqual() ||
        parser.parseCommaSeparatedList(
            AsmParser::Delimiter::Square, [&]() -> ParseResult {
              std::string name;
              if (parser.parseKeywordOrString(&name))
                return failure();
              partial.push_back(StringAttr::get(ctx, name));
              return success();
            }))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); }, ctx,
                    mesh, ArrayAttr::get(ctx, dims),
                    ArrayAttr::get(ctx, partial));
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<" << getMesh() << ", [";
  for (unsigned d = 0, e = getRank(); d < e; ++d) {
    if (d)
      printer << ", ";
    SmallVector<StringRef> axes = getDimAxes(d);
    if (axes.empty())
      printer << "_";
    else if (axes.size() == 1)
      printer.printKeywordOrString(axes[0]);
    else {
      printer << "(";
      llvm::interleaveComma(
          axes, printer, [&](StringRef a) { printer.printKeywordOrString(a); });
      printer << ")";
    }
  }
  printer << "]";
  if (!getPartial().empty()) {
    printer << ", partial = [";
    llvm::interleaveComma(getPartialAxes(), printer, [&](StringRef a) {
      printer.printKeywordOrString(a);
    });
    printer << "]";
  }
  printer << ">";
}

//===----------------------------------------------------------------------===//
// InitAttr
//===----------------------------------------------------------------------===//

InitAttr InitAttr::get(MLIRContext *ctx, InitKind kind, double scale) {
  return Base::get(ctx, kind, llvm::APFloat(scale));
}

double InitAttr::getScaleValue() const { return getScale().convertToDouble(); }

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, llvm::APFloat scaleValue) {
  double scale = scaleValue.convertToDouble();
  bool random = kind == InitKind::Normal || kind == InitKind::Uniform;
  if (random && !(scale > 0.0))
    return emitError() << "#cleave.init<" << stringifyInitKind(kind)
                       << "> needs a positive scale, got " << scale;
  if (!random && scale != 0.0)
    return emitError() << "#cleave.init<" << stringifyInitKind(kind)
                       << "> takes no scale";
  return success();
}

Attribute InitAttr::parse(AsmParser &parser, Type) {
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown init kind '" << keyword
                          << "' (expected zeros, ones, normal or uniform)";
    return {};
  }
  double scale = 0.0;
  if (succeeded(parser.parseOptionalComma()) && parser.parseFloat(scale))
    return {};
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                    *kind, llvm::APFloat(scale));
}

void InitAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyInitKind(getKind());
  if (getScaleValue() != 0.0)
    printer << ", " << getScaleValue();
  printer << ">";
}
