//===- ManifestTest.cpp - Buffer manifests: extraction and JSON -----------===//
//
// A manifest read from a module names every buffer's runtime element type
// (from the one table of DTypes.def), survives the JSON round trip that AOT
// objects embed, and a malformed manifest is refused naming its field.
//
//===----------------------------------------------------------------------===//

#include "cleave/Execution/Manifest.h"
#include "cleave/Dialect/CleaveDialect.h"
#include "cleave/Runtime/Runtime.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/Error.h"
#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::cleave;

namespace {

std::string errorOf(llvm::Expected<ProgramManifest> m) {
  if (m)
    return "(parsed)";
  return llvm::toString(m.takeError());
}

TEST(ManifestTest, ElementTypesGetTheRuntimeCodes) {
  MLIRContext context;
  context.loadDialect<CleaveDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
      R"(func.func @f(%a: tensor<2xf32> {cleave.input = "a"},
                   %b: tensor<3xbf16> {cleave.input = "b"},
                   %c: tensor<4xi64> {cleave.input = "c"},
                   %d: tensor<1xf16> {cleave.input = "d"},
                   %e: tensor<5xi32> {cleave.input = "e"},
                   %g: tensor<6xf64> {cleave.input = "g"})
             -> (tensor<2xf32> {cleave.output = "y"}) {
           return %a : tensor<2xf32>
         })",
      &context);
  ASSERT_TRUE(module);
  FailureOr<ProgramManifest> m = extractManifest(*module);
  ASSERT_TRUE(succeeded(m));
  ASSERT_EQ(m->functions.size(), 1u);
  std::vector<int32_t> codes;
  for (const BufferSpec &b : m->functions[0].buffers)
    codes.push_back(b.dtype);
  EXPECT_EQ(codes, (std::vector<int32_t>{CLEAVE_F32, CLEAVE_BF16, CLEAVE_I64,
                                         CLEAVE_F16, CLEAVE_I32, CLEAVE_F64,
                                         CLEAVE_F32}));
  EXPECT_EQ(m->functions[0].buffers[1].numBytes(), 6);
}

TEST(ManifestTest, UnsupportedElementTypeNamesTheKnownOnes) {
  MLIRContext context;
  context.loadDialect<CleaveDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
      "func.func @f(%a: tensor<2xi8> {cleave.input = \"a\"}) { return }",
      &context);
  ASSERT_TRUE(module);
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  EXPECT_TRUE(failed(extractManifest(*module)));
  EXPECT_NE(message.find("element type 'i8'"), std::string::npos) << message;
  EXPECT_NE(message.find("(f32, f64, bf16, f16, i32 or i64)"),
            std::string::npos)
      << message;
}

TEST(ManifestTest, JsonRoundTrip) {
  ProgramManifest m;
  FunctionSpec s0{"stage0", {}}, s1{"stage1", {}}, e0{"eval0", {}},
      e1{"eval1", {}};
  BufferSpec w;
  w.role = BufferSpec::Role::Param;
  w.name = "w";
  w.shape = {4, 8};
  w.dtype = CLEAVE_BF16;
  w.init = 2;
  w.initScale = 0.5;
  w.layout = {{}, {1}};
  BufferSpec ids;
  ids.name = "ids";
  ids.shape = {3};
  ids.dtype = CLEAVE_I64;
  s0.buffers = {w, ids};
  m.functions = {s0, s1, e0, e1};
  m.mesh = MeshSpec{{"pp", "tp"}, {2, 2}};
  m.groups = {{1}, {0, 1}};
  m.pipeline = PipelineSpec{0, {"stage0", "stage1"}, {}};
  m.pipeline->entries["eval_step"] = {"eval0", "eval1"};

  llvm::Expected<ProgramManifest> back = ProgramManifest::fromJSON(m.toJSON());
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  ASSERT_EQ(back->functions.size(), 4u);
  const BufferSpec &b = back->functions[0].buffers[0];
  EXPECT_EQ(b.role, BufferSpec::Role::Param);
  EXPECT_EQ(b.name, "w");
  EXPECT_EQ(b.shape, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(b.dtype, CLEAVE_BF16);
  EXPECT_EQ(b.init, 2);
  EXPECT_EQ(b.initScale, 0.5);
  EXPECT_EQ(b.layout, (std::vector<std::vector<int64_t>>{{}, {1}}));
  EXPECT_EQ(back->functions[0].buffers[1].dtype, CLEAVE_I64);
  EXPECT_EQ(back->functions[0].buffers[1].role, BufferSpec::Role::Input);
  ASSERT_TRUE(back->mesh);
  EXPECT_EQ(back->mesh->toString(), "pp=2, tp=2");
  EXPECT_EQ(back->groups, m.groups);
  ASSERT_TRUE(back->pipeline);
  EXPECT_EQ(back->pipeline->stages, m.pipeline->stages);
  EXPECT_EQ(back->pipeline->entries, m.pipeline->entries);
  // Each pipelined step runs its own stage function; any other step runs
  // as itself.
  EXPECT_EQ(back->entryFor("train_step", 3), "stage1");
  EXPECT_EQ(back->entryFor("eval_step", 1), "eval0");
  EXPECT_EQ(back->entryFor("eval_step", 2), "eval1");
  EXPECT_EQ(back->entryFor("other", 2), "other");
  EXPECT_EQ(back->stepFunctions("eval_step").size(), 2u);
}

TEST(ManifestTest, MalformedManifestsNameTheField) {
  EXPECT_EQ(errorOf(ProgramManifest::fromJSON("{")),
            "manifest: not valid JSON");
  EXPECT_EQ(errorOf(ProgramManifest::fromJSON(R"({"format": "x"})")),
            "manifest: not a cleave manifest (field 'format')");
  EXPECT_EQ(errorOf(ProgramManifest::fromJSON(R"({"format":
                "cleave-manifest"})")),
            "manifest: missing array 'functions'");
  std::string buffer = R"({"format": "cleave-manifest", "functions": [
      {"name": "f", "buffers": [{"role": "input", "name": "x",
       "shape": [2], "dtype": "DTYPE"}]}]})";
  auto withDType = [&](const std::string &dtype) {
    std::string text = buffer;
    text.replace(text.find("DTYPE"), 5, dtype);
    return ProgramManifest::fromJSON(text);
  };
  EXPECT_EQ(errorOf(withDType("u8")), "manifest: functions[0].buffers[0]."
                                      "dtype: unknown element type 'u8'");
  llvm::Expected<ProgramManifest> ok = withDType("f16");
  ASSERT_TRUE(bool(ok)) << llvm::toString(ok.takeError());
  EXPECT_EQ(ok->functions[0].buffers[0].dtype, CLEAVE_F16);
  EXPECT_EQ(errorOf(ProgramManifest::fromJSON(
                R"({"format": "cleave-manifest", "functions": [
                {"name": "f", "buffers": [{"role": "input", "name": "x",
                 "shape": [-1], "dtype": "f32"}]}]})")),
            "manifest: functions[0].buffers[0].shape: dimensions are "
            "non-negative integers");
  EXPECT_EQ(errorOf(ProgramManifest::fromJSON(
                R"({"format": "cleave-manifest", "functions": [
                {"name": "f", "buffers": []}], "mesh": {"axes": ["pp"],
                "shape": [1]}, "pipeline": {"axis": 0, "stages": ["f"],
                "entries": {"eval_step": ["g"]}}})")),
            "manifest: pipeline.entries.eval_step: one name of a function of "
            "the manifest per pipeline coordinate");
}

} // namespace
