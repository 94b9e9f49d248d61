//===- cleave-bundle-run.cpp - Train the compiled step of a bundle --------===//
//
// The runner of a bundle (cleave-run --emit-bundle, docs/cuda.md): trains
// the ahead-of-time compiled step with cleave-run's run options, on one
// rank, the ranks of an external launcher or -n local ranks, and checks a
// GPU with --selftest. It links the runtime and the driver library
// (lib/Execution's CleaveDriver) with LLVM's Support library, statically:
// no LLVM, MLIR or CBC shared library. DIR/run finds the CUDA libraries and
// starts it with --bundle DIR.
//
//===----------------------------------------------------------------------===//

#include "BundleInfo.h"
#include "Selftest.h"
#include "cleave/Execution/RunFlags.h"
#include "cleave/Runtime/CudaRuntime.h"
#include "cleave/Runtime/Runtime.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include <cstdlib>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace llvm;
using namespace mlir::cleave;
using namespace cleave::bundle;

namespace {
cl::OptionCategory trainCat("Training");
cl::OptionCategory ioCat("Data and files");
cl::OptionCategory deviceCat("Device");
cl::OptionCategory parallelCat("Parallelism");
RunFlags flags(trainCat, ioCat, parallelCat);

cl::opt<std::string> bundleDir("bundle", cl::cat(ioCat),
                               cl::desc("The bundle (DIR/run sets it)"));
cl::opt<std::string> backendOpt(
    "backend", cl::init(""), cl::cat(deviceCat),
    cl::desc("cpu or cuda: which of the bundle's builds runs (default: the "
             "bundle's backend; a cuda bundle carries a cpu build too)"));
cl::opt<bool> selftest(
    "selftest", cl::cat(deviceCat),
    cl::desc("Check this machine: the GPUs, every collective on them, "
             "--selftest-steps training steps of the cuda build against the "
             "cpu build, and a throughput run against the cost model's "
             "prediction; prints a table, exits non-zero on a failure"));
cl::opt<bool> selftestCollectivesOnly(
    "selftest-collectives", cl::Hidden,
    cl::desc("The collectives check of --selftest (its child process)"));
cl::opt<int64_t> selftestSteps("selftest-steps", cl::init(5),
                               cl::cat(deviceCat),
                               cl::desc("Steps compared by --selftest"));
cl::opt<int64_t>
    throughputSteps("throughput-steps", cl::init(30), cl::cat(deviceCat),
                    cl::desc("Steps of --selftest's throughput run (0: none)"));

int fail(const Twine &message) {
  outs().flush();
  errs() << "cleave-bundle-run: error: " << message << "\n";
  return 1;
}

/// GPUs this machine's ranks need: -n, or the launcher's local world.
int localGpusNeeded() {
  if (flags.nprocs > 0)
    return flags.nprocs;
  if (const char *v = std::getenv("LOCAL_WORLD_SIZE"))
    return std::max(1, std::atoi(v));
  return 1;
}

/// The one-line reason this machine cannot run the cuda build, or "".
std::string checkCudaMachine(const BundleInfo &bundle, int needed) {
  char why[512];
  int32_t count = cleave_rt_cuda_device_count(why, sizeof(why));
  if (count < 0)
    return std::string("no usable CUDA driver: ") + why;
  if (count == 0)
    return std::string("no CUDA device on this machine: ") + why;
  if (count < needed)
    return "the run needs " + std::to_string(needed) +
           " GPUs on this machine (one per local rank) but it has " +
           std::to_string(count);
  int32_t major = 0, minor = 0;
  char name[256];
  if (cleave_rt_cuda_device_info(0, name, sizeof(name), &major, &minor) != 0)
    return std::string("cannot query GPU 0: ") + name;
  // sm_90 cubins run on compute capability 9.x only.
  std::string chip = bundle.chip;
  if (chip.size() >= 5 && chip.compare(0, 3, "sm_") == 0) {
    int wantMajor = std::atoi(chip.substr(3, chip.size() - 4).c_str());
    if (major != wantMajor)
      return "the bundle's kernels are " + chip + " cubins, but GPU 0 (" +
             name + ") is sm_" + std::to_string(major) + std::to_string(minor) +
             " (emit the bundle for this GPU, or run with --backend cpu)";
  }
  return "";
}

/// checkCudaMachine in a child process: a process that initialized CUDA
/// cannot fork ranks that use it, and -n forks them.
std::string cudaPreflight(const BundleInfo &bundle, int needed) {
  int fds[2];
  if (pipe(fds) != 0)
    return "cannot create a pipe to check the GPUs";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string why = checkCudaMachine(bundle, needed);
    (void)!write(fds[1], why.data(), why.size());
    std::_Exit(0);
  }
  close(fds[1]);
  std::string why;
  char buffer[512];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof(buffer))) > 0)
    why.append(buffer, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status))
    return "the GPU check crashed (signal " + std::to_string(WTERMSIG(status)) +
           ")";
  return why;
}

/// The data of the run: the flags' files, else the bundle's.
Expected<std::unique_ptr<TrainingData>>
openData(const BundleInfo &bundle, std::unique_ptr<MemoryBuffer> &text) {
  DataOptions options = flags.dataOptions("");
  if (options.inputsPath.empty() && options.tokensPath.empty()) {
    if (bundle.dataKind == "inputs") {
      options.inputsPath = bundle.dataFile;
    } else if (bundle.dataKind == "tokens") {
      options.tokensPath = bundle.dataFile;
      if (!flags.tokenBytes.getNumOccurrences())
        options.tokenBytes = bundle.tokenBytes;
    } else {
      auto file = MemoryBuffer::getFile(bundle.dataFile);
      if (!file)
        return createStringError(inconvertibleErrorCode(),
                                 "the bundle's text " + bundle.dataFile + ": " +
                                     file.getError().message());
      text = std::move(*file);
      options.text = text->getBuffer();
    }
  }
  return TrainingData::open(options);
}

} // namespace

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions({&trainCat, &ioCat, &deviceCat, &parallelCat});
  cl::ParseCommandLineOptions(argc, argv,
                              "Train the compiled step of a Cleave bundle\n");
  if (bundleDir.empty())
    return fail("--bundle DIR is missing (start the bundle with DIR/run)");
  Expected<BundleInfo> bundle = BundleInfo::read(bundleDir);
  if (!bundle)
    return fail(toString(bundle.takeError()));
  // The bundle's defaults, where the command line is silent.
  const nlohmann::json &defaults =
      bundle->root.value("defaults", nlohmann::json::object());
  if (!flags.steps.getNumOccurrences() && defaults.contains("steps"))
    flags.steps = defaults["steps"].get<int64_t>();
  if (!flags.lr.getNumOccurrences() && defaults.contains("lr"))
    flags.lr = defaults["lr"].get<double>();
  if (!flags.seed.getNumOccurrences() && defaults.contains("seed"))
    flags.seed = defaults["seed"].get<uint64_t>();
  if (flags.paramsPath.empty() && !flags.resume && !bundle->paramsFile.empty())
    flags.paramsPath = bundle->paramsFile;
  if (Error err = flags.check())
    return fail(toString(std::move(err)));
  if (Error err = flags.checkPaths({}, {}))
    return fail(toString(std::move(err)));
  flags.exportEnvironment();

  std::string backend = backendOpt.empty() ? bundle->backend : backendOpt;
  if (backend != "cpu" && backend != "cuda")
    return fail("unknown --backend '" + backend + "' (cpu or cuda)");
  auto build = bundle->builds.find(backend);
  if (build == bundle->builds.end())
    return fail("this bundle has no " + backend +
                " build (it was emitted "
                "for " +
                bundle->backend + ")");
  int world = flags.world();
  if (world != bundle->world)
    return fail("the bundle was compiled for " + Twine(bundle->world) +
                " ranks (plan '" + bundle->plan + "', mesh " +
                (bundle->mesh.empty() ? "none" : bundle->mesh) +
                ") but this run has " + Twine(world) +
                (bundle->world > 1 && world == 1
                     ? " (run -n " + Twine(bundle->world) +
                           ", or under a launcher with that world size)"
                     : Twine("")));
  if (backend == "cuda") {
    std::string why = cudaPreflight(*bundle, localGpusNeeded());
    if (!why.empty())
      return fail(why);
  }
  if (selftestCollectivesOnly) {
    std::string error = selftestCollectives();
    if (!error.empty())
      return fail(error);
    return 0;
  }
  if (selftest)
    return runSelftest(*bundle, {argv[0], flags.nprocs, selftestSteps,
                                 throughputSteps, flags.seed});

  std::unique_ptr<MemoryBuffer> text;
  Expected<std::unique_ptr<TrainingData>> data = openData(*bundle, text);
  if (!data)
    return fail(toString(data.takeError()));
  int64_t vocab =
      (*data)->textVocab() >= 0 ? (*data)->textVocab() : bundle->vocab;
  if (flags.valDataPath.empty() && !bundle->valFile.empty())
    flags.valDataPath = bundle->valFile;
  Expected<std::unique_ptr<TrainingData>> valData = flags.openValidation(vocab);
  if (!valData)
    return fail(toString(valData.takeError()));

  Expected<TrainJob> job = loadAotJob(build->second);
  if (!job)
    return fail(toString(job.takeError()));
  if (Error err = flags.attachData(*job, **data, valData->get(), vocab))
    return fail(toString(std::move(err)));
  outs() << "bundle " << bundleDir << ": " << backend << " build, "
         << bundle->world << " rank" << (bundle->world > 1 ? "s" : "")
         << (bundle->mesh.empty() ? "" : " on mesh (" + bundle->mesh + ")")
         << "\n";
  RunOptions options = flags.runOptions();
  options.backend = backend;
  options.planText = bundle->plan;
  options.programName = "cleave-bundle-run";
  return runTrainJob(*job, options);
}
