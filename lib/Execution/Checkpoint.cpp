//===- Checkpoint.cpp - Sharded, asynchronous, resumable checkpoints ------===//
//
// Checkpoint.h has the layout and the protocol.
//
//===----------------------------------------------------------------------===//

#include "cleave/Execution/Checkpoint.h"
#include "cleave/Execution/Layout.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <map>
#include <tuple>

using namespace mlir::cleave;
using nlohmann::json;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

static const char *kManifest = "manifest.json";

std::string mlir::cleave::checkpointStepDir(llvm::StringRef dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld", (long long)step);
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  return std::string(path);
}

/// Step folders of `dir` (step number, path), sorted by step.
static std::vector<std::pair<int64_t, std::string>>
stepFolders(llvm::StringRef dir) {
  std::vector<std::pair<int64_t, std::string>> folders;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    int64_t step;
    if (name.consume_front("step-") && !name.getAsInteger(10, step))
      folders.emplace_back(step, it->path());
  }
  llvm::sort(folders);
  return folders;
}

static bool committed(llvm::StringRef stepDir) {
  llvm::SmallString<256> path(stepDir);
  llvm::sys::path::append(path, kManifest);
  return llvm::sys::fs::exists(path);
}

std::optional<std::string> mlir::cleave::latestCheckpoint(llvm::StringRef dir) {
  auto folders = stepFolders(dir);
  for (auto it = folders.rbegin(); it != folders.rend(); ++it)
    if (committed(it->second))
      return it->second;
  return std::nullopt;
}

int mlir::cleave::removeUncommittedCheckpoints(llvm::StringRef dir,
                                               int64_t keepStep) {
  int removed = 0;
  for (auto &[step, path] : stepFolders(dir))
    if (step != keepStep && !committed(path) &&
        !llvm::sys::fs::remove_directories(path))
      ++removed;
  return removed;
}

/// Writes `text` to `path` atomically (temporary file, then rename).
static llvm::Error writeAtomically(const std::string &path,
                                   const std::string &text) {
  std::string temp = path + ".tmp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(temp, ec);
    if (ec)
      return makeError("cannot write " + temp + ": " + ec.message());
    out << text;
    out.close();
    if (out.has_error())
      return makeError("cannot write " + temp);
  }
  if (std::error_code ec = llvm::sys::fs::rename(temp, path))
    return makeError("cannot rename " + temp + ": " + ec.message());
  return llvm::Error::success();
}

static llvm::Expected<json> readJson(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return makeError("cannot read " + path + ": " +
                     buffer.getError().message());
  try {
    return json::parse((*buffer)->getBuffer().str());
  } catch (const std::exception &e) {
    return makeError(path + " is not valid JSON: " + e.what());
  }
}

//===----------------------------------------------------------------------===//
// Saving
//===----------------------------------------------------------------------===//

std::vector<Trainer::ShardTensor> Trainer::checkpointShard() const {
  std::vector<ShardTensor> shard;
  const MeshSpec *mesh = options.mesh ? &*options.mesh : nullptr;
  // Ranks that hold this rank's buffers: all, or in a pipeline those of
  // the same stage.
  auto holds = [&](int64_t r) {
    return options.pipelineAxis < 0 ||
           mesh->coordinates(r)[options.pipelineAxis] ==
               mesh->coordinates(options.rank)[options.pipelineAxis];
  };
  for (auto [i, b] : llvm::enumerate(spec.buffers)) {
    if (b.role != BufferSpec::Role::Param && b.role != BufferSpec::Role::State)
      continue;
    ShardTensor t;
    t.key = (b.role == BufferSpec::Role::Param ? "param:" : "state:") + b.name;
    t.dtype = b.dtype;
    Block mine{std::vector<int64_t>(b.shape.size(), 0), b.shape};
    t.globalShape = b.shape;
    bool writer = mesh != nullptr || options.rank == 0;
    if (mesh) {
      if (b.isSplit()) {
        mine = blockOf(b, *mesh, options.rank);
        t.globalShape = globalShape(b, *mesh);
      }
      // The ranks holding this very block take turns by tensor, so that
      // replicas share the writing.
      std::vector<int64_t> same;
      for (int64_t r = 0; r < mesh->numDevices(); ++r) {
        if (!holds(r))
          continue;
        Block theirs = b.isSplit() ? blockOf(b, *mesh, r) : mine;
        if (theirs.offsets == mine.offsets && theirs.sizes == mine.sizes)
          same.push_back(r);
      }
      writer = same[i % same.size()] == options.rank;
    }
    if (!writer)
      continue; // Another holder of the same block writes it.
    t.offsets = mine.offsets;
    t.sizes = mine.sizes;
    auto *p = static_cast<const char *>(buffers[i]);
    t.data.assign(p, p + b.numBytes());
    shard.push_back(std::move(t));
  }
  // The loss scaler's state, the same on every rank: rank 0 writes it.
  if (options.rank == 0)
    for (auto [name, dtype, value] :
         {std::tuple{kLossScaleName, CLEAVE_F64, (const void *)&scale},
          {kGoodStepsName, CLEAVE_I64, (const void *)&goodSteps},
          {kSkippedStepsName, CLEAVE_I64, (const void *)&skipped}}) {
      ShardTensor t;
      t.key = std::string("scaler:") + name;
      t.dtype = dtype;
      auto *p = static_cast<const char *>(value);
      t.data.assign(p, p + 8);
      shard.push_back(std::move(t));
    }
  return shard;
}

CheckpointWriter::CheckpointWriter(std::string dir, int rank, int world,
                                   int keep, std::string plan,
                                   int64_t timeoutMs)
    : dir_(std::move(dir)), plan_(std::move(plan)), rank_(rank), world_(world),
      keep_(std::max(keep, 1)), timeoutMs_(timeoutMs) {}

CheckpointWriter::~CheckpointWriter() { llvm::consumeError(finish()); }

llvm::Error CheckpointWriter::finish() {
  if (thread_.joinable())
    thread_.join();
  if (error_.empty())
    return llvm::Error::success();
  std::string error = std::move(error_);
  error_.clear();
  return makeError(error);
}

llvm::Error CheckpointWriter::save(const Trainer &trainer) {
  if (llvm::Error err = finish())
    return err;
  auto start = std::chrono::steady_clock::now();
  std::vector<Trainer::ShardTensor> shard = trainer.checkpointShard();
  snapshotSeconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  int64_t step = trainer.stepCounter();
  thread_ = std::thread([this, shard = std::move(shard), step]() mutable {
    write(std::move(shard), step);
  });
  return llvm::Error::success();
}

static json blockJson(const Trainer::ShardTensor &t) {
  return {{"dtype", t.dtype},
          {"global", t.globalShape},
          {"offsets", t.offsets},
          {"sizes", t.sizes}};
}

void CheckpointWriter::write(std::vector<Trainer::ShardTensor> shard,
                             int64_t step) {
  auto start = std::chrono::steady_clock::now();
  auto account = llvm::make_scope_exit([&] {
    writeSeconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  });
  std::string stepDir = checkpointStepDir(dir_, step);
  if (std::error_code ec = llvm::sys::fs::create_directories(stepDir)) {
    error_ = "cannot create " + stepDir + ": " + ec.message();
    return;
  }
  std::string base = stepDir + "/" + llvm::formatv("shard-{0}", rank_).str();
  std::string file = base + ".ckpt";
  cleave_tensor_writer *writer = cleave_tensor_writer_create(file.c_str());
  json tensors = json::object();
  bool ok = writer != nullptr;
  for (const Trainer::ShardTensor &t : shard) {
    ok = ok && cleave_tensor_writer_add(writer, t.key.c_str(), t.dtype,
                                        int64_t(t.sizes.size()), t.sizes.data(),
                                        t.data.data()) == 0;
    tensors[t.key] = blockJson(t);
  }
  if (!ok) {
    if (writer)
      cleave_tensor_writer_abort(writer);
    error_ = "rank " + std::to_string(rank_) + ": cannot write " + file + ": " +
             cleave_rt_error_message();
    return;
  }
  if (cleave_tensor_writer_finish(writer) != 0) {
    error_ = "rank " + std::to_string(rank_) + ": cannot write " + file + ": " +
             cleave_rt_error_message();
    return;
  }
  uint64_t bytes = 0;
  llvm::sys::fs::file_size(file, bytes);
  ++written_;
  bytesWritten_ += int64_t(bytes);
  json meta = {{"rank", rank_},
               {"step", step},
               {"file", llvm::sys::path::filename(file).str()},
               {"bytes", bytes},
               {"tensors", tensors}};
  if (llvm::Error err = writeAtomically(base + ".json", meta.dump())) {
    error_ = llvm::toString(std::move(err));
    return;
  }
  account.release();
  writeSeconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  // The commit (rank 0 waiting for the other shards) is not writing.
  if (rank_ == 0)
    if (llvm::Error err = commit(step))
      error_ = llvm::toString(std::move(err));
}

int64_t mlir::cleave::checkpointBytes(llvm::StringRef stepDir) {
  int64_t total = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(stepDir, ec), end; it != end && !ec;
       it.increment(ec)) {
    uint64_t bytes = 0;
    if (llvm::StringRef(it->path()).ends_with(".ckpt") &&
        !llvm::sys::fs::file_size(it->path(), bytes))
      total += int64_t(bytes);
  }
  return total;
}

llvm::Error CheckpointWriter::commit(int64_t step) {
  std::string stepDir = checkpointStepDir(dir_, step);
  json shards = json::array();
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs_);
  for (int r = 0; r < world_; ++r) {
    std::string meta = stepDir + "/" + llvm::formatv("shard-{0}.json", r).str();
    while (!llvm::sys::fs::exists(meta)) {
      // A rank that died will not write its shard: the run has failed
      // (a collective saw it), so waiting out the timeout gains nothing.
      if (cleave_rt_failed())
        return makeError("checkpoint of step " + llvm::Twine(step) +
                         " not committed: rank " + llvm::Twine(r) +
                         " wrote no shard before the run failed (" +
                         cleave_rt_error_message() + ")");
      if (std::chrono::steady_clock::now() > deadline)
        return makeError("checkpoint of step " + llvm::Twine(step) +
                         " not committed: rank " + llvm::Twine(r) +
                         " wrote no shard within " + llvm::Twine(timeoutMs_) +
                         " ms (" + meta + ")");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    llvm::Expected<json> shard = readJson(meta);
    if (!shard)
      return shard.takeError();
    shards.push_back(std::move(*shard));
  }
  json manifest = {{"format", "cleave-checkpoint-1"},
                   {"step", step},
                   {"world", world_},
                   {"plan", plan_},
                   {"shards", shards}};
  if (llvm::Error err =
          writeAtomically(stepDir + "/" + kManifest, manifest.dump(1)))
    return err;
  // Committed: now older checkpoints beyond `keep` may go.
  std::vector<std::string> done;
  for (auto &[s, path] : stepFolders(dir_))
    if (s <= step && committed(path))
      done.push_back(path);
  for (size_t i = 0; i + keep_ < done.size(); ++i)
    llvm::sys::fs::remove_directories(done[i]);
  removeUncommittedCheckpoints(dir_, step);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

static std::vector<int64_t> ints(const json &j) {
  return j.get<std::vector<int64_t>>();
}

llvm::Error Trainer::loadCheckpoint(llvm::StringRef stepDir) {
  std::string manifestPath = (stepDir + "/" + kManifest).str();
  llvm::Expected<json> manifest = readJson(manifestPath);
  if (!manifest)
    return manifest.takeError();
  struct Saved {
    std::string file;
    Block block;
    std::vector<int64_t> global;
    int32_t dtype;
  };
  std::map<std::string, std::vector<Saved>> saved;
  int64_t step = 0;
  try {
    step = (*manifest).at("step").get<int64_t>();
    for (const json &shard : (*manifest).at("shards"))
      for (const auto &[key, t] : shard.at("tensors").items())
        saved[key].push_back(
            {(stepDir + "/" + shard.at("file").get<std::string>()).str(),
             Block{ints(t.at("offsets")), ints(t.at("sizes"))},
             ints(t.at("global")), t.at("dtype").get<int32_t>()});
  } catch (const std::exception &e) {
    return makeError(manifestPath +
                     ": malformed checkpoint manifest: " + e.what());
  }
  std::map<std::string, cleave_tensor_file *> files;
  auto closeAll = llvm::make_scope_exit([&] {
    for (auto &[path, f] : files)
      cleave_tensor_file_close(f);
  });
  for (auto [i, b] : llvm::enumerate(spec.buffers)) {
    if (b.role != BufferSpec::Role::Param && b.role != BufferSpec::Role::State)
      continue;
    std::string key =
        (b.role == BufferSpec::Role::Param ? "param:" : "state:") + b.name;
    auto it = saved.find(key);
    if (it == saved.end())
      return makeError("checkpoint " + stepDir + " has no tensor '" + key +
                       "' (saved with plan '" +
                       (*manifest).value("plan", std::string()) + "')");
    bool split = options.mesh && b.isSplit();
    std::vector<int64_t> global =
        split ? globalShape(b, *options.mesh) : b.shape;
    Block mine = split
                     ? blockOf(b, *options.mesh, options.rank)
                     : Block{std::vector<int64_t>(b.shape.size(), 0), b.shape};
    int64_t elementBytes = cleave_rt_dtype_size(b.dtype), copied = 0;
    for (const Saved &s : it->second) {
      if (s.global != global || s.dtype != b.dtype)
        return makeError("checkpoint " + stepDir + ": tensor '" + key +
                         "' was saved as " + llvm::Twine(s.global.size()) +
                         "-d " + cleave_rt_dtype_name(s.dtype) +
                         " of another shape or type than this program's");
      std::vector<char> data;
      auto read = [&]() -> llvm::Error {
        cleave_tensor_file *&f = files[s.file];
        if (!f && !(f = cleave_tensor_file_open(s.file.c_str())))
          return makeError(cleave_rt_error_message());
        int64_t n = 1;
        for (int64_t d : s.block.sizes)
          n *= d;
        data.resize(n * elementBytes);
        if (cleave_tensor_file_read(f, key.c_str(), data.data(),
                                    int64_t(data.size())) != 0)
          return makeError(cleave_rt_error_message());
        return llvm::Error::success();
      };
      // Only the saved blocks that meet this rank's are read.
      bool meets = true;
      for (size_t d = 0; d < mine.sizes.size(); ++d)
        meets = meets && s.block.offsets[d] < mine.offsets[d] + mine.sizes[d] &&
                mine.offsets[d] < s.block.offsets[d] + s.block.sizes[d];
      if (!meets)
        continue;
      if (llvm::Error err = read())
        return err;
      copied +=
          copyOverlap(data.data(), s.block, buffers[i], mine, elementBytes);
    }
    int64_t wanted = 1;
    for (int64_t d : mine.sizes)
      wanted *= d;
    if (copied != wanted)
      return makeError("checkpoint " + stepDir + ": the saved blocks of '" +
                       key + "' cover " + llvm::Twine(copied) + " of the " +
                       llvm::Twine(wanted) + " elements this rank needs");
  }
  // The loss scaler's state (checkpoints of this version have it).
  for (auto [name, value] : {std::pair{kLossScaleName, (void *)&scale},
                             {kGoodStepsName, (void *)&goodSteps},
                             {kSkippedStepsName, (void *)&skipped}}) {
    auto it = saved.find(std::string("scaler:") + name);
    if (it == saved.end() || it->second.empty())
      continue;
    cleave_tensor_file *&f = files[it->second.front().file];
    if ((!f &&
         !(f = cleave_tensor_file_open(it->second.front().file.c_str()))) ||
        cleave_tensor_file_read(f, it->first.c_str(), value, 8) != 0)
      return makeError(cleave_rt_error_message());
  }
  firstStep = step;
  stepsRun = 0;
  return llvm::Error::success();
}
