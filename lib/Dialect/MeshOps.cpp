//===- MeshOps.cpp - cleave.mesh, sharding checks, sharding_constraint ----===//

#include "Directives.h"
#include "cleave/Dialect/CleaveOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::cleave;

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

ParseResult mlir::cleave::parseMeshAxes(OpAsmParser &parser,
                                        ArrayAttr &axisNames,
                                        DenseI64ArrayAttr &shape,
                                        ArrayAttr &links) {
  MLIRContext *ctx = parser.getContext();
  SmallVector<Attribute> names, linkAttrs;
  SmallVector<int64_t> sizes;
  auto parseAxis = [&]() -> ParseResult {
    std::string name;
    int64_t size;
    StringRef linkName;
    SMLoc linkLoc;
    if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
        parser.parseInteger(size) || parser.parseColon())
      return failure();
    linkLoc = parser.getCurrentLocation();
    if (parser.parseKeyword(&linkName))
      return failure();
    std::optional<LinkKind> link = symbolizeLinkKind(linkName);
    if (!link)
      return parser.emitError(linkLoc)
             << "unknown link kind '" << linkName
             << "' (expected nvlink, pcie, ib, roce, ethernet or host)";
    names.push_back(StringAttr::get(ctx, name));
    sizes.push_back(size);
    linkAttrs.push_back(LinkKindAttr::get(ctx, *link));
    return success();
  };
  if (parser.parseCommaSeparatedList(parseAxis))
    return failure();
  axisNames = ArrayAttr::get(ctx, names);
  shape = DenseI64ArrayAttr::get(ctx, sizes);
  links = ArrayAttr::get(ctx, linkAttrs);
  return success();
}

void mlir::cleave::printMeshAxes(OpAsmPrinter &printer, Operation *,
                                 ArrayAttr axisNames, DenseI64ArrayAttr shape,
                                 ArrayAttr links) {
  for (unsigned i = 0, e = axisNames.size(); i < e; ++i) {
    if (i)
      printer << ", ";
    printer.printKeywordOrString(cast<StringAttr>(axisNames[i]).getValue());
    printer << " = " << shape[i] << " : ";
    if (auto link = dyn_cast<LinkKindAttr>(links[i]))
      printer << stringifyLinkKind(link.getValue());
    else
      printer << links[i];
  }
}

ParseResult mlir::cleave::parseAxisList(OpAsmParser &parser, ArrayAttr &axes) {
  SmallVector<Attribute> names;
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            std::string name;
            if (parser.parseKeywordOrString(&name))
              return failure();
            names.push_back(StringAttr::get(parser.getContext(), name));
            return success();
          }))
    return failure();
  axes = ArrayAttr::get(parser.getContext(), names);
  return success();
}

void mlir::cleave::printAxisList(OpAsmPrinter &printer, Operation *,
                                 ArrayAttr axes) {
  printer << "[";
  llvm::interleaveComma(axes, printer, [&](Attribute a) {
    printer.printKeywordOrString(cast<StringAttr>(a).getValue());
  });
  printer << "]";
}

ParseResult mlir::cleave::parsePermutePairs(OpAsmParser &parser,
                                            DenseI64ArrayAttr &pairs) {
  SmallVector<int64_t> flat;
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            int64_t src, dst;
            if (parser.parseInteger(src) || parser.parseArrow() ||
                parser.parseInteger(dst))
              return failure();
            flat.push_back(src);
            flat.push_back(dst);
            return success();
          }))
    return failure();
  pairs = DenseI64ArrayAttr::get(parser.getContext(), flat);
  return success();
}

void mlir::cleave::printPermutePairs(OpAsmPrinter &printer, Operation *,
                                     DenseI64ArrayAttr pairs) {
  printer << "[";
  for (int64_t i = 0, e = pairs.size(); i + 1 < e; i += 2) {
    if (i)
      printer << ", ";
    printer << pairs[i] << " -> " << pairs[i + 1];
  }
  printer << "]";
}

ParseResult mlir::cleave::parseReduction(OpAsmParser &parser,
                                         Attribute &reduction) {
  ReductionKind kind = ReductionKind::Sum;
  if (succeeded(parser.parseOptionalKeyword("reduction"))) {
    StringRef name;
    SMLoc loc = parser.getCurrentLocation();
    if (parser.parseEqual() || parser.parseKeyword(&name))
      return failure();
    std::optional<ReductionKind> parsed = symbolizeReductionKind(name);
    if (!parsed)
      return parser.emitError(loc) << "unknown reduction '" << name
                                   << "' (expected sum, max, min or avg)";
    kind = *parsed;
  }
  reduction = ReductionKindAttr::get(parser.getContext(), kind);
  return success();
}

void mlir::cleave::printReduction(OpAsmPrinter &printer, Operation *,
                                  Attribute reduction) {
  auto kind = cast<ReductionKindAttr>(reduction).getValue();
  if (kind != ReductionKind::Sum)
    printer << "reduction = " << stringifyReductionKind(kind);
}

//===----------------------------------------------------------------------===//
// MeshOp
//===----------------------------------------------------------------------===//

void MeshOp::build(OpBuilder &builder, OperationState &state, StringRef name,
                   ArrayRef<StringRef> axisNames, ArrayRef<int64_t> shape,
                   ArrayRef<LinkKind> links) {
  MLIRContext *ctx = builder.getContext();
  SmallVector<Attribute> linkAttrs;
  for (LinkKind link : links)
    linkAttrs.push_back(LinkKindAttr::get(ctx, link));
  build(builder, state, builder.getStringAttr(name),
        builder.getStrArrayAttr(axisNames), builder.getDenseI64ArrayAttr(shape),
        builder.getArrayAttr(linkAttrs), /*balanced_axes=*/ArrayAttr());
}

static bool isIdentifier(StringRef name) {
  if (name.empty() || name == "_" ||
      !(llvm::isAlpha(name[0]) || name[0] == '_'))
    return false;
  return llvm::all_of(name,
                      [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

LogicalResult MeshOp::verify() {
  ArrayAttr names = getAxisNames();
  if (names.empty())
    return emitOpError("needs at least one axis");
  if (getShape().size() != names.size() || getLinks().size() != names.size())
    return emitOpError() << "has " << names.size() << " axis names, "
                         << getShape().size() << " sizes and "
                         << getLinks().size() << " link kinds";
  llvm::StringSet<> seen;
  for (auto [i, attr] : llvm::enumerate(names)) {
    StringRef name = cast<StringAttr>(attr).getValue();
    if (!isIdentifier(name))
      return emitOpError() << "axis #" << i << " name '" << name
                           << "' is not an identifier ([A-Za-z_][A-Za-z0-9_]*,"
                              " not '_')";
    if (!seen.insert(name).second)
      return emitOpError() << "axis '" << name << "' is declared twice";
    if (getShape()[i] < 1)
      return emitOpError() << "axis '" << name << "' has size " << getShape()[i]
                           << "; sizes must be >= 1";
  }
  if (std::optional<ArrayAttr> balanced = getBalancedAxes())
    for (Attribute attr : *balanced)
      if (!seen.contains(cast<StringAttr>(attr).getValue()))
        return emitOpError()
               << "balanced axis '" << cast<StringAttr>(attr).getValue()
               << "' is not an axis of the mesh";
  return success();
}

bool MeshOp::isBalancedAxis(StringRef name) {
  std::optional<ArrayAttr> balanced = getBalancedAxes();
  return balanced && llvm::any_of(*balanced, [&](Attribute attr) {
           return cast<StringAttr>(attr).getValue() == name;
         });
}

int64_t MeshOp::getNumDevices() {
  int64_t n = 1;
  for (int64_t s : getShape())
    n *= s;
  return n;
}

std::optional<unsigned> MeshOp::getAxisIndex(StringRef name) {
  for (auto [i, attr] : llvm::enumerate(getAxisNames()))
    if (cast<StringAttr>(attr).getValue() == name)
      return i;
  return std::nullopt;
}

int64_t MeshOp::getAxisSize(StringRef name) {
  return getShape()[*getAxisIndex(name)];
}

LinkKind MeshOp::getAxisLink(StringRef name) {
  return cast<LinkKindAttr>(getLinks()[*getAxisIndex(name)]).getValue();
}

int64_t MeshOp::getGroupSize(ArrayRef<StringRef> axes) {
  int64_t n = 1;
  for (StringRef axis : axes)
    n *= getAxisSize(axis);
  return n;
}

MeshOp mlir::cleave::lookupMesh(Operation *from, FlatSymbolRefAttr name,
                                SymbolTableCollection *symbolTables) {
  if (symbolTables)
    return symbolTables->lookupNearestSymbolFrom<MeshOp>(from, name);
  return SymbolTable::lookupNearestSymbolFrom<MeshOp>(from, name);
}

static std::string listAxes(MeshOp mesh) {
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(mesh.getAxisNames(), os, [&](Attribute a) {
    os << cast<StringAttr>(a).getValue();
  });
  return s;
}

LogicalResult
mlir::cleave::verifySharding(ShardingAttr sharding, Type type, MeshOp mesh,
                             function_ref<InFlightDiagnostic()> emitError,
                             StringRef what) {
  // Tensors before bufferization, memrefs after.
  auto tensor = dyn_cast<ShapedType>(type);
  if (!tensor || !tensor.hasRank())
    return emitError() << what << " has a sharding but type " << type
                       << " is not a ranked tensor";
  if (sharding.getRank() != tensor.getRank())
    return emitError() << "sharding of " << what << " has "
                       << sharding.getRank()
                       << " dimension entries but the tensor " << type
                       << " has rank " << tensor.getRank();
  for (StringRef axis : sharding.getUsedAxes())
    if (!mesh.getAxisIndex(axis))
      return emitError() << what << " is sharded over unknown axis '" << axis
                         << "' of mesh @" << mesh.getSymName()
                         << " (axes: " << listAxes(mesh) << ")";
  for (unsigned d = 0, e = tensor.getRank(); d < e; ++d) {
    SmallVector<StringRef> axes = sharding.getDimAxes(d);
    int64_t parts = mesh.getGroupSize(axes);
    if (tensor.getDimSize(d) % parts != 0)
      return emitError() << "dimension " << d << " of " << what << " has size "
                         << tensor.getDimSize(d)
                         << ", which is not divisible by " << parts
                         << " (the number of devices on axes "
                         << llvm::join(axes, ", ") << ")";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ShardingConstraintOp
//===----------------------------------------------------------------------===//

LogicalResult
ShardingConstraintOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  MeshOp mesh = lookupMesh(*this, getSharding().getMesh(), &symbolTables);
  if (!mesh)
    return emitOpError() << "refers to unknown mesh "
                         << getSharding().getMesh();
  return verifySharding(
      getSharding(), getType(), mesh, [&] { return emitOpError(); },
      "the constrained value");
}

ShardingRule ShardingConstraintOp::getShardingRule() {
  return ShardingRule::getElementwise(*this);
}

OpWork ShardingConstraintOp::getWork(const OpShapes &) { return noWork(); }
