//===- CompileCacheTest.cpp - Keys and bounds of the compile cache --------===//
//
// The key changes with the program and every option the code depends on,
// and not with locations; the cache is trimmed to its bound by last use,
// removes what writers that died left behind, and keeps the newest entry.
//
//===----------------------------------------------------------------------===//

#include "cleave/Execution/CompileCache.h"
#include "cleave/Dialect/CleaveDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include <gtest/gtest.h>
#include <sys/time.h>

using namespace mlir;
using namespace mlir::cleave;

namespace {

OwningOpRef<ModuleOp> parse(MLIRContext &ctx, llvm::StringRef text) {
  ctx.loadDialect<func::FuncDialect>();
  return parseSourceString<ModuleOp>(text, &ctx);
}

TEST(CompileCacheTest, KeyFollowsProgramAndOptionsNotLocations) {
  MLIRContext ctx;
  auto a = parse(ctx, R"(func.func @f(%x: f32) -> f32 {
    return %x : f32 loc("a.mlir":1:1)
  })");
  auto moved = parse(ctx, R"(func.func @f(%x: f32) -> f32 {
    return %x : f32 loc("b.mlir":7:3)
  })");
  auto other = parse(ctx, R"(func.func @g(%x: f32) -> f32 {
    return %x : f32
  })");
  ASSERT_TRUE(a && moved && other);
  CompileOptions o;
  std::string key = CompileCache::key(*a, o);
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key, CompileCache::key(*a, o));
  EXPECT_EQ(key, CompileCache::key(*moved, o));
  EXPECT_NE(key, CompileCache::key(*other, o));
  CompileOptions o2 = o;
  o2.optLevel = 2;
  EXPECT_NE(key, CompileCache::key(*a, o2));
  CompileOptions cuda = o;
  cuda.target = Target::CUDA;
  EXPECT_NE(key, CompileCache::key(*a, cuda));
  CompileOptions novec = o;
  novec.pipeline.vectorize = false;
  EXPECT_NE(key, CompileCache::key(*a, novec));
  CompileOptions untiled = o;
  untiled.pipeline.attentionTile = 0;
  EXPECT_NE(key, CompileCache::key(*a, untiled));
  CompileOptions cudaUntiled = cuda;
  cudaUntiled.cuda.attentionTile = 0;
  EXPECT_NE(CompileCache::key(*a, cuda), CompileCache::key(*a, cudaUntiled));
}

/// A file of `bytes` bytes last used `agoSeconds` ago.
void makeFile(const std::string &path, size_t bytes, int agoSeconds) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  ASSERT_FALSE(ec) << path;
  os << std::string(bytes, 'x');
  os.close();
  timeval times[2];
  gettimeofday(&times[0], nullptr);
  times[0].tv_sec -= agoSeconds;
  times[1] = times[0];
  ASSERT_EQ(utimes(path.c_str(), times), 0);
}

TEST(CompileCacheTest, TrimKeepsTheMostRecentlyUsedWithinTheBound) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("cleave-cache", dir));
  std::string d = dir.str().str();
  makeFile(d + "/step-old.so", 400, 300);
  makeFile(d + "/step-mid.so", 400, 200);
  makeFile(d + "/step-new.so", 400, 100);
  makeFile(d + "/step-new.so.tmp.12.o", 10, 2 * 3600); // a dead writer's
  makeFile(d + "/step-live.so.tmp.13", 10, 10);        // a live writer's
  makeFile(d + "/notes.txt", 5000, 5000);              // not the cache's
  CompileCacheOptions o;
  o.dir = d;
  o.maxBytes = 900;
  CompileCache cache(o);
  EXPECT_EQ(cache.trim(), 2); // step-old.so and the dead writer's file
  EXPECT_FALSE(llvm::sys::fs::exists(d + "/step-old.so"));
  EXPECT_FALSE(llvm::sys::fs::exists(d + "/step-new.so.tmp.12.o"));
  EXPECT_TRUE(llvm::sys::fs::exists(d + "/step-mid.so"));
  EXPECT_TRUE(llvm::sys::fs::exists(d + "/step-new.so"));
  EXPECT_TRUE(llvm::sys::fs::exists(d + "/step-live.so.tmp.13"));
  EXPECT_TRUE(llvm::sys::fs::exists(d + "/notes.txt"));
  // A lookup renews the use time: the older entry becomes the newest.
  ASSERT_TRUE(cache.lookup("mid"));
  EXPECT_FALSE(cache.lookup("old"));
  o.maxBytes = 100; // below any one entry: the newest still stays
  EXPECT_EQ(CompileCache(o).trim(), 1);
  EXPECT_TRUE(llvm::sys::fs::exists(d + "/step-mid.so"));
  EXPECT_FALSE(llvm::sys::fs::exists(d + "/step-new.so"));
  o.enabled = false;
  EXPECT_FALSE(CompileCache(o).lookup("mid"));
  llvm::sys::fs::remove_directories(d);
}

} // namespace
