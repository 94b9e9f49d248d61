//===- Selftest.cpp - Check a GPU machine with a bundle -------------------===//

#include "Selftest.h"
#include "cleave/Runtime/CudaRuntime.h"
#include "cleave/Runtime/Runtime.h"
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace cleave::bundle;

namespace {

struct Row {
  std::string check, result, detail;
};

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  return text;
}

/// The GPUs, one line each.
std::vector<std::string> describeGpus() {
  std::vector<std::string> gpus;
  char why[512];
  int32_t count = cleave_rt_cuda_device_count(why, sizeof(why));
  for (int32_t i = 0; i < count; ++i) {
    char name[256];
    int32_t major = 0, minor = 0;
    if (cleave_rt_cuda_device_info(i, name, sizeof(name), &major, &minor) == 0)
      gpus.push_back(format("GPU %d: %s (sm_%d%d)", i, name, major, minor));
  }
  return gpus;
}

} // namespace

/// Every collective of the runtime on a one-rank NCCL communicator.
std::string cleave::bundle::selftestCollectives() {
  cleave_rt_options_t opts;
  cleave_rt_default_options(&opts);
  opts.backend = "cuda";
  opts.rank = 0;
  opts.world_size = 1;
  opts.local_rank = 0;
  if (cleave_rt_init(&opts) != 0)
    return std::string("init: ") + cleave_rt_error_message();
  const int64_t count = 4096;
  auto *in = static_cast<float *>(cleave_rt_alloc(count * 4));
  auto *out = static_cast<float *>(cleave_rt_alloc(count * 4));
  auto reset = [&] {
    for (int64_t i = 0; i < count; ++i) {
      in[i] = float(i % 97) - 48.0f;
      out[i] = -1e30f;
    }
  };
  struct Case {
    const char *name;
    void (*run)(const float *, float *, int64_t);
  } cases[] = {
      {"all_reduce",
       [](const float *i, float *o, int64_t n) {
         cleave_rt_all_reduce(-1, CLEAVE_F32, CLEAVE_SUM, i, o, n);
       }},
      {"all_gather",
       [](const float *i, float *o, int64_t n) {
         cleave_rt_all_gather(-1, CLEAVE_F32, i, o, n);
       }},
      {"reduce_scatter",
       [](const float *i, float *o, int64_t n) {
         cleave_rt_reduce_scatter(-1, CLEAVE_F32, CLEAVE_SUM, i, o, n);
       }},
      {"all_to_all",
       [](const float *i, float *o, int64_t n) {
         cleave_rt_all_to_all(-1, CLEAVE_F32, i, o, n);
       }},
      {"broadcast",
       [](const float *i, float *o, int64_t n) {
         std::memcpy(o, i, size_t(n) * 4);
         cleave_rt_broadcast(-1, 0, CLEAVE_F32, o, n);
       }},
      {"all_reduce_start/wait",
       [](const float *i, float *o, int64_t n) {
         int64_t r =
             cleave_rt_all_reduce_start(-1, CLEAVE_F32, CLEAVE_SUM, i, o, n);
         cleave_rt_wait(r, i, o, nullptr);
       }},
  };
  for (const Case &c : cases) {
    reset();
    c.run(in, out, count);
    if (cleave_rt_failed())
      return std::string(c.name) + ": " + cleave_rt_error_message();
    for (int64_t i = 0; i < count; ++i)
      if (out[i] != in[i])
        return format("%s: element %lld is %g, expected %g", c.name,
                      (long long)i, double(out[i]), double(in[i]));
  }
  cleave_rt_barrier(-1);
  if (cleave_rt_failed())
    return std::string("barrier: ") + cleave_rt_error_message();
  cleave_rt_free(in);
  cleave_rt_free(out);
  cleave_rt_finalize();
  return "";
}

namespace {

/// Runs this runner on the bundle with `args`, output to `log`; the exit
/// status.
int runChild(const SelftestOptions &o, const BundleInfo &bundle,
             std::vector<std::string> args, const std::string &log,
             bool ranks = true) {
  args.insert(args.begin(), {o.self, "--bundle", bundle.dir});
  if (ranks && o.nprocs > 0) {
    args.push_back("-n");
    args.push_back(std::to_string(o.nprocs));
  }
  pid_t pid = fork();
  if (pid == 0) {
    FILE *f = std::freopen(log.c_str(), "w", stdout);
    if (f)
      dup2(fileno(stdout), 2);
    std::vector<char *> argv;
    for (std::string &a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(o.self, argv.data());
    std::_Exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// The last lines of a child's log, for a failure's detail.
std::string tail(const std::string &log, int lines = 3) {
  std::ifstream in(log);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);)
    all.push_back(line);
  std::string out;
  for (size_t i = all.size() > size_t(lines) ? all.size() - lines : 0;
       i < all.size(); ++i)
    out += (out.empty() ? "" : " | ") + all[i];
  return out;
}

/// The f64 tensor `name` of a tensor file, or empty.
std::vector<double> readDoubles(const std::string &path, const char *name) {
  std::vector<double> values;
  cleave_tensor_file *f = cleave_tensor_file_open(path.c_str());
  if (!f)
    return values;
  int32_t dtype;
  int64_t rank, shape[8];
  if (cleave_tensor_file_info(f, name, &dtype, &rank, shape) == 0 &&
      dtype == CLEAVE_F64 && rank == 1) {
    values.resize(size_t(shape[0]));
    if (cleave_tensor_file_read(f, name, values.data(), shape[0] * 8) != 0)
      values.clear();
  }
  cleave_tensor_file_close(f);
  return values;
}

/// The largest absolute difference between the f32 tensors of two
/// parameter files, and the tensor.
std::pair<double, std::string> paramsDifference(const std::string &a,
                                                const std::string &b) {
  double worst = 0;
  std::string where;
  cleave_tensor_file *fa = cleave_tensor_file_open(a.c_str());
  cleave_tensor_file *fb = cleave_tensor_file_open(b.c_str());
  if (!fa || !fb) {
    if (fa)
      cleave_tensor_file_close(fa);
    if (fb)
      cleave_tensor_file_close(fb);
    return {INFINITY, "cannot read the saved parameters"};
  }
  for (int64_t i = 0; i < cleave_tensor_file_count(fa); ++i) {
    const char *name = cleave_tensor_file_name(fa, i);
    int32_t dtype, dtypeB;
    int64_t rank, rankB, shape[8], shapeB[8];
    if (cleave_tensor_file_info(fa, name, &dtype, &rank, shape) ||
        dtype != CLEAVE_F32 ||
        cleave_tensor_file_info(fb, name, &dtypeB, &rankB, shapeB) ||
        dtypeB != dtype || rankB != rank)
      continue;
    int64_t n = 1;
    for (int64_t d = 0; d < rank; ++d)
      n *= shape[d];
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    if (cleave_tensor_file_read(fa, name, x.data(), n * 4) ||
        cleave_tensor_file_read(fb, name, y.data(), n * 4))
      continue;
    for (int64_t k = 0; k < n; ++k) {
      double diff = std::fabs(double(x[k]) - double(y[k]));
      if (diff > worst) {
        worst = diff;
        where = name;
      }
    }
  }
  cleave_tensor_file_close(fa);
  cleave_tensor_file_close(fb);
  return {worst, where};
}

/// "" when the two parameter files hold the same tensors with the same
/// bytes (any element type), else what differs first.
std::string paramsIdentical(const std::string &a, const std::string &b) {
  cleave_tensor_file *fa = cleave_tensor_file_open(a.c_str());
  cleave_tensor_file *fb = cleave_tensor_file_open(b.c_str());
  std::string differs;
  if (!fa || !fb)
    differs = "cannot read the saved parameters";
  for (int64_t i = 0; differs.empty() && i < cleave_tensor_file_count(fa);
       ++i) {
    const char *name = cleave_tensor_file_name(fa, i);
    int32_t dtype, dtypeB;
    int64_t rank, rankB, shape[8], shapeB[8];
    if (cleave_tensor_file_info(fa, name, &dtype, &rank, shape) ||
        cleave_tensor_file_info(fb, name, &dtypeB, &rankB, shapeB) ||
        dtype != dtypeB || rank != rankB ||
        !std::equal(shape, shape + rank, shapeB)) {
      differs = std::string(name) + " is missing or of another shape";
      break;
    }
    int64_t bytes = cleave_rt_dtype_size(dtype);
    for (int64_t d = 0; d < rank; ++d)
      bytes *= shape[d];
    std::vector<char> x(static_cast<size_t>(bytes)), y(x.size());
    if (cleave_tensor_file_read(fa, name, x.data(), bytes) ||
        cleave_tensor_file_read(fb, name, y.data(), bytes))
      differs = std::string("cannot read ") + name;
    else if (x != y)
      differs = std::string(name) + " differs";
  }
  if (fa)
    cleave_tensor_file_close(fa);
  if (fb)
    cleave_tensor_file_close(fb);
  return differs;
}

/// The checkpoint round trip (after the training check, whose straight runs
/// of `o.steps` steps are in `tmp`): half the steps with a checkpoint at the
/// end on the cuda build and on the cpu build; the cuda checkpoint resumed
/// on cuda must end as the straight cuda run, bit for bit (losses and
/// parameters); each build's checkpoint resumed on the other must give the
/// other's straight losses within the training check's `tolerance`.
void checkpointRoundTrip(const SelftestOptions &o, const BundleInfo &bundle,
                         const std::string &tmp, double tolerance,
                         std::vector<Row> &rows) {
  int64_t half = o.steps / 2;
  std::string seed = std::to_string(o.seed);
  std::string steps = std::to_string(o.steps);
  std::string halfSteps = std::to_string(half);
  const char *backends[2] = {"cuda", "cpu"};
  std::string written[2];
  for (int i = 0; i < 2; ++i) {
    std::string b = backends[i], log = tmp + "/ckpt-" + b + ".log";
    int rc = runChild(o, bundle,
                      {"--backend", b, "--steps", halfSteps, "--seed", seed,
                       "--checkpoint", tmp + "/ckpt-" + b, "--checkpoint-every",
                       halfSteps},
                      log);
    if (rc != 0)
      written[i] =
          format("writing the %s checkpoint failed (exit %d): ", b.c_str(),
                 rc) +
          tail(log);
  }
  struct Case {
    int from, on;
    const char *check;
  } cases[] = {{0, 0, "checkpoint resume on cuda: bit-exact"},
               {1, 0, "checkpoint of the cpu build on cuda"},
               {0, 1, "checkpoint of cuda on the cpu build"}};
  for (const Case &c : cases) {
    std::string from = backends[c.from], on = backends[c.on];
    if (!written[c.from].empty()) {
      rows.push_back({c.check, "FAIL", written[c.from]});
      continue;
    }
    std::string out = tmp + "/resumed-" + from + "-on-" + on;
    int rc = runChild(o, bundle,
                      {"--backend", on, "--steps", steps, "--seed", seed,
                       "--checkpoint", tmp + "/ckpt-" + from, "--resume",
                       "--save-losses", out + ".losses", "--save-params",
                       out + ".params"},
                      out + ".log");
    if (rc != 0) {
      rows.push_back({c.check, "FAIL",
                      format("the resumed run failed (exit %d): ", rc) +
                          tail(out + ".log")});
      continue;
    }
    std::vector<double> straight =
        readDoubles(tmp + "/" + on + ".losses", "loss");
    std::vector<double> resumed = readDoubles(out + ".losses", "loss");
    if (straight.size() != size_t(o.steps) ||
        resumed.size() != size_t(o.steps - half)) {
      rows.push_back({c.check, "FAIL",
                      format("%zu losses resumed after step %lld, %zu "
                             "straight; expected %lld and %lld",
                             resumed.size(), (long long)half, straight.size(),
                             (long long)(o.steps - half), (long long)o.steps)});
      continue;
    }
    bool exact = c.from == c.on;
    double worst = 0;
    size_t worstStep = 0;
    for (size_t s = 0; s < resumed.size(); ++s) {
      double want = straight[size_t(half) + s];
      double d =
          exact ? (std::memcmp(&want, &resumed[s], 8) == 0 ? 0 : INFINITY)
                : std::fabs(resumed[s] - want) / std::max(1.0, std::fabs(want));
      if (!(d <= worst)) {
        worst = d;
        worstStep = s;
      }
    }
    std::string where =
        format("step %lld: resumed %.9g, straight %.9g",
               (long long)(half + 1 + worstStep), resumed[worstStep],
               straight[size_t(half) + worstStep]);
    if (exact) {
      std::string params =
          paramsIdentical(tmp + "/" + on + ".params", out + ".params");
      bool ok = worst == 0 && params.empty();
      rows.push_back(
          {c.check, ok ? "PASS" : "FAIL",
           ok           ? format("steps %lld-%lld resumed from the step-%lld "
                                           "checkpoint equal the straight run bit for bit, "
                                           "losses and parameters",
                                 (long long)(half + 1), (long long)o.steps,
                                 (long long)half)
           : worst != 0 ? "the losses differ, first at " + where
                        : "the final parameters differ: " + params});
    } else {
      bool ok = worst <= tolerance;
      rows.push_back({c.check, ok ? "PASS" : "FAIL",
                      format("losses of steps %lld-%lld within %.1e relative "
                             "of the straight %s run (largest at ",
                             (long long)(half + 1), (long long)o.steps, worst,
                             on.c_str()) +
                          where + format("; tolerance %.0e)", tolerance)});
    }
  }
  // The checkpoints may be large (GPT-2 small: parameters and AdamW state);
  // the logs stay.
  for (const char *b : backends)
    std::filesystem::remove_all(tmp + "/ckpt-" + b);
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int cleave::bundle::runSelftest(const BundleInfo &bundle,
                                const SelftestOptions &o) {
  std::vector<Row> rows;
  std::printf("cleave bundle selftest: %s\n", bundle.dir.c_str());
  std::printf("  program: %s, %d rank%s%s%s\n",
              bundle.root.contains("model")
                  ? bundle.root["model"].value("name", "?").c_str()
                  : "a program file",
              bundle.world, bundle.world > 1 ? "s" : "",
              bundle.mesh.empty() ? "" : ", mesh ", bundle.mesh.c_str());
  std::vector<std::string> gpus = describeGpus();
  for (const std::string &g : gpus)
    std::printf("  %s\n", g.c_str());
  const char *libs = std::getenv("CLEAVE_BUNDLE_CUDA_LIBS");
  std::printf("  CUDA libraries: %s\n", libs ? libs : "(from the loader)");
  std::fflush(stdout);
  if (bundle.backend != "cuda") {
    std::printf("this is a cpu bundle: --selftest checks GPUs (emit the "
                "bundle with --backend cuda)\n");
    return 1;
  }
  rows.push_back({"gpu", "PASS",
                  format("%zu visible, the kernels are %s cubins", gpus.size(),
                         bundle.chip.c_str())});

  // In a new process: CUDA cannot be used in a fork of a process that
  // initialized it (this one did, to count the GPUs).
  std::string collectivesLog =
      "/tmp/cleave-selftest-collectives-" + std::to_string(getpid()) + ".log";
  int collectivesRc =
      runChild(o, bundle, {"--selftest-collectives"}, collectivesLog, false);
  std::string error = collectivesRc == 0 ? ""
                                         : format("exit %d: ", collectivesRc) +
                                               tail(collectivesLog, 2);
  std::remove(collectivesLog.c_str());
  rows.push_back({"collectives (NCCL, 1 rank)", error.empty() ? "PASS" : "FAIL",
                  error.empty() ? "all_reduce, all_gather, reduce_scatter, "
                                  "all_to_all, broadcast, async all_reduce, "
                                  "barrier"
                                : error});

  // The same steps on both builds, from the same parameters and batches.
  char tmpl[] = "/tmp/cleave-selftest-XXXXXX";
  std::string tmp = mkdtemp(tmpl) ? tmpl : "/tmp";
  std::string seed = std::to_string(o.seed);
  std::string steps = std::to_string(o.steps);
  int status[2];
  const char *backends[2] = {"cuda", "cpu"};
  for (int i = 0; i < 2; ++i) {
    std::string b = backends[i];
    status[i] = runChild(o, bundle,
                         {"--backend", b, "--steps", steps, "--seed", seed,
                          "--log-every", "1", "--save-losses",
                          tmp + "/" + b + ".losses", "--save-params",
                          tmp + "/" + b + ".params"},
                         tmp + "/" + b + ".log");
  }
  bool lowPrecision = bundle.dtype == "bf16" || bundle.dtype == "f16";
  double tolerance = lowPrecision ? 2e-2 : 1e-4;
  std::string trainCheck =
      format("%s training steps: cuda = cpu", steps.c_str());
  if (status[0] != 0 || status[1] != 0) {
    int which = status[0] != 0 ? 0 : 1;
    rows.push_back({trainCheck, "FAIL",
                    format("the %s run failed (exit %d): ", backends[which],
                           status[which]) +
                        tail(tmp + "/" + backends[which] + ".log")});
  } else {
    std::vector<double> gpu = readDoubles(tmp + "/cuda.losses", "loss");
    std::vector<double> cpu = readDoubles(tmp + "/cpu.losses", "loss");
    double worst = gpu.size() == cpu.size() && !gpu.empty() ? 0 : INFINITY;
    size_t worstStep = 0;
    for (size_t s = 0; s < std::min(gpu.size(), cpu.size()); ++s) {
      double d = std::fabs(gpu[s] - cpu[s]) / std::max(1.0, std::fabs(cpu[s]));
      if (!(d <= worst)) {
        worst = d;
        worstStep = s;
      }
    }
    auto [paramDiff, paramName] =
        paramsDifference(tmp + "/cpu.params", tmp + "/cuda.params");
    bool ok = worst <= tolerance;
    rows.push_back(
        {trainCheck, ok ? "PASS" : "FAIL",
         format("losses within %.1e relative (largest %.2e at step %zu: "
                "cuda %.6f, cpu %.6f; tolerance %.0e for %s); largest "
                "parameter difference after the steps %.2e (%s; each AdamW "
                "step moves a weight by up to lr)",
                worst, worst, worstStep + 1, gpu.empty() ? NAN : gpu[worstStep],
                cpu.empty() ? NAN : cpu[worstStep], tolerance,
                bundle.dtype.empty() ? "this program" : bundle.dtype.c_str(),
                paramDiff, paramName.c_str())});
  }

  if (status[0] == 0 && status[1] == 0 && o.steps >= 2)
    checkpointRoundTrip(o, bundle, tmp, tolerance, rows);

  if (o.throughputSteps > 1) {
    std::string n = std::to_string(o.throughputSteps);
    int rc = runChild(o, bundle,
                      {"--backend", "cuda", "--steps", n, "--seed", seed,
                       "--log-every", n, "--save-step-times",
                       tmp + "/throughput.times"},
                      tmp + "/throughput.log");
    std::vector<double> seconds =
        readDoubles(tmp + "/throughput.times", "step_seconds");
    if (rc != 0 || seconds.size() < 2) {
      rows.push_back({"throughput", "FAIL",
                      format("the run failed (exit %d): ", rc) +
                          tail(tmp + "/throughput.log")});
    } else {
      seconds.erase(seconds.begin()); // warm-up
      double step = median(seconds);
      std::string detail =
          format("%.3f ms/step (median of %zu)", step * 1e3, seconds.size());
      if (bundle.tokensPerStep > 0)
        detail += format(", %.0f tokens/s", bundle.tokensPerStep / step);
      char name[256] = "";
      int32_t major, minor;
      cleave_rt_cuda_device_info(0, name, sizeof(name), &major, &minor);
      if (const nlohmann::json *p = bundle.predictionFor(name)) {
        double predicted = p->value("step_seconds", 0.0);
        double flops = p->value("model_flops_per_step", 0.0);
        double peak = p->value("peak_flops_per_gpu", 0.0) * p->value("gpus", 1);
        double mfu = peak > 0 ? flops / step / peak : 0;
        detail += format("; MFU %.2f%%; the cost model predicts %.3f ms/step, "
                         "MFU %.2f%% on %s (measured / predicted time %.2f)",
                         mfu * 100, predicted * 1e3, p->value("mfu", 0.0) * 100,
                         p->value("gpu", "?").c_str(),
                         predicted > 0 ? step / predicted : 0.0);
      } else {
        detail += "; no prediction for this GPU kind in the bundle";
      }
      rows.push_back({"throughput", "PASS", detail});
    }
  }

  size_t width = 0;
  for (const Row &r : rows)
    width = std::max(width, r.check.size());
  int failed = 0;
  std::printf("\n%-*s  result  detail\n", int(width), "check");
  for (const Row &r : rows) {
    std::printf("%-*s  %-6s  %s\n", int(width), r.check.c_str(),
                r.result.c_str(), r.detail.c_str());
    failed += r.result == "FAIL";
  }
  std::printf("\n%s: %d of %zu checks failed (logs in %s)\n",
              failed ? "FAILED" : "PASSED", failed, rows.size(), tmp.c_str());
  return failed ? 1 : 0;
}
