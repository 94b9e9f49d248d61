//===- GraphBuilder.cpp - Build cleave programs from C++ ------------------===//

#include "cleave/Models/GraphBuilder.h"

using namespace mlir;
using namespace mlir::cleave;

static RankedTensorType typeOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

GraphBuilder::GraphBuilder(ModuleOp module, StringRef name, StringRef model)
    : model(model.str()), builder(module.getContext()),
      loc(builder.getUnknownLoc()) {
  if (!model.empty())
    loc = NameLoc::get(builder.getStringAttr(model));
  builder.setInsertionPointToEnd(module.getBody());
  func =
      builder.create<func::FuncOp>(loc, name, builder.getFunctionType({}, {}));
  body = func.addEntryBlock();
  builder.setInsertionPointToStart(body);
}

Location GraphBuilder::named(StringRef name) {
  if (model.empty())
    return NameLoc::get(builder.getStringAttr(name));
  return NameLoc::get(builder.getStringAttr(model + "." + name));
}

void GraphBuilder::setScope(StringRef name) { loc = named(name); }

Value GraphBuilder::arg(StringRef attrName, StringRef name,
                        RankedTensorType type, ArrayRef<NamedAttribute> extra) {
  BlockArgument value = body->addArgument(type, named(name));
  SmallVector<NamedAttribute> attrs = {
      builder.getNamedAttr(attrName, builder.getStringAttr(name))};
  llvm::append_range(attrs, extra);
  argAttrs.push_back(builder.getDictionaryAttr(attrs));
  return value;
}

Value GraphBuilder::param(StringRef name, ArrayRef<int64_t> shape,
                          InitKind kind, double scale) {
  auto type = RankedTensorType::get(shape, builder.getF32Type());
  Value value =
      arg(CleaveDialect::kParamAttrName, name, type,
          {builder.getNamedAttr(CleaveDialect::kInitAttrName,
                                InitAttr::get(getContext(), kind, scale))});
  paramNames[value] = name.str();
  return value;
}

Value GraphBuilder::input(StringRef name, ArrayRef<int64_t> shape,
                          Type elementType) {
  return arg(CleaveDialect::kInputAttrName, name,
             RankedTensorType::get(shape, elementType), {});
}

func::FuncOp GraphBuilder::finish(ValueRange results) {
  builder.create<func::ReturnOp>(loc, results);
  func.setFunctionType(
      builder.getFunctionType(SmallVector<Type>(body->getArgumentTypes()),
                              SmallVector<Type>(results.getTypes())));
  func.setAllArgAttrs(argAttrs);
  return func;
}

Value GraphBuilder::add(Value a, Value b) {
  return builder.create<AddOp>(loc, a, b);
}

Value GraphBuilder::mul(Value a, Value b) {
  return builder.create<MulOp>(loc, a, b);
}

Value GraphBuilder::scale(Value x, double scalar) {
  RankedTensorType type = typeOf(x);
  auto elem = llvm::cast<FloatType>(type.getElementType());
  auto splat = DenseElementsAttr::get(
      type, builder.getFloatAttr(elem, scalar).getValue());
  Value c = builder.create<ConstantOp>(loc, splat);
  return mul(x, c);
}

Value GraphBuilder::cast(Value x, Type elementType) {
  RankedTensorType type = typeOf(x);
  if (type.getElementType() == elementType)
    return x;
  Value y = builder.create<CastOp>(loc, type.clone(elementType), x);
  auto name = paramNames.find(x);
  if (name != paramNames.end()) {
    std::string copy = name->second; // inserting may move the entries
    paramNames[y] = std::move(copy);
  }
  return y;
}

Value GraphBuilder::reshape(Value x, ArrayRef<int64_t> shape) {
  RankedTensorType type = typeOf(x);
  if (type.getShape() == shape)
    return x;
  return builder.create<ReshapeOp>(loc, type.clone(shape), x);
}

Value GraphBuilder::broadcast(Value x, ArrayRef<int64_t> shape,
                              ArrayRef<int64_t> dims) {
  RankedTensorType type = typeOf(x);
  if (type.getShape() == shape)
    return x;
  return builder.create<BroadcastOp>(loc, type.clone(shape), x, dims);
}

Value GraphBuilder::broadcastLast(Value vec, Value like) {
  ArrayRef<int64_t> shape = typeOf(like).getShape();
  return broadcast(vec, shape, {static_cast<int64_t>(shape.size()) - 1});
}

Value GraphBuilder::linear(Value x, Value w, Value b) {
  // The layer's ops are named after its weight: "h.3.attn.q.weight" makes
  // "<model>.h.3.attn.q".
  Location scope = loc;
  auto name = paramNames.find(w);
  if (name != paramNames.end()) {
    StringRef layer = name->second;
    layer.consume_back(".weight");
    loc = named(layer);
  }
  Value y = builder.create<MatmulOp>(loc, x, w, UnitAttr(),
                                     builder.getUnitAttr(), UnitAttr());
  if (b)
    y = add(y, broadcastLast(b, y));
  loc = scope;
  return y;
}

Value GraphBuilder::layerNorm(Value x, Value gamma, Value beta, double eps) {
  return builder.create<LayerNormOp>(loc, x, gamma, beta,
                                     builder.getF64FloatAttr(eps));
}

Value GraphBuilder::rmsNorm(Value x, Value gamma, double eps) {
  return builder.create<RMSNormOp>(loc, x, gamma, builder.getF64FloatAttr(eps));
}

Value GraphBuilder::gelu(Value x, GeluApproximation approx) {
  return builder.create<GeluOp>(loc, x, approx);
}

Value GraphBuilder::silu(Value x) { return builder.create<SiluOp>(loc, x); }

Value GraphBuilder::dropout(Value x, Value seed, double rate) {
  if (rate == 0.0)
    return x;
  return builder.create<DropoutOp>(
      loc, x.getType(), x, seed, ValueRange{}, builder.getF64FloatAttr(rate),
      builder.getI64IntegerAttr(nextDropoutStream++), DenseI64ArrayAttr());
}

Value GraphBuilder::embedding(Value table, Value ids) {
  return builder.create<EmbeddingOp>(loc, table, ids, Value(), IntegerAttr());
}

Value GraphBuilder::attention(Value q, Value k, Value v, bool causal) {
  return builder.create<AttentionOp>(loc, q, k, v, /*query_block=*/Value(),
                                     causal, FloatAttr(),
                                     /*balanced=*/IntegerAttr());
}

Value GraphBuilder::rotary(Value x, double theta) {
  return builder.create<RotaryOp>(loc, x, /*block=*/Value(),
                                  llvm::APFloat(theta), /*interleaved=*/false,
                                  /*inverse=*/false,
                                  /*balanced=*/IntegerAttr());
}

Value GraphBuilder::crossEntropy(Value logits, Value labels) {
  return builder.create<CrossEntropyOp>(loc, logits, labels, Value(),
                                        IntegerAttr());
}

GraphBuilder::MoEResult GraphBuilder::moe(Value x, Value router, Value gate,
                                          Value up, Value down,
                                          const MoERouting &routing) {
  OpBuilder &b = builder;
  Value logits = linear(x, router);
  UnitAttr sigmoid = routing.sigmoid ? b.getUnitAttr() : UnitAttr();
  FloatAttr capacity = routing.capacityFactor > 0
                           ? b.getF64FloatAttr(routing.capacityFactor)
                           : FloatAttr();
  auto route = b.create<MoERouterOp>(
      loc, logits, b.getI64IntegerAttr(routing.topK), sigmoid,
      routing.normalize ? b.getUnitAttr() : UnitAttr(), capacity);
  Value buffer = b.create<MoEDispatchOp>(loc, x, route.getDispatch());
  // [E, B, C, H] -> [E, B * C, H]: every expert's tokens as one GEMM.
  ArrayRef<int64_t> buf = typeOf(buffer).getShape();
  Value flat = reshape(buffer, {buf[0], buf[1] * buf[2], buf[3]});
  auto bmm = [&](Value lhs, Value rhs) {
    return b.create<MatmulOp>(loc, lhs, rhs, UnitAttr(), UnitAttr(), UnitAttr())
        .getResult();
  };
  Value hidden = mul(silu(bmm(flat, gate)), bmm(flat, up));
  Value out = reshape(bmm(hidden, down), buf);
  Value y = b.create<MoECombineOp>(loc, route.getCombine(), out);
  Value aux = b.create<MoEAuxLossOp>(
      loc, logits, b.getI64IntegerAttr(routing.topK), sigmoid);
  return {y, aux};
}
