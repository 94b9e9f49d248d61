//===- cleave-models.cpp - Emit model-zoo programs ------------------------===//
//
//   cleave-models --list
//   cleave-models --model gpt2-small --batch 8 --dtype bf16 -o gpt2.mlir
//   cleave-models --model tiny-gpt --layers 4 --hidden 256 --heads 8
//
//===----------------------------------------------------------------------===//

#include "cleave/Models/ModelZoo.h"
#include "cleave/Support/ClosedPipeLLVM.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace {
cl::OptionCategory category("Model options");
cl::opt<bool> list("list", cl::desc("List the presets and exit"),
                   cl::cat(category));
cl::opt<std::string> model("model", cl::desc("Preset to start from"),
                           cl::init("tiny-gpt"), cl::cat(category));
cl::opt<std::string> arch("arch", cl::desc("Override: mlp, gpt or llama"),
                          cl::cat(category));
cl::opt<int64_t> layers("layers", cl::desc("Override: layers"), cl::init(-1),
                        cl::cat(category));
cl::opt<int64_t> hidden("hidden", cl::desc("Override: hidden size"),
                        cl::init(-1), cl::cat(category));
cl::opt<int64_t> heads("heads", cl::desc("Override: attention heads"),
                       cl::init(-1), cl::cat(category));
cl::opt<int64_t> kvHeads("kv-heads", cl::desc("Override: key/value heads"),
                         cl::init(-1), cl::cat(category));
cl::opt<int64_t> ffn("ffn", cl::desc("Override: feed-forward size"),
                     cl::init(-1), cl::cat(category));
cl::opt<int64_t> vocab("vocab", cl::desc("Override: vocabulary / classes"),
                       cl::init(-1), cl::cat(category));
cl::opt<int64_t> seqLen("seq", cl::desc("Override: sequence length"),
                        cl::init(-1), cl::cat(category));
cl::opt<int64_t> batch("batch", cl::desc("Sequences per step"), cl::init(-1),
                       cl::cat(category));
cl::opt<std::string> dtype("dtype", cl::desc("Compute type: f32, bf16, f16"),
                           cl::cat(category));
cl::opt<double> dropout("dropout", cl::desc("Override: dropout rate"),
                        cl::init(-1.0), cl::cat(category));
cl::opt<std::string> output("o", cl::desc("Output file"), cl::init("-"),
                            cl::cat(category));
cl::opt<bool> locations(
    "locations",
    cl::desc("Print op locations (\"tiny-gpt.h.0.attn.q\": model, layer, "
             "weight), so that errors of tools reading the output name them"),
    cl::cat(category));

int fail(const Twine &message) {
  errs() << "cleave-models: error: " << message << "\n";
  return 1;
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  ::cleave::exitQuietlyOnClosedStdout();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Cleave model zoo\n");

  if (list) {
    outs()
        << "preset           arch    layers  hidden  heads    kv      ffn    "
           "vocab    seq   parameters\n";
    for (const std::string &name : cleave::presetNames()) {
      cleave::ModelConfig c = *cleave::lookupPreset(name);
      outs() << format("%-16s %-6s %7lld %7lld %6lld %5lld %8lld %8lld %6lld "
                       "%11.3fB\n",
                       name.c_str(), cleave::toString(c.arch),
                       (long long)c.layers, (long long)c.hidden,
                       (long long)c.heads, (long long)c.kvHeads,
                       (long long)c.ffnHidden, (long long)c.vocab,
                       (long long)c.seqLen, c.numParameters() / 1e9);
    }
    return 0;
  }

  std::optional<cleave::ModelConfig> config = cleave::lookupPreset(model);
  if (!config)
    return fail("unknown preset '" + model + "' (see --list)");
  if (!arch.empty()) {
    std::optional<cleave::Architecture> a = cleave::parseArchitecture(arch);
    if (!a)
      return fail("unknown --arch '" + arch + "' (mlp, gpt or llama)");
    config->arch = *a;
  }
  for (auto [opt, field] :
       {std::pair{&layers, &config->layers},
        std::pair{&hidden, &config->hidden}, std::pair{&heads, &config->heads},
        std::pair{&kvHeads, &config->kvHeads},
        std::pair{&ffn, &config->ffnHidden}, std::pair{&vocab, &config->vocab},
        std::pair{&seqLen, &config->seqLen}, std::pair{&batch, &config->batch}})
    if (*opt != -1)
      *field = *opt;
  if (heads != -1 && kvHeads == -1 && config->arch == cleave::Architecture::GPT)
    config->kvHeads = config->heads;
  if (dropout >= 0.0)
    config->dropout = dropout;
  if (!dtype.empty()) {
    std::optional<cleave::DType> d = cleave::parseDType(dtype);
    if (!d)
      return fail("unknown --dtype '" + dtype + "' (f32, bf16, f16, f8e4m3)");
    config->dtype = *d;
  }
  bool customized = !arch.empty() || layers != -1 || hidden != -1 ||
                    heads != -1 || kvHeads != -1 || ffn != -1 || vocab != -1 ||
                    seqLen != -1;
  if (customized)
    config->name = "custom";

  mlir::MLIRContext context;
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::cleave::buildModel(&context, *config, error);
  if (!module)
    return fail("invalid model configuration: " + error);
  if (mlir::failed(mlir::verify(*module)))
    return fail("the generated module does not verify (a bug in the zoo)");

  auto file = mlir::openOutputFile(output, &error);
  if (!file)
    return fail(error);
  mlir::OpPrintingFlags flags;
  if (locations)
    flags.enableDebugInfo();
  module->print(file->os(), flags);
  file->keep();
  return 0;
}
