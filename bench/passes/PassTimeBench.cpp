//===- PassTimeBench.cpp - Front-half pass time and memory by model size --===//
//
// Builds a zoo model at several depths (GPT-3 175B's shape at 12, 48 and 96
// layers by default), then runs the front half of the compiler on it one
// pass at a time, as cleave-run runs them: pipeline-stages (with
// --stages), autodiff, canonicalize, cse, apply-plan, propagate-sharding,
// partition, pipeline (plans with pp) and verify-collectives. For every pass it
// prints the wall time, the peak memory the pass adds and the op count of its
// output, so that growth with program size is visible: a linear pass takes
// 4x longer at 48 layers than at 12, and 8x at 96. With --lower=cpu,cuda it
// then times the back halves (cleave-lower-to-cpu, cleave-lower-to-cuda with
// ptxas) on the partitioned step, one row each, with the size of the lowered
// IR and its slowest passes: what outlining repeated layers must flatten.
//
// Memory: the peak resident set during the pass minus the resident set
// before it (Linux VmHWM, reset before every pass by writing 5 to
// /proc/self/clear_refs), and the growth of live heap bytes across the pass
// (mallinfo2's uordblks: what its output keeps). Where the peak cannot be
// reset, the first column is the growth of getrusage's ru_maxrss instead,
// which stays 0 for a pass below an earlier peak; the header says which.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/CleaveDialect.h"
#include "cleave/Dialect/CleaveOps.h"
#include "cleave/ModelConfig/ModelConfig.h"
#include "cleave/Models/ModelZoo.h"
#include "cleave/Pipelines/Lowering.h"
#include "cleave/Support/ClosedPipeLLVM.h"
#include "cleave/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <fstream>
#include <malloc.h>
#include <string>
#include <sys/resource.h>

using namespace llvm;
using namespace mlir;
using namespace mlir::cleave;

namespace {

cl::OptionCategory category("cleave-bench-passes options");
cl::opt<std::string> model("model", cl::desc("Zoo preset whose shape is used"),
                           cl::init("gpt3-175b"), cl::cat(category));
cl::list<int64_t>
    layerCounts("layers",
                cl::desc("Depths to build, comma separated (default 12,48,96)"),
                cl::CommaSeparated, cl::cat(category));
cl::opt<int64_t> batch("batch", cl::desc("Sequences per step"), cl::init(16),
                       cl::cat(category));
cl::opt<std::string>
    plan("plan",
         cl::desc("cleave-apply-plan options, as in cleave-opt "
                  "--cleave-apply-plan='...'"),
         cl::init("tp=8 dp=8 sp"), cl::cat(category));

cl::list<std::string> lowerings(
    "lower",
    cl::desc("Back halves to time after the front half, comma separated: "
             "cpu (cleave-lower-to-cpu), cuda (cleave-lower-to-cuda, with "
             "ptxas)"),
    cl::CommaSeparated, cl::cat(category));

cl::opt<int64_t> stages(
    "stages",
    cl::desc("Pipeline stages: runs cleave-pipeline-stages first (for a plan "
             "with pp, e.g. --stages=4 --plan='pp=4 tp=8 micro=8')"),
    cl::init(0), cl::cat(category));

/// Kilobytes of the named field of /proc/self/status, or -1.
int64_t statusKiB(StringRef field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    StringRef rest(line);
    if (!rest.consume_front(field) || !rest.consume_front(":"))
      continue;
    rest = rest.trim();
    int64_t kib = -1;
    return rest.consumeInteger(10, kib) ? -1 : kib;
  }
  return -1;
}

/// Resets the peak resident set to the current one (Linux 4.0 and later).
bool resetPeak() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return out.good();
}

int64_t maxRssKiB() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

/// User plus system CPU seconds of the process and its finished children
/// (ptxas, which the CUDA lowering runs) so far.
double cpuSeconds() {
  auto sec = [](const timeval &t) { return t.tv_sec + t.tv_usec * 1e-6; };
  double total = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    struct rusage usage;
    getrusage(who, &usage);
    total += sec(usage.ru_utime) + sec(usage.ru_stime);
  }
  return total;
}

/// Time and memory of one pass.
struct Sample {
  double seconds = 0;
  double cpu = 0;
  double peakMiB = 0;
  double heapMiB = 0;
  int64_t ops = 0;
};

bool peakResettable = true;

/// Adds the seconds of every pass run to `seconds[pass argument]`, summed
/// over the nested runs of a pipeline (a function pass runs once per
/// function; the context is single-threaded, so runs nest as a stack).
struct PassTimes : PassInstrumentation {
  explicit PassTimes(StringMap<double> &seconds) : seconds(seconds) {}
  StringMap<double> &seconds;
  SmallVector<std::chrono::steady_clock::time_point> starts;
  void runBeforePass(Pass *, Operation *) override {
    starts.push_back(std::chrono::steady_clock::now());
  }
  void runAfterPass(Pass *pass, Operation *) override { record(pass); }
  void runAfterPassFailed(Pass *pass, Operation *) override { record(pass); }
  void record(Pass *pass) {
    // Pass adaptors (nested pipelines) have no argument: their time is
    // their passes'.
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                      starts.pop_back_val())
            .count();
    if (!pass->getArgument().empty())
      seconds[pass->getArgument()] += elapsed;
  }
};

/// Runs the passes that `build` adds to a pass manager on `module`.
FailureOr<Sample> measure(ModuleOp module,
                          llvm::function_ref<void(PassManager &)> build,
                          StringMap<double> *times = nullptr) {
  PassManager pm(module.getContext());
  build(pm);
  if (times)
    pm.addInstrumentation(std::make_unique<PassTimes>(*times));
  Sample s;
  size_t heapBefore = mallinfo2().uordblks;
  int64_t rssBefore = statusKiB("VmRSS");
  int64_t maxBefore = maxRssKiB();
  peakResettable = peakResettable && rssBefore >= 0 && resetPeak();
  double cpuStart = cpuSeconds();
  auto start = std::chrono::steady_clock::now();
  if (failed(pm.run(module)))
    return failure();
  s.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  s.cpu = cpuSeconds() - cpuStart;
  int64_t peak =
      peakResettable ? statusKiB("VmHWM") - rssBefore : maxRssKiB() - maxBefore;
  s.peakMiB = peak / 1024.0;
  s.heapMiB = (double(mallinfo2().uordblks) - double(heapBefore)) / 1048576.0;
  module.walk([&](Operation *) { ++s.ops; });
  return s;
}

void printRow(int64_t layers, StringRef name, const Sample &s) {
  outs() << format("%6lld  %-19s %9.3f %9.3f %10.1f %10.1f %9lld\n",
                   (long long)layers, name.str().c_str(), s.seconds, s.cpu,
                   s.peakMiB, s.heapMiB, (long long)s.ops);
  outs().flush();
}

/// Counts the bytes written to it (the size of the printed IR, without
/// keeping it).
struct CountingStream : raw_ostream {
  uint64_t bytes = 0;
  CountingStream() { SetUnbuffered(); }
  void write_impl(const char *, size_t size) override { bytes += size; }
  uint64_t current_pos() const override { return bytes; }
};

/// Times one back half (`cpu` or `cuda`) on a copy of the partitioned
/// `module`: one row, then the size of the lowered IR and its slowest
/// passes.
bool lowerDepth(ModuleOp module, int64_t layers, StringRef target) {
  if (target != "cpu" && target != "cuda") {
    errs() << "cleave-bench-passes: --lower: unknown target '" << target
           << "' (cpu or cuda)\n";
    return false;
  }
  OwningOpRef<ModuleOp> copy = module.clone();
  StringMap<double> times;
  FailureOr<Sample> s = measure(
      *copy,
      [&](PassManager &pm) {
        if (target == "cuda")
          buildCUDALoweringPipeline(pm);
        else
          buildCPULoweringPipeline(pm);
      },
      &times);
  std::string name = ("lower-to-" + target).str();
  if (failed(s)) {
    errs() << "cleave-bench-passes: " << name << " failed at " << layers
           << " layers\n";
    return false;
  }
  printRow(layers, name, *s);
  CountingStream ir;
  copy->print(ir);
  SmallVector<std::pair<double, StringRef>> slowest;
  for (const auto &entry : times)
    slowest.emplace_back(entry.second, entry.first());
  llvm::sort(slowest, [](auto &a, auto &b) { return a.first > b.first; });
  outs() << format("%6lld    IR %.1f MiB; slowest passes (wall s):",
                   (long long)layers, ir.bytes / 1048576.0);
  for (auto &[seconds, pass] : ArrayRef(slowest).take_front(4))
    outs() << format(" %s %.2f", pass.str().c_str(), seconds);
  outs() << "\n";
  outs().flush();
  return true;
}

/// Runs the front half on `layers` layers of the model; prints one row per
/// pass. Returns false on failure.
bool runDepth(const ::cleave::ModelConfig &base, int64_t layers) {
  ::cleave::ModelConfig config = base;
  config.layers = layers;
  config.batch = batch;
  DialectRegistry registry;
  registry.insert<CleaveDialect, func::FuncDialect>();
  if (!lowerings.empty()) {
    registerCPULoweringDialects(registry);
    registerCUDALoweringDialects(registry);
  }
  // One thread: CPU seconds and per-pass times stay comparable on a shared
  // machine (the lowerings' function passes would otherwise run in
  // parallel over the few functions of a step).
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  std::string error;
  OwningOpRef<ModuleOp> module = buildModel(&context, config, error);
  if (!module) {
    errs() << "cleave-bench-passes: " << error << "\n";
    return false;
  }
  std::unique_ptr<Pass> applyPlan = createCleaveApplyPlanPass();
  if (failed(applyPlan->initializeOptions(plan, [](const Twine &message) {
        errs() << "cleave-bench-passes: --plan: " << message << "\n";
        return failure();
      })))
    return false;

  SmallVector<std::pair<StringRef, std::unique_ptr<Pass>>> passes;
  if (stages > 0) {
    CleavePipelineStagesPassOptions options;
    options.stages = stages;
    passes.emplace_back("pipeline-stages",
                        createCleavePipelineStagesPass(options));
  }
  passes.emplace_back("autodiff", createCleaveAutodiffPass());
  // As cleave-run does after differentiation.
  passes.emplace_back("canonicalize", createCanonicalizerPass());
  passes.emplace_back("cse", createCSEPass());
  passes.emplace_back("apply-plan", std::move(applyPlan));
  passes.emplace_back("propagate-sharding",
                      createCleavePropagateShardingPass());
  passes.emplace_back("partition", createCleavePartitionPass());
  passes.emplace_back("pipeline", createCleavePipelinePass());
  passes.emplace_back("verify-collectives",
                      createCleaveVerifyCollectivesPass());
  for (auto &[name, pass] : passes) {
    // The pipeline pass runs only on a mesh with a pipeline axis.
    if (name == "pipeline") {
      auto meshes = module->getOps<MeshOp>();
      if (meshes.empty() || !(*meshes.begin()).getAxisIndex("pp"))
        continue;
    }
    // A pipelined step is compiled alone (as the lit tests and cleave-run
    // do): the forward function would keep communicating over `mb`.
    if (name == "apply-plan" && stages > 0)
      if (auto forward = module->lookupSymbol<func::FuncOp>("forward"))
        forward.erase();
    FailureOr<Sample> s =
        measure(*module, [&](PassManager &pm) { pm.addPass(std::move(pass)); });
    if (failed(s)) {
      errs() << "cleave-bench-passes: " << name << " failed at " << layers
             << " layers\n";
      return false;
    }
    printRow(layers, name, *s);
  }
  for (const std::string &target : lowerings)
    if (!lowerDepth(*module, layers, target))
      return false;
  return true;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  ::cleave::exitQuietlyOnClosedStdout();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "Times the front-half passes (autodiff, apply-plan, propagate-sharding, "
      "partition, pipeline, verify-collectives) on a zoo model at several "
      "depths, with the peak memory each adds\n");
  std::optional<::cleave::ModelConfig> config = ::cleave::lookupPreset(model);
  if (!config) {
    errs() << "cleave-bench-passes: unknown preset '" << model << "'\n";
    return 1;
  }
  SmallVector<int64_t> depths(layerCounts.begin(), layerCounts.end());
  if (depths.empty())
    depths = {12, 48, 96};
  outs() << "model " << model << " (its shape, layers overridden), batch "
         << batch << ", plan '" << plan << "'\n";
  // Probe whether the peak can be reset here (containers may forbid it).
  peakResettable = statusKiB("VmRSS") >= 0 && resetPeak();
  outs() << (peakResettable
                 ? "peak MiB: resident-set peak during the pass minus the "
                   "resident set before it (VmHWM reset via "
                   "/proc/self/clear_refs)\n"
                 : "peak MiB: growth of getrusage ru_maxrss during the pass "
                   "(0 when below an earlier peak)\n")
         << "heap MiB: live heap bytes after minus before (mallinfo2 "
            "uordblks)\n"
         << "wall s: elapsed; cpu s: user + system CPU time of the process "
            "(getrusage; what a loaded machine does not inflate)\n\n"
         << "layers  pass                   wall s     cpu s   peak MiB   "
            "heap MiB ops after\n";
  for (int64_t layers : depths)
    if (!runDepth(*config, layers))
      return 1;
  return 0;
}
