//===- ProgramBuilder.cpp - A training step as per-rank tasks -------------===//
//
// Turns the schedule's pass orders and the workload's pass costs into the
// tasks of every simulated rank. Passes are one task per (micro-batch,
// chunk) unless something needs layer granularity: ZeRO-3 (a parameter
// gather before each layer, a gradient reduce-scatter after it), the last
// backward pass of a chunk when gradient reduction overlaps it (a bucket
// reduction every ~40M parameters), and the first forward pass of a chunk
// when parameter gathers overlap it.
//
//===----------------------------------------------------------------------===//

#include "cleave/CostModel/Memory.h"
#include "cleave/CostModel/Program.h"
#include "cleave/CostModel/Schedule.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>

namespace cleave::cost {

const char *toString(TaskCategory category) {
  switch (category) {
  case TaskCategory::Forward:
    return "forward";
  case TaskCategory::Backward:
    return "backward";
  case TaskCategory::WeightGrad:
    return "weight_grad";
  case TaskCategory::Optimizer:
    return "optimizer";
  case TaskCategory::Communication:
    return "communication";
  }
  return "?";
}

int32_t Program::add(int32_t rank, Task task,
                     const std::vector<TaskRef> &taskDeps) {
  task.depBegin = int32_t(deps.size());
  task.depCount = int32_t(taskDeps.size());
  deps.insert(deps.end(), taskDeps.begin(), taskDeps.end());
  std::vector<Task> &tasks = ranks[rank].tasks;
  tasks.push_back(task);
  return int32_t(tasks.size() - 1);
}

namespace {

PassCost scaled(const PassCost &c, double k) { return c.scaled(k); }

/// A dependency on the pipeline send of another stage, resolved once every
/// rank's tasks exist.
struct RecvKey {
  bool backward;
  int32_t microBatch, senderVirtualStage;
};

struct PendingTask {
  Task task;
  std::vector<TaskRef> deps;
  /// At most one pipeline receive per task.
  std::optional<RecvKey> recv;
};

class Builder {
public:
  Builder(const ModelConfig &m, const ClusterSpec &cl, const ParallelPlan &p,
          const Workload &w, const CostConstants &c, bool symmetric);
  Program build();

private:
  /// The state of the simulated rank being built.
  struct Rank {
    int stage = 0;
    int64_t replica = 0;
    int32_t id = 0;
    int32_t lastCompute = -1, lastDp = -1, lastReduce = -1, lastEmbed = -1;
    /// The pipeline send the next compute must wait for (Megatron's device
    /// synchronization after each send/receive), or -1.
    int32_t syncSend = -1;
    std::deque<int32_t> window; ///< ZeRO-3: computes of the last layers
    std::vector<std::vector<int32_t>> gatherOfLayer; ///< [chunk][layer]
    std::vector<size_t> firstForward, lastGrad;      ///< [chunk]
    double bucket = 0;
  };

  int32_t push(Task t, std::vector<TaskRef> deps,
               std::optional<RecvKey> recv = std::nullopt);
  TaskRef ref(int32_t task) const { return {cur.id, task}; }
  int layersOf(int chunk) const {
    return int(layersInChunk(m, p, chunk * p.pp + cur.stage));
  }
  /// A data-parallel collective of `bytes` of parameters or gradients, of
  /// which the share `expert` is routed experts': those run over the
  /// expert-data-parallel group (dp / ep ranks), after the rest.
  double dpTime(CollectiveKind kind, double bytes, double expert) const;
  /// The share of one layer's parameters that are routed experts'.
  double layerExpertShare() const {
    return w.layerParams > 0 ? w.layerExpertParams / w.layerParams : 0;
  }
  /// Routed experts' parameters of the current rank's stage.
  double stageExpertParams() const;
  /// Parameters per data-parallel bucket: Megatron-Core's DDP default,
  /// max(40M, 1M x the data-parallel size), so that large data-parallel
  /// groups still move large messages.
  double bucketParams() const {
    return std::max(c.dpBucketParams, 1e6 * double(p.dp) * p.cp);
  }
  /// One layer's recompute pass on the current rank's stage.
  double stageRecompute() const {
    return w.layerRecomputeOf[size_t(p.recomputeOf(cur.stage))].total();
  }
  /// The CPU its collectives cost on a shared host (PassCost::commCpu).
  double stageRecomputeCpu() const {
    return w.layerRecomputeOf[size_t(p.recomputeOf(cur.stage))].commCpu;
  }
  Task commTask(Stream stream, double duration, int32_t group,
                double cpu = 0) const;
  /// A data-parallel collective as a task on `stream`: its time and CPU.
  Task dpTask(Stream stream, CollectiveKind kind, double bytes, double expert);
  Task computeTask(PassKind kind, double layers, bool embed, bool head) const;
  int32_t dpGroup();
  int32_t embeddingGroup();
  bool interNode(int fromStage, int toStage) const;

  void buildRank();
  void emitParamGathers();
  void emitPass(size_t index);
  void emitLayered(const PassRef &r, int vs, int n, const RecvKey *recv);
  std::vector<TaskRef> zero3Gather(const PassRef &r, int l);
  void emitLayerTask(const Task &t, const std::vector<TaskRef> &deps,
                     std::optional<RecvKey> recv);
  void reduceBucket(double params, bool force, int32_t after);
  void emitSend(const PassRef &r, int vs);
  void finishRank();
  double gradNormTime() const;
  Program resolve();

  const ModelConfig &m;
  const ClusterSpec &cl;
  const ParallelPlan &p;
  const Workload &w;
  const CostConstants &c;
  bool symmetric, zero3, splitW, gatherOverlap, reduceOverlap;
  int64_t replicas;
  int virtualStages;
  double paramBytes, gradBytes;
  uint8_t dpLinks;
  std::vector<std::vector<PassRef>> orders;
  std::vector<std::vector<PendingTask>> pending;
  std::vector<TaskRef> sends;
  std::vector<std::vector<int32_t>> groups;
  std::vector<int32_t> dpGroupIds, embedGroupIds;
  Rank cur;
};

Builder::Builder(const ModelConfig &m, const ClusterSpec &cl,
                 const ParallelPlan &p, const Workload &w,
                 const CostConstants &c, bool symmetric)
    : m(m), cl(cl), p(p), w(w), c(c), symmetric(symmetric) {
  replicas = symmetric ? 1 : int64_t(p.tp) * p.cp * p.dp;
  virtualStages = p.pp * p.chunks();
  zero3 = p.zeroStage >= 3;
  splitW = p.schedule == Schedule::ZeroBubbleH1;
  gatherOverlap =
      p.overlapParamGather && (p.zeroStage == 1 || p.zeroStage == 2);
  reduceOverlap = p.overlapGradReduce && !zero3;
  paramBytes = p.dtype == DType::F32 ? 4 : 2;
  gradBytes = double(bytesOf(p.gradDType()));
  dpLinks = axisGroup(Axis::DP, p, cl).nodes > 1 ? (kNicOut | kNicIn) : 0;
  orders = pipelineOrders(p);
  pending.resize(size_t(p.pp * replicas));
  sends.resize(size_t(2 * p.numMicroBatches * virtualStages * replicas));
  dpGroupIds.assign(size_t(p.pp * p.tp), -1);
  embedGroupIds.assign(size_t(replicas), -1);
}

int32_t Builder::push(Task t, std::vector<TaskRef> deps,
                      std::optional<RecvKey> recv) {
  if (t.stream == kComputeStream && cur.syncSend >= 0) {
    deps.push_back(ref(cur.syncSend));
    cur.syncSend = -1;
  }
  std::vector<PendingTask> &list = pending[cur.id];
  list.push_back({t, std::move(deps), recv});
  return int32_t(list.size() - 1);
}

double Builder::dpTime(CollectiveKind kind, double bytes, double expert) const {
  return dataParallelTime(kind, bytes, expert, p, cl, c);
}

double Builder::stageExpertParams() const {
  double layers = 0;
  for (int ch = 0; ch < p.chunks(); ++ch)
    layers += layersOf(ch);
  return layers * w.layerExpertParams;
}

Task Builder::dpTask(Stream stream, CollectiveKind kind, double bytes,
                     double expert) {
  return commTask(stream, dpTime(kind, bytes, expert), dpGroup(),
                  dataParallelCpu(kind, bytes, expert, p, cl));
}

Task Builder::commTask(Stream stream, double duration, int32_t group,
                       double cpu) const {
  Task t;
  t.kind = TaskKind::Collective;
  t.category = TaskCategory::Communication;
  t.axis = Axis::DP;
  t.stream = stream;
  t.duration = duration;
  t.links = dpLinks;
  t.group = group;
  t.cpu = cpu;
  return t;
}

Task Builder::computeTask(PassKind kind, double layers, bool embed,
                          bool head) const {
  PassCost pc;
  double recompute = 0;
  Task t;
  switch (kind) {
  case PassKind::Forward:
    t.category = TaskCategory::Forward;
    pc = scaled(w.layerForward, layers);
    if (embed)
      pc += w.embeddingForward;
    if (head)
      pc += w.headForward;
    break;
  case PassKind::Backward:
    t.category = TaskCategory::Backward;
    pc = scaled(w.layerBackward, layers);
    recompute = layers * stageRecompute();
    if (embed)
      pc += w.embeddingBackward;
    if (head)
      pc += w.headBackward;
    break;
  case PassKind::WeightGrad:
    t.category = TaskCategory::WeightGrad;
    pc = scaled(w.layerWeightGrad, layers);
    if (head)
      pc += w.headWeightGrad;
    break;
  }
  t.duration = pc.total() + recompute;
  t.recompute = recompute;
  t.tp = pc.tpComm;
  t.cp = pc.cpComm;
  t.ep = pc.epComm;
  t.cpu = pc.commCpu;
  if (kind == PassKind::Backward)
    t.cpu += layers * stageRecomputeCpu();
  return t;
}

/// The DP x CP group of the current rank (brute force) or none.
int32_t Builder::dpGroup() {
  if (symmetric || p.dp * p.cp == 1)
    return -1;
  int tpIndex = int(cur.replica % p.tp);
  int32_t &id = dpGroupIds[size_t(cur.stage * p.tp + tpIndex)];
  if (id < 0) {
    std::vector<int32_t> members;
    for (int64_t q = tpIndex; q < replicas; q += p.tp)
      members.push_back(int32_t(cur.stage * replicas + q));
    id = int32_t(groups.size());
    groups.push_back(std::move(members));
  }
  return id;
}

/// First and last stage of the current replica share the tied embedding.
int32_t Builder::embeddingGroup() {
  int32_t &id = embedGroupIds[size_t(cur.replica)];
  if (id < 0) {
    id = int32_t(groups.size());
    groups.push_back(
        {int32_t(cur.replica), int32_t((p.pp - 1) * replicas + cur.replica)});
  }
  return id;
}

bool Builder::interNode(int from, int to) const {
  int64_t stride = int64_t(p.tp) * p.cp * p.dp;
  return (from * stride) / cl.gpusPerNode != (to * stride) / cl.gpusPerNode;
}

void Builder::buildRank() {
  const std::vector<PassRef> &order = orders[cur.stage];
  cur.firstForward.assign(p.chunks(), order.size());
  cur.lastGrad.assign(p.chunks(), 0);
  PassKind gradKind = splitW ? PassKind::WeightGrad : PassKind::Backward;
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i].kind == PassKind::Forward)
      cur.firstForward[order[i].chunk] =
          std::min(cur.firstForward[order[i].chunk], i);
    if (order[i].kind == gradKind)
      cur.lastGrad[order[i].chunk] = i;
  }
  if (gatherOverlap)
    emitParamGathers();
  for (size_t i = 0; i < order.size(); ++i)
    emitPass(i);
  finishRank();
}

/// ZeRO-1/2 with overlapped parameter gathers: the gathers of the previous
/// step's update run at the start of this step, bucket by bucket in the
/// order the forward passes need them.
void Builder::emitParamGathers() {
  cur.gatherOfLayer.assign(p.chunks(), {});
  std::vector<int> chunks(p.chunks());
  for (int ch = 0; ch < p.chunks(); ++ch)
    chunks[ch] = ch;
  std::sort(chunks.begin(), chunks.end(), [&](int a, int b) {
    return cur.firstForward[a] < cur.firstForward[b];
  });
  for (int ch : chunks) {
    int n = layersOf(ch);
    std::vector<int32_t> &of = cur.gatherOfLayer[ch];
    of.assign(n, -1);
    int begin = 0;
    double params = 0;
    for (int l = 0; l < n; ++l) {
      params += w.layerParams;
      if (params < bucketParams() && l + 1 < n)
        continue;
      Task t = dpTask(kDpGatherStream, CollectiveKind::AllGather,
                      params * paramBytes, layerExpertShare());
      t.chunk = ch;
      t.layer = l;
      cur.lastDp = push(t, {});
      for (int k = begin; k <= l; ++k)
        of[k] = cur.lastDp;
      begin = l + 1;
      params = 0;
    }
  }
}

void Builder::emitPass(size_t index) {
  const PassRef &r = orders[cur.stage][index];
  int vs = r.chunk * p.pp + cur.stage;
  int n = layersOf(r.chunk);
  RecvKey key{r.kind == PassKind::Backward, r.microBatch, -1};
  if (r.kind == PassKind::Forward && vs > 0)
    key.senderVirtualStage = vs - 1;
  if (r.kind == PassKind::Backward && vs + 1 < virtualStages)
    key.senderVirtualStage = vs + 1;
  const RecvKey *recv = key.senderVirtualStage >= 0 ? &key : nullptr;
  bool layered = zero3;
  if (r.kind == PassKind::Forward && gatherOverlap)
    layered |= index == cur.firstForward[r.chunk];
  if (r.kind != PassKind::Forward && reduceOverlap)
    layered |= index == cur.lastGrad[r.chunk] &&
               (r.kind == PassKind::WeightGrad) == splitW;
  // A chunk without layers (an embedding-only or loss-only stage) is one
  // task.
  if (layered && n > 0) {
    emitLayered(r, vs, n, recv);
  } else {
    Task t = computeTask(r.kind, n, vs == 0, vs + 1 == virtualStages);
    t.microBatch = r.microBatch;
    t.chunk = r.chunk;
    cur.lastCompute =
        push(t, {}, recv ? std::optional<RecvKey>(*recv) : std::nullopt);
  }
  if (r.kind != PassKind::WeightGrad)
    emitSend(r, vs);
}

/// One task per layer, with ZeRO-3 gathers and reduce-scatters, bucketed
/// gradient reduction or bucketed parameter gathers around them.
void Builder::emitLayered(const PassRef &r, int vs, int n,
                          const RecvKey *recv) {
  bool forward = r.kind == PassKind::Forward;
  bool gradPass =
      r.kind == (splitW ? PassKind::WeightGrad : PassKind::Backward);
  bool reduceHere = reduceOverlap && gradPass;
  // ZeRO-3 releases a layer's parameters after every forward, including the
  // recompute forward inside backward: a recomputed layer is gathered again
  // for its recomputation and once more for its backward.
  bool splitRecompute =
      zero3 && r.kind == PassKind::Backward && stageRecompute() > 0;
  for (int step = 0; step < n; ++step) {
    int l = forward ? step : n - 1 - step;
    bool embed = vs == 0 && l == 0,
         head = vs + 1 == virtualStages && l == n - 1;
    Task t = computeTask(r.kind, 1, embed, head);
    t.microBatch = r.microBatch;
    t.chunk = r.chunk;
    t.layer = l;
    std::optional<RecvKey> firstRecv;
    if (recv && step == 0)
      firstRecv = *recv;
    if (splitRecompute) {
      Task rc = t;
      rc.duration = rc.recompute = stageRecompute();
      rc.tp = rc.cp = rc.ep = 0;
      rc.cpu = stageRecomputeCpu();
      t.cpu -= rc.cpu;
      t.duration -= rc.duration;
      t.recompute = 0;
      emitLayerTask(rc, zero3Gather(r, l), firstRecv);
      firstRecv.reset();
    }
    std::vector<TaskRef> deps;
    if (zero3 &&
        (forward || (p.regatherForBackward && r.kind != PassKind::WeightGrad)))
      deps = zero3Gather(r, l);
    if (forward && gatherOverlap && !cur.gatherOfLayer.empty())
      deps.push_back(ref(cur.gatherOfLayer[r.chunk][l]));
    emitLayerTask(t, deps, firstRecv);
    if (zero3 && gradPass) {
      double bytes = w.layerParams * gradBytes;
      Task rs = dpTask(kDpReduceStream, CollectiveKind::ReduceScatter, bytes,
                       layerExpertShare());
      rs.microBatch = r.microBatch;
      rs.layer = l;
      cur.lastReduce = push(rs, {ref(cur.lastCompute)});
    }
    if (reduceHere) {
      double params = w.layerParams + (embed ? w.embeddingParams : 0) +
                      (head ? w.headParams : 0);
      reduceBucket(params, step == n - 1, cur.lastCompute);
    }
  }
}

/// A ZeRO-3 parameter gather of layer `l`, at most two layers ahead of the
/// compute stream (the layer running and the one prefetched).
std::vector<TaskRef> Builder::zero3Gather(const PassRef &r, int l) {
  double bytes = w.layerParams * paramBytes;
  Task g = dpTask(kDpGatherStream, CollectiveKind::AllGather, bytes,
                  layerExpertShare());
  g.microBatch = r.microBatch;
  g.chunk = r.chunk;
  g.layer = l;
  std::vector<TaskRef> deps;
  if (cur.window.size() >= 2)
    deps.push_back(ref(cur.window.front()));
  cur.lastDp = push(g, deps);
  return {ref(cur.lastDp)};
}

void Builder::emitLayerTask(const Task &t, const std::vector<TaskRef> &deps,
                            std::optional<RecvKey> recv) {
  cur.lastCompute = push(t, deps, recv);
  cur.window.push_back(cur.lastCompute);
  if (cur.window.size() > 2)
    cur.window.pop_front();
}

/// Adds `params` to the open gradient bucket and reduces it once full.
void Builder::reduceBucket(double params, bool force, int32_t after) {
  cur.bucket += params;
  if (cur.bucket < bucketParams() && !force)
    return;
  CollectiveKind kind = p.zeroStage == 0 ? CollectiveKind::AllReduce
                                         : CollectiveKind::ReduceScatter;
  Task t =
      dpTask(kDpGatherStream, kind, cur.bucket * gradBytes, layerExpertShare());
  cur.lastDp = push(t, {ref(after)});
  cur.bucket = 0;
}

void Builder::emitSend(const PassRef &r, int vs) {
  bool backward = r.kind == PassKind::Backward;
  int to = backward ? vs - 1 : vs + 1;
  if (to < 0 || to >= virtualStages)
    return;
  int toStage = to % p.pp;
  bool inter = interNode(cur.stage, toStage);
  double bytes = w.p2pBytes;
  // The transfer plus the launch of NCCL's send/recv kernel, which
  // Megatron issues once per pass (batched isend/irecv), and with the
  // device synchronization after it the host's relaunch of the next kernel
  // on both sides.
  double t = p2pTime(bytes, inter, cl, c) +
             c.kernelOverhead * (c.p2pSynchronize ? 2 : 1);
  if (inter && p.scatterGatherP2p && !p.sequenceParallel && p.tp > 1)
    t += collectiveCost(CollectiveKind::AllGather, bytes * p.tp,
                        axisGroup(Axis::TP, p, cl), cl, c)
             .time;
  Task s;
  s.kind = TaskKind::Send;
  s.category = TaskCategory::Communication;
  s.axis = Axis::PP;
  s.stream = kPpStream;
  s.duration = t;
  s.cpu = 2 * p2pCpu(bytes, inter, cl);
  s.links = inter ? kNicOut : 0;
  s.peer = int32_t(toStage * replicas + cur.replica);
  s.microBatch = r.microBatch;
  s.chunk = r.chunk;
  int32_t idx = push(s, {ref(cur.lastCompute)});
  if (c.p2pSynchronize)
    cur.syncSend = idx;
  size_t key =
      ((size_t(backward) * p.numMicroBatches + r.microBatch) * virtualStages +
       vs) *
          replicas +
      cur.replica;
  sends[key] = ref(idx);
}

/// Gradient clipping needs the global gradient norm: Megatron-Core
/// (optimizer/clip_grads.py, get_grad_norm_fp32) all-reduces the local sum
/// of squares, one fp32 scalar, over the model-parallel group (and the
/// data-parallel one under the distributed optimizer: every GPU), then
/// reads it on the host (`.item()`), so the GPU drains and waits for the
/// next launch before the clip and Adam kernels run. The sum of squares
/// itself reads every gradient once (in adamBytesPerParam).
double Builder::gradNormTime() const {
  int gpus = p.numGpus();
  if (gpus <= 1)
    return c.kernelOverhead;
  GroupPlacement world = placeGroup(gpus, 1, cl.gpusPerNode);
  return collectiveCost(CollectiveKind::AllReduce, 4, world, cl, c).time +
         c.kernelOverhead;
}

void Builder::finishRank() {
  double params = stageParameters(m, p, w, cur.stage);
  double expert = params > 0 ? stageExpertParams() / params : 0;
  if (!zero3 && !reduceOverlap && p.dp * p.cp > 1) {
    CollectiveKind kind = p.zeroStage == 0 ? CollectiveKind::AllReduce
                                           : CollectiveKind::ReduceScatter;
    // One collective per bucket of dpBucketParams, one after the other
    // (the CPU runtime's cleave-bucket-collectives): each pays its latency.
    double bucket = std::max(1.0, c.dpBucketParams);
    double full = std::floor(params / bucket), rest = params - full * bucket;
    double time = full * dpTime(kind, bucket * gradBytes, expert);
    double cpu =
        full * dataParallelCpu(kind, bucket * gradBytes, expert, p, cl);
    if (rest > 0 || full == 0) {
      time += dpTime(kind, rest * gradBytes, expert);
      cpu += dataParallelCpu(kind, rest * gradBytes, expert, p, cl);
    }
    Task t = commTask(kDpGatherStream, time, dpGroup(), cpu);
    cur.lastDp = push(t, {ref(cur.lastCompute)});
  }
  bool tiedSync =
      m.tiedEmbeddings && p.pp > 1 && (cur.stage == 0 || cur.stage == p.pp - 1);
  if (tiedSync) {
    GroupPlacement pair = placeGroup(
        2, int(interNode(0, p.pp - 1)) * cl.gpusPerNode + 1, cl.gpusPerNode);
    double bytes = w.embeddingParams * gradBytes;
    Task t = commTask(
        kEmbeddingStream,
        collectiveCost(CollectiveKind::AllReduce, bytes, pair, cl, c).time,
        embeddingGroup(),
        collectiveCpu(CollectiveKind::AllReduce, bytes, pair, cl));
    t.axis = Axis::PP;
    t.links = pair.nodes > 1 ? (kNicOut | kNicIn) : 0;
    cur.lastEmbed = push(t, {ref(cur.lastCompute)});
  }
  // ZeRO shards the dense parameters' state over dp x cp and the routed
  // experts' over their expert-data-parallel group (dp / ep x cp).
  auto sharded = [&](bool byZero) {
    return zeroShard(params, expert, byZero, p);
  };
  // ZeRO-2 and -3 keep only the rank's shard of the gradients.
  double gradShard = sharded(p.zeroStage >= 2);
  Task opt;
  opt.category = TaskCategory::Optimizer;
  opt.duration =
      c.kernelOverhead * 8 +
      memoryTime(sharded(p.zeroStage >= 1) * c.adamBytesPerParam, cl.gpu);
  // No gradients, nothing to clip or check.
  if (params > 0 && (p.clipGradients || p.dynamicLossScaling))
    opt.duration += gradNormTime();
  if (params > 0 && p.dynamicLossScaling)
    opt.duration +=
        c.kernelOverhead + memoryTime(gradShard * gradBytes * 2, cl.gpu);
  // fp8 (Transformer Engine): cast-transpose every weight once per step
  // (read 16-bit, write fp8 twice) and update the amax histories and
  // scales (one fused kernel per step).
  if (p.dtype == DType::F8E4M3)
    opt.duration += c.kernelOverhead + memoryTime(params * 4, cl.gpu);
  std::vector<TaskRef> deps;
  for (int32_t d : {cur.lastCompute, cur.lastDp, cur.lastReduce, cur.lastEmbed})
    if (d >= 0)
      deps.push_back(ref(d));
  cur.lastCompute = push(opt, deps);
  if ((p.zeroStage == 1 || p.zeroStage == 2) && !gatherOverlap &&
      p.dp * p.cp > 1) {
    Task t = dpTask(kDpGatherStream, CollectiveKind::AllGather,
                    params * paramBytes, expert);
    cur.lastDp = push(t, {ref(cur.lastCompute)});
  }
}

Program Builder::resolve() {
  Program prog;
  prog.symmetric = symmetric;
  if (cl.hostComputeCapacity > 0) {
    prog.hostCapacity = cl.hostComputeCapacity;
    prog.hostRanksPerNode = cl.gpusPerNode;
    prog.hostNodes = std::max(1, cl.nodes);
    prog.hostCores = cl.hostCores;
  }
  prog.groups = std::move(groups);
  prog.ranks.resize(pending.size());
  for (size_t r = 0; r < pending.size(); ++r) {
    RankProgram &rp = prog.ranks[r];
    rp.stage = int32_t(r / replicas);
    rp.realRank = symmetric ? -1 : int32_t(r);
    rp.multiplicity = symmetric ? int64_t(p.tp) * p.cp * p.dp : 1;
    int64_t replica = int64_t(r) % replicas;
    rp.tasks.reserve(pending[r].size());
    for (PendingTask &pt : pending[r]) {
      std::vector<TaskRef> deps = std::move(pt.deps);
      if (const std::optional<RecvKey> &k = pt.recv) {
        size_t key =
            ((size_t(k->backward) * p.numMicroBatches + k->microBatch) *
                 virtualStages +
             k->senderVirtualStage) *
                replicas +
            replica;
        deps.push_back(sends[key]);
      }
      prog.add(int32_t(r), pt.task, deps);
    }
  }
  return prog;
}

Program Builder::build() {
  for (int stage = 0; stage < p.pp; ++stage) {
    for (int64_t q = 0; q < replicas; ++q) {
      cur = Rank();
      cur.stage = stage;
      cur.replica = q;
      cur.id = int32_t(stage * replicas + q);
      buildRank();
    }
  }
  return resolve();
}

} // namespace

Program buildProgram(const ModelConfig &m, const ClusterSpec &cl,
                     const ParallelPlan &p, const Workload &w,
                     const CostConstants &c, const ProgramOptions &o) {
  return Builder(m, cl, p, w, c, o.symmetric).build();
}

} // namespace cleave::cost
