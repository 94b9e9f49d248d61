//===- CollectiveTrace.cpp - Replay a function into its communication -----===//
//
// Step 1 of cleave-verify-collectives (see CollectiveTrace.h): the sequence
// of communication calls a device makes when it runs a function. Integer
// and index values are tracked where they are compile-time values
// (constants, loop counters, arith folds of those), which is what decides
// loops and branches around communication.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/CollectiveTrace.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::cleave;

bool mlir::cleave::isStartOp(Operation *op) {
  return isa<AllReduceStartOp, AllGatherStartOp, ReduceScatterStartOp,
             AllToAllStartOp, CollectivePermuteStartOp, SendStartOp,
             RecvStartOp>(op);
}

bool mlir::cleave::isCommunicationOp(Operation *op) {
  return isa<AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp,
             CollectivePermuteOp, SendOp, RecvOp>(op) ||
         isStartOp(op);
}

Type mlir::cleave::communicatedType(Operation *op) {
  if (isStartOp(op))
    return cast<RequestType>(op->getResult(0).getType()).getValueType();
  return op->getNumResults() ? op->getResult(0).getType() : Type();
}

//===----------------------------------------------------------------------===//
// CommTable
//===----------------------------------------------------------------------===//

namespace {

std::string typeText(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

/// "all_reduce(tensor<4xf32>, sum)" and so on: everything the members of a
/// group must agree on, in words.
std::string collectiveSignature(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  // A start matches the blocking op (the runtime runs the same call).
  StringRef name = op->getName().stripDialect();
  name.consume_back("_start");
  Type result = communicatedType(op);
  os << name << "(" << op->getOperand(0).getType();
  if (result != op->getOperand(0).getType())
    os << " -> " << result;
  llvm::TypeSwitch<Operation *>(op)
      .Case<AllReduceOp, AllReduceStartOp>([&](auto o) {
        os << ", " << stringifyReductionKind(o.getReduction());
      })
      .Case<AllGatherOp, AllGatherStartOp>(
          [&](auto o) { os << ", dim " << o.getDim(); })
      .Case<ReduceScatterOp, ReduceScatterStartOp>([&](auto o) {
        os << ", dim " << o.getDim() << ", "
           << stringifyReductionKind(o.getReduction());
      })
      .Case<AllToAllOp, AllToAllStartOp>([&](auto o) {
        os << ", split_dim " << o.getSplitDim() << ", concat_dim "
           << o.getConcatDim();
      })
      .Case<CollectivePermuteOp, CollectivePermuteStartOp>([&](auto o) {
        os << ", pairs [";
        llvm::interleaveComma(o.getSourceTargetPairs(), os, [&](auto pair) {
          os << pair.first << " -> " << pair.second;
        });
        os << "]";
      });
  os << ")";
  return text;
}

} // namespace

uint32_t CommTable::internComm(MeshOp mesh, ArrayAttr axes) {
  auto key = std::make_pair(mesh.getOperation(), Attribute(axes));
  auto [it, inserted] = commIds.try_emplace(key, uint32_t(comms.size()));
  if (inserted) {
    CommInfo info{mesh, {}};
    for (Attribute axis : axes)
      info.axes.push_back(
          *mesh.getAxisIndex(cast<StringAttr>(axis).getValue()));
    comms.push_back(std::move(info));
  }
  return it->second;
}

uint32_t CommTable::internSignature(std::string text) {
  auto [it, inserted] = signatureIds.try_emplace(text, signatures.size());
  if (inserted)
    signatures.push_back(std::move(text));
  return it->second;
}

CommEvent CommTable::eventFor(Operation *op) {
  auto it = cache.find(op);
  if (it != cache.end())
    return it->second;
  CommEvent event;
  event.op = op;
  auto meshRef = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
  auto axes = op->getAttrOfType<ArrayAttr>("axes");
  event.comm = internComm(lookupMesh(op, meshRef, &symbols), axes);
  if (isa<SendOp, SendStartOp>(op)) {
    event.kind = CommKind::Send;
    event.peer = op->getAttrOfType<IntegerAttr>("peer").getInt();
    event.signature = internSignature(typeText(op->getOperand(0).getType()));
  } else if (isa<RecvOp, RecvStartOp>(op)) {
    event.kind = CommKind::Recv;
    event.peer = op->getAttrOfType<IntegerAttr>("peer").getInt();
    event.signature = internSignature(typeText(communicatedType(op)));
  } else {
    event.signature = internSignature(collectiveSignature(op));
  }
  cache[op] = event;
  return event;
}

std::string CommTable::describeComm(uint32_t id) const {
  const CommInfo &info = comms[id];
  MeshOp mesh = info.mesh;
  std::string text = "[";
  for (unsigned axis : info.axes) {
    if (text.size() > 1)
      text += ", ";
    text += cast<StringAttr>(mesh.getAxisNames()[axis]).getValue();
  }
  return text + "]";
}

//===----------------------------------------------------------------------===//
// TraceReplayer
//===----------------------------------------------------------------------===//

namespace {

int64_t toInt64(const APInt &value) {
  return value.getBitWidth() == 1 ? int64_t(value.getZExtValue())
                                  : value.getSExtValue();
}

/// The first communication op nested in `op` (or in a function it calls).
Operation *firstCommunication(Operation *op, SymbolTableCollection &symbols,
                              unsigned depth = 0) {
  Operation *found = nullptr;
  op->walk([&](Operation *nested) {
    if (isCommunicationOp(nested)) {
      found = nested;
      return WalkResult::interrupt();
    }
    auto call = dyn_cast<CallOpInterface>(nested);
    if (call && depth < 16)
      if (Operation *callee = call.resolveCallable(&symbols))
        if ((found = firstCommunication(callee, symbols, depth + 1)))
          return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return found;
}

} // namespace

bool TraceReplayer::mayCommunicate(Operation *op) {
  auto [it, inserted] = communicates.try_emplace(op, false);
  if (!inserted)
    return it->second; // Known, or in progress (a recursive call).
  bool result = false;
  op->walk([&](Operation *nested) {
    if (isCommunicationOp(nested)) {
      result = true;
      return WalkResult::interrupt();
    }
    if (auto call = dyn_cast<CallOpInterface>(nested))
      if (Operation *callee = call.resolveCallable(&symbols))
        if (mayCommunicate(callee)) {
          result = true;
          return WalkResult::interrupt();
        }
    return WalkResult::advance();
  });
  communicates[op] = result;
  return result;
}

InFlightDiagnostic TraceReplayer::emitUnreplayable(Operation *op,
                                                   const Twine &why) {
  InFlightDiagnostic diag =
      op->emitError() << "cleave-verify-collectives cannot replay this op: "
                      << why;
  if (Operation *comm = firstCommunication(op, symbols))
    diag.attachNote(comm->getLoc()) << "it contains this communication";
  return diag;
}

std::optional<int64_t> TraceReplayer::evaluate(Value value, Frame &frame,
                                               unsigned depth) {
  auto known = frame.find(value);
  if (known != frame.end())
    return known->second;
  if (depth > 64)
    return std::nullopt;
  // Per-device values: cleave.axis_index, read out of its 0-d tensor.
  if (auto index = value.getDefiningOp<AxisIndexOp>())
    return evaluateAxisIndex(index);
  if (auto extract = value.getDefiningOp<tensor::ExtractOp>())
    if (extract.getIndices().empty())
      return evaluate(extract.getTensor(), frame, depth + 1);
  if (!value.getType().isIntOrIndex())
    return std::nullopt;
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)))
    return toInt64(constant);
  Operation *def = value.getDefiningOp();
  if (!def || !isa<arith::ArithDialect>(def->getDialect()))
    return std::nullopt;
  // Fold the arith op on the values of its operands.
  SmallVector<Attribute> operands;
  for (Value operand : def->getOperands()) {
    std::optional<int64_t> v = evaluate(operand, frame, depth + 1);
    if (!v || !operand.getType().isIntOrIndex())
      return std::nullopt;
    operands.push_back(IntegerAttr::get(operand.getType(), *v));
  }
  SmallVector<OpFoldResult> results;
  if (failed(def->fold(operands, results)) || results.size() <= 0)
    return std::nullopt;
  OpFoldResult result = results[cast<OpResult>(value).getResultNumber()];
  if (auto attr = dyn_cast_if_present<Attribute>(result)) {
    if (auto integer = dyn_cast<IntegerAttr>(attr))
      return toInt64(integer.getValue());
    return std::nullopt;
  }
  Value folded = cast<Value>(result);
  if (folded.getDefiningOp() == def)
    return std::nullopt;
  return evaluate(folded, frame, depth + 1);
}

std::optional<int64_t> TraceReplayer::evaluateAxisIndex(AxisIndexOp op) {
  if (!device || lookupMesh(op, op.getMeshAttr(), &symbols) != device->mesh)
    return std::nullopt;
  int64_t index = 0;
  for (StringRef name : op.getAxisNames()) {
    unsigned axis = *device->mesh.getAxisIndex(name);
    if (!device->known[axis])
      return std::nullopt;
    index = index * device->mesh.getShape()[axis] + device->coords[axis];
  }
  return index;
}

void TraceReplayer::setDevice(std::optional<DeviceView> view) {
  if (!view && !device)
    return;
  device = std::move(view);
  calls.clear(); // Traces of calls may depend on the device.
}

void TraceReplayer::bindYield(Region &region, ValueRange results,
                              Frame &frame) {
  if (region.empty() || results.empty())
    return;
  Operation *yield = region.front().getTerminator();
  for (auto [result, yielded] : llvm::zip(results, yield->getOperands())) {
    if (std::optional<int64_t> v = evaluate(yielded, frame))
      frame[result] = *v;
    else
      frame.erase(result);
  }
}

LogicalResult TraceReplayer::append(Operation *at, CommTrace &out,
                                    const CommTrace &more) {
  if (out.size() + more.size() > maxEvents)
    return at->emitError() << "cleave-verify-collectives: the program makes "
                              "more than "
                           << maxEvents
                           << " communication calls; it is too long to "
                              "replay";
  out.insert(out.end(), more.begin(), more.end());
  return success();
}

LogicalResult TraceReplayer::replayBlock(Block &block, Frame &frame,
                                         CommTrace &out) {
  for (Operation &op : block.without_terminator())
    if (failed(replayOp(&op, frame, out)))
      return failure();
  return success();
}

LogicalResult TraceReplayer::replayOp(Operation *op, Frame &frame,
                                      CommTrace &out) {
  if (isCommunicationOp(op)) {
    if (out.size() >= maxEvents)
      return append(op, out, {table.eventFor(op)}); // Reports the limit.
    out.push_back(table.eventFor(op));
    return success();
  }
  if (auto call = dyn_cast<CallOpInterface>(op)) {
    auto callee =
        dyn_cast_or_null<func::FuncOp>(call.resolveCallable(&symbols));
    // Declarations (library functions) and unresolved callees do not
    // communicate in the cleave dialect; neither do callees without
    // communication.
    if (!callee || callee.isExternal() || !mayCommunicate(callee))
      return success();
    SmallVector<std::optional<int64_t>> args;
    for (Value arg : call.getArgOperands())
      args.push_back(evaluate(arg, frame));
    FailureOr<const CallResult *> result = replayCall(callee, args, op);
    if (failed(result) || failed(append(op, out, (*result)->trace)))
      return failure();
    for (auto [value, known] :
         llvm::zip(op->getResults(), (*result)->results)) {
      if (known)
        frame[value] = *known;
      else
        frame.erase(value);
    }
    return success();
  }
  if (isa<scf::ForOp>(op))
    return replayFor(op, frame, out);
  if (isa<scf::IfOp>(op))
    return replayIf(op, frame, out);
  if (isa<scf::IndexSwitchOp>(op))
    return replaySwitch(op, frame, out);
  if (op->getNumRegions() == 0 || !mayCommunicate(op))
    return success();
  if (auto exec = dyn_cast<scf::ExecuteRegionOp>(op)) {
    if (exec.getRegion().hasOneBlock()) {
      if (failed(replayBlock(exec.getRegion().front(), frame, out)))
        return failure();
      bindYield(exec.getRegion(), op->getResults(), frame);
      return success();
    }
  }
  return emitUnreplayable(op, "communication inside '" +
                                  op->getName().getStringRef() +
                                  "' (only scf.for, scf.if, "
                                  "scf.index_switch, scf.execute_region with "
                                  "one block, and calls are replayed)");
}

LogicalResult TraceReplayer::replayFor(Operation *op, Frame &frame,
                                       CommTrace &out) {
  auto loop = cast<scf::ForOp>(op);
  if (!mayCommunicate(op))
    return success();
  std::optional<int64_t> lb = evaluate(loop.getLowerBound(), frame),
                         ub = evaluate(loop.getUpperBound(), frame),
                         step = evaluate(loop.getStep(), frame);
  if (!lb || !ub || !step)
    return emitUnreplayable(op, "the loop bounds are not compile-time "
                                "values, and the body communicates");
  if (*step <= 0)
    return emitUnreplayable(op, "the loop step is not positive");
  SmallVector<std::optional<int64_t>> carried;
  for (Value init : loop.getInitArgs())
    carried.push_back(evaluate(init, frame));
  Block &body = *loop.getBody();
  for (int64_t i = *lb; i < *ub; i += *step) {
    frame[loop.getInductionVar()] = i;
    for (auto [arg, value] : llvm::zip(loop.getRegionIterArgs(), carried)) {
      if (value)
        frame[arg] = *value;
      else
        frame.erase(arg);
    }
    if (failed(replayBlock(body, frame, out)))
      return failure();
    for (auto [k, yielded] :
         llvm::enumerate(body.getTerminator()->getOperands()))
      carried[k] = evaluate(yielded, frame);
  }
  for (auto [result, value] : llvm::zip(loop.getResults(), carried)) {
    if (value)
      frame[result] = *value;
    else
      frame.erase(result);
  }
  return success();
}

LogicalResult TraceReplayer::replayIf(Operation *op, Frame &frame,
                                      CommTrace &out) {
  auto branch = cast<scf::IfOp>(op);
  std::optional<int64_t> cond = evaluate(branch.getCondition(), frame);
  if (!cond)
    return replayAlternatives(op, op->getRegions(), frame, out);
  Region &taken = *cond ? branch.getThenRegion() : branch.getElseRegion();
  if (taken.empty())
    return success();
  if (failed(replayBlock(taken.front(), frame, out)))
    return failure();
  bindYield(taken, op->getResults(), frame);
  return success();
}

LogicalResult TraceReplayer::replaySwitch(Operation *op, Frame &frame,
                                          CommTrace &out) {
  auto sw = cast<scf::IndexSwitchOp>(op);
  std::optional<int64_t> arg = evaluate(sw.getArg(), frame);
  if (!arg)
    return replayAlternatives(op, op->getRegions(), frame, out);
  Region *taken = &sw.getDefaultRegion();
  for (auto [value, region] : llvm::zip(sw.getCases(), sw.getCaseRegions()))
    if (value == *arg)
      taken = &region;
  if (failed(replayBlock(taken->front(), frame, out)))
    return failure();
  bindYield(*taken, op->getResults(), frame);
  return success();
}

/// A branch decided at run time: fine if every alternative communicates the
/// same way.
LogicalResult TraceReplayer::replayAlternatives(Operation *op,
                                                MutableArrayRef<Region> regions,
                                                Frame &frame, CommTrace &out) {
  if (!mayCommunicate(op))
    return success();
  std::optional<CommTrace> first;
  for (Region &region : regions) {
    CommTrace trace;
    if (!region.empty() && failed(replayBlock(region.front(), frame, trace)))
      return failure();
    if (!first) {
      first = std::move(trace);
      continue;
    }
    if (trace == *first)
      continue;
    size_t k = 0;
    while (k < trace.size() && k < first->size() && trace[k] == (*first)[k])
      ++k;
    InFlightDiagnostic diag = op->emitError()
                              << "cleave-verify-collectives cannot decide this "
                                 "branch: its condition is not a compile-time "
                                 "value, and its alternatives communicate "
                                 "differently";
    if (k < first->size())
      diag.attachNote((*first)[k].op->getLoc())
          << "one alternative makes this call";
    if (k < trace.size())
      diag.attachNote(trace[k].op->getLoc())
          << "another alternative makes this call";
    return failure();
  }
  for (Value result : op->getResults())
    frame.erase(result);
  return append(op, out, *first);
}

FailureOr<const TraceReplayer::CallResult *>
TraceReplayer::replayCall(func::FuncOp callee,
                          ArrayRef<std::optional<int64_t>> args,
                          Operation *caller) {
  CallKey key(callee.getOperation(),
              std::vector<std::optional<int64_t>>(args.begin(), args.end()));
  auto found = calls.find(key);
  if (found != calls.end())
    return &found->second;
  if (llvm::is_contained(callStack, callee.getOperation())) {
    (void)emitUnreplayable(caller, "the call to @" + callee.getName() +
                                       " is recursive");
    return failure();
  }
  if (!callee.getBody().hasOneBlock()) {
    (void)emitUnreplayable(callee, "@" + callee.getName() +
                                       " has unstructured control flow "
                                       "(several blocks)");
    return failure();
  }
  callStack.push_back(callee);
  Frame frame;
  for (auto [arg, value] : llvm::zip(callee.getArguments(), args))
    if (value)
      frame[arg] = *value;
  CallResult result;
  Block &body = callee.getBody().front();
  LogicalResult replayed = replayBlock(body, frame, result.trace);
  callStack.pop_back();
  if (failed(replayed))
    return failure();
  for (Value value : body.getTerminator()->getOperands())
    result.results.push_back(evaluate(value, frame));
  return &calls.emplace(std::move(key), std::move(result)).first->second;
}

FailureOr<CommTrace> TraceReplayer::replay(func::FuncOp func) {
  if (func.isExternal() || !mayCommunicate(func))
    return CommTrace();
  SmallVector<std::optional<int64_t>> args(func.getNumArguments());
  FailureOr<const CallResult *> result = replayCall(func, args, func);
  if (failed(result))
    return failure();
  return (*result)->trace;
}

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

namespace {

/// Calls `fn` on every op of `func` and of the functions it calls.
void walkProgram(func::FuncOp func, SymbolTableCollection &symbols,
                 llvm::function_ref<void(Operation *)> fn) {
  llvm::SmallPtrSet<Operation *, 8> seen;
  SmallVector<Operation *> todo = {func};
  while (!todo.empty()) {
    Operation *next = todo.pop_back_val();
    if (!seen.insert(next).second)
      continue;
    next->walk([&](Operation *op) {
      fn(op);
      if (auto call = dyn_cast<CallOpInterface>(op))
        if (Operation *callee = call.resolveCallable(&symbols))
          todo.push_back(callee);
    });
  }
}

/// Can the value of `index` decide control flow? The replay sees it through
/// 0-d tensor.extract and arith ops, so follow those to a loop, a branch, a
/// yield, a call or a return.
bool reachesControl(AxisIndexOp index) {
  SmallVector<Value> todo = {index.getResult()};
  llvm::SmallPtrSet<Operation *, 8> seen;
  while (!todo.empty()) {
    Value value = todo.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      if (isa<scf::ForOp, scf::IfOp, scf::IndexSwitchOp, scf::WhileOp,
              CallOpInterface>(user) ||
          user->hasTrait<OpTrait::IsTerminator>())
        return true;
      bool extract =
          isa<tensor::ExtractOp>(user) && user->getNumOperands() == 1;
      if (extract || isa<arith::ArithDialect>(user->getDialect()))
        llvm::append_range(todo, user->getResults());
    }
  }
  return false;
}

} // namespace

MeshOp mlir::cleave::findProgramMesh(func::FuncOp func,
                                     SymbolTableCollection &symbols) {
  MeshOp mesh;
  walkProgram(func, symbols, [&](Operation *op) {
    if (!mesh && (isCommunicationOp(op) || isa<AxisIndexOp>(op)))
      mesh = lookupMesh(op, op->getAttrOfType<FlatSymbolRefAttr>("mesh"),
                        &symbols);
  });
  return mesh;
}

SmallVector<unsigned>
mlir::cleave::findControlAxes(func::FuncOp func, MeshOp mesh,
                              SymbolTableCollection &symbols) {
  SmallVector<unsigned> axes;
  walkProgram(func, symbols, [&](Operation *op) {
    auto index = dyn_cast<AxisIndexOp>(op);
    if (!index || lookupMesh(op, index.getMeshAttr(), &symbols) != mesh ||
        !reachesControl(index))
      return;
    for (StringRef name : index.getAxisNames())
      if (!llvm::is_contained(axes, *mesh.getAxisIndex(name)))
        axes.push_back(*mesh.getAxisIndex(name));
  });
  llvm::sort(axes);
  return axes;
}
