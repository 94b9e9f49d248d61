//===- OpBench.cpp - Time each lowered op kind at GPT shapes --------------===//
//
//   cleave-bench-ops [--filter attention] [--runs 20]
//
// Compiles one small function per op kind (shapes of a GPT with hidden 256,
// 8 heads, sequence 128, batch 8), runs it, and prints the median time and
// the effective memory bandwidth, to show where a training step's time goes
// outside the GEMMs.
//
//===----------------------------------------------------------------------===//

#include "cleave/Execution/Compiler.h"
#include "cleave/Runtime/Runtime.h"
#include "cleave/Support/ClosedPipeLLVM.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cstring>

using namespace llvm;
using namespace mlir::cleave;

namespace {
cl::OptionCategory category("cleave-bench-ops options");
cl::opt<std::string> filter("filter", cl::init(""),
                            cl::desc("Only cases whose name contains this"),
                            cl::cat(category));
cl::opt<int> runs("runs", cl::init(20),
                  cl::desc("Timed runs per case (the median is printed)"),
                  cl::cat(category));

struct Case {
  const char *name;
  const char *args;
  const char *body;
  const char *result;
};

// x: activations [8, 128, 256]; q/k/v: [8, 128, 8, 32]; h: [8, 128, 1024].
const Case cases[] = {
    {"add", "%x: tensor<8x128x256xf32>, %y: tensor<8x128x256xf32>",
     "%r = cleave.add %x, %y : tensor<8x128x256xf32>", "tensor<8x128x256xf32>"},
    {"gelu", "%x: tensor<8x128x1024xf32>",
     "%r = cleave.gelu %x : tensor<8x128x1024xf32>", "tensor<8x128x1024xf32>"},
    {"gelu_grad", "%x: tensor<8x128x1024xf32>, %d: tensor<8x128x1024xf32>",
     "%r = cleave.gelu_grad %x, %d : tensor<8x128x1024xf32>",
     "tensor<8x128x1024xf32>"},
    {"layer_norm",
     "%x: tensor<8x128x256xf32>, %g: tensor<256xf32>, %b: tensor<256xf32>",
     "%r = cleave.layer_norm %x, %g, %b : (tensor<8x128x256xf32>, "
     "tensor<256xf32>, tensor<256xf32>) -> tensor<8x128x256xf32>",
     "tensor<8x128x256xf32>"},
    {"layer_norm_grad",
     "%x: tensor<8x128x256xf32>, %g: tensor<256xf32>, %d: "
     "tensor<8x128x256xf32>",
     "%r:3 = cleave.layer_norm_grad %x, %g, %d : (tensor<8x128x256xf32>, "
     "tensor<256xf32>, tensor<8x128x256xf32>) -> (tensor<8x128x256xf32>, "
     "tensor<256xf32>, tensor<256xf32>)",
     "tensor<8x128x256xf32>"},
    {"softmax", "%x: tensor<8x8x128x128xf32>",
     "%r = cleave.softmax %x dim = 3 : tensor<8x8x128x128xf32>",
     "tensor<8x8x128x128xf32>"},
    {"attention",
     "%q: tensor<8x128x8x32xf32>, %k: tensor<8x128x8x32xf32>, %v: "
     "tensor<8x128x8x32xf32>",
     "%r = cleave.attention %q, %k, %v {causal} : (tensor<8x128x8x32xf32>, "
     "tensor<8x128x8x32xf32>, tensor<8x128x8x32xf32>) -> "
     "tensor<8x128x8x32xf32>",
     "tensor<8x128x8x32xf32>"},
    {"attention_grad",
     "%q: tensor<8x128x8x32xf32>, %k: tensor<8x128x8x32xf32>, %v: "
     "tensor<8x128x8x32xf32>, %d: tensor<8x128x8x32xf32>",
     "%r:3 = cleave.attention_grad %q, %k, %v, %d {causal} : "
     "(tensor<8x128x8x32xf32>, tensor<8x128x8x32xf32>, "
     "tensor<8x128x8x32xf32>, tensor<8x128x8x32xf32>) -> "
     "(tensor<8x128x8x32xf32>, tensor<8x128x8x32xf32>, "
     "tensor<8x128x8x32xf32>)",
     "tensor<8x128x8x32xf32>"},
    {"linear", "%x: tensor<8x128x256xf32>, %w: tensor<1024x256xf32>",
     "%r = cleave.matmul %x, %w {transpose_rhs} : (tensor<8x128x256xf32>, "
     "tensor<1024x256xf32>) -> tensor<8x128x1024xf32>",
     "tensor<8x128x1024xf32>"},
    {"bias_add", "%x: tensor<8x128x1024xf32>, %b: tensor<1024xf32>",
     "%bb = cleave.broadcast %b dims = [2] : tensor<1024xf32> -> "
     "tensor<8x128x1024xf32>\n  %r = cleave.add %x, %bb : "
     "tensor<8x128x1024xf32>",
     "tensor<8x128x1024xf32>"},
    {"bias_grad", "%d: tensor<8x128x1024xf32>",
     "%r = cleave.reduce_sum %d dims = [0, 1] : tensor<8x128x1024xf32> -> "
     "tensor<1024xf32>",
     "tensor<1024xf32>"},
    {"cross_entropy", "%l: tensor<8x128x65xf32>, %y: tensor<8x128xi32>",
     "%r = cleave.cross_entropy %l, %y : (tensor<8x128x65xf32>, "
     "tensor<8x128xi32>) -> tensor<f32>",
     "tensor<f32>"},
    {"embedding_grad", "%ids: tensor<8x128xi32>, %d: tensor<8x128x256xf32>",
     "%r = cleave.embedding_grad %ids, %d : (tensor<8x128xi32>, "
     "tensor<8x128x256xf32>) -> tensor<65x256xf32>",
     "tensor<65x256xf32>"},
    {"adamw",
     "%p: tensor<1024x256xf32>, %g: tensor<1024x256xf32>, %m: "
     "tensor<1024x256xf32>, %v: tensor<1024x256xf32>, %lr: tensor<f32>, %t: "
     "tensor<f32>",
     "%r:3 = cleave.adamw %p, %g, %m, %v, %lr, %t : (tensor<1024x256xf32>, "
     "tensor<1024x256xf32>, tensor<1024x256xf32>, tensor<1024x256xf32>, "
     "tensor<f32>, tensor<f32>) -> (tensor<1024x256xf32>, "
     "tensor<1024x256xf32>, tensor<1024x256xf32>)",
     "tensor<1024x256xf32>"},
};

/// Marks every argument an input so the manifest accepts it.
std::string program(const Case &c) {
  std::string args = c.args;
  std::string marked;
  size_t pos = 0;
  int n = 0;
  while (pos < args.size()) {
    size_t comma = args.find(", %", pos);
    std::string arg = args.substr(
        pos, comma == std::string::npos ? std::string::npos : comma - pos);
    marked += (n ? ", " : "") + arg + " {cleave.input = \"a" +
              std::to_string(n) + "\"}";
    ++n;
    if (comma == std::string::npos)
      break;
    pos = comma + 2;
  }
  std::string body = c.body;
  std::string result = body.find("%r:") != std::string::npos ? "%r#0" : "%r";
  return std::string("func.func @f(") + marked + ") -> " + c.result + " {\n  " +
         body + "\n  return " + result + " : " + c.result + "\n}\n";
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  ::cleave::exitQuietlyOnClosedStdout();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Time lowered cleave ops\n");
  cleave_rt_options_t options;
  cleave_rt_default_options(&options);
  if (cleave_rt_init(&options) != 0)
    return 1;
  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  outs() << "op                median us       GB/s\n";
  for (const Case &c : cases) {
    if (!StringRef(c.name).contains(filter))
      continue;
    auto module = mlir::parseSourceString<mlir::ModuleOp>(program(c), &context);
    if (!module)
      return 1;
    auto compiled = JitProgram::compile(*module);
    if (!compiled) {
      errs() << c.name << ": " << toString(compiled.takeError()) << "\n";
      return 1;
    }
    const FunctionSpec *spec = (*compiled)->getManifest().lookup("f");
    EntryFn entry = cantFail((*compiled)->lookup("f"));
    std::vector<std::vector<char>> storage;
    std::vector<void *> buffers;
    int64_t bytes = 0;
    for (const BufferSpec &b : spec->buffers) {
      storage.emplace_back(std::max<int64_t>(b.numBytes(), 8), 0);
      for (size_t i = 0;
           b.dtype == CLEAVE_F32 && i + 4 <= storage.back().size(); i += 4) {
        float v = 0.01f * static_cast<float>(i % 97);
        std::memcpy(storage.back().data() + i, &v, 4);
      }
      buffers.push_back(storage.back().data());
      bytes += b.numBytes();
    }
    std::vector<double> times;
    for (int r = 0; r < runs + 2; ++r) {
      double t = cleave_rt_now();
      entry(buffers.data());
      if (r >= 2)
        times.push_back(cleave_rt_now() - t);
    }
    std::sort(times.begin(), times.end());
    double median = times[times.size() / 2];
    outs() << format("%-16s %10.1f %10.2f\n", c.name, 1e6 * median,
                     bytes / median / 1e9);
  }
  cleave_rt_finalize();
  return 0;
}
