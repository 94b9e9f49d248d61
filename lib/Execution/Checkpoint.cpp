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

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <tuple>
#include <unistd.h>

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

std::vector<std::string>
mlir::cleave::committedCheckpoints(llvm::StringRef dir) {
  std::vector<std::string> found;
  auto folders = stepFolders(dir);
  for (auto it = folders.rbegin(); it != folders.rend(); ++it)
    if (committed(it->second))
      found.push_back(it->second);
  return found;
}

std::optional<std::string> mlir::cleave::latestCheckpoint(llvm::StringRef dir) {
  std::vector<std::string> found = committedCheckpoints(dir);
  if (found.empty())
    return std::nullopt;
  return found.front();
}

llvm::Expected<std::optional<std::string>>
mlir::cleave::loadNewestCheckpoint(Trainer &trainer, llvm::StringRef dir,
                                   int rank) {
  std::vector<std::string> found = committedCheckpoints(dir);
  if (found.empty())
    return std::nullopt;
  std::string newestError;
  for (const std::string &stepDir : found) {
    llvm::Error err = trainer.loadCheckpoint(stepDir);
    bool mine = static_cast<bool>(err);
    std::string message = mine ? llvm::toString(std::move(err))
                               : "another rank cannot load " + stepDir;
    // A tensor file's error is sticky in the runtime; loading makes no
    // communication call, so the groups are intact: clear it to agree.
    if (mine)
      cleave_rt_clear_error();
    double failed[1] = {mine ? 1.0 : 0.0};
    if (cleave_rt_world_size() > 1)
      cleave_rt_all_reduce(CLEAVE_WORLD_GROUP, CLEAVE_F64, CLEAVE_MAX, failed,
                           failed, 1);
    if (cleave_rt_failed())
      return makeError(cleave_rt_error_message());
    if (!failed[0])
      return stepDir;
    if (newestError.empty())
      newestError = message;
    if (mine || rank == 0)
      llvm::errs() << "warning: rank " << rank << ": " << message
                   << "; trying the checkpoint before it\n";
  }
  return makeError("no checkpoint in " + dir +
                   " loads on every rank: " + newestError);
}

int mlir::cleave::removeUncommittedCheckpoints(llvm::StringRef dir,
                                               int64_t belowStep) {
  int removed = 0;
  for (auto &[step, path] : stepFolders(dir))
    if (step < belowStep && !committed(path) &&
        !llvm::sys::fs::remove_directories(path))
      ++removed;
  return removed;
}

/// Writes `text` to `path` atomically and durably: a temporary file,
/// fsync'd, renamed into place, then the folder fsync'd (a manifest that
/// is there after a crash has its contents, and its shards theirs: the
/// tensor writer syncs those the same way).
static llvm::Error writeAtomically(const std::string &path,
                                   const std::string &text) {
  std::string temp = path + ".tmp";
  auto cannot = [&](const char *what) {
    return makeError(llvm::Twine("cannot ") + what + " " + temp + ": " +
                     std::strerror(errno));
  };
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return cannot("create");
  auto closeFd = llvm::make_scope_exit([&] { ::close(fd); });
  for (size_t done = 0; done < text.size();) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return cannot("write");
    done += size_t(n);
  }
  if (::fsync(fd) != 0)
    return cannot("fsync");
  if (std::error_code ec = llvm::sys::fs::rename(temp, path))
    return makeError("cannot rename " + temp + ": " + ec.message());
  int dir = ::open(std::string(llvm::sys::path::parent_path(path)).c_str(),
                   O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
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
    t.data = buffers[i];
    t.bytes = b.numBytes();
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
      t.data = value;
      t.bytes = 8;
      t.host = true;
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

llvm::Error CheckpointWriter::waitForCommit() {
  if (llvm::Error err = finish())
    return err;
  if (lastSaved_ == 0)
    return llvm::Error::success();
  std::string stepDir = checkpointStepDir(dir_, lastSaved_);
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs_);
  while (!committed(stepDir)) {
    if (std::chrono::steady_clock::now() > deadline)
      return makeError("rank " + llvm::Twine(rank_) + ": checkpoint " +
                       stepDir + " not committed within " +
                       llvm::Twine(timeoutMs_) + " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return llvm::Error::success();
}

void CheckpointWriter::FreeArena::operator()(char *p) const {
  cleave_rt_host_unpin(p);
  std::free(p);
}

/// Where the next block of the snapshot starts: cache-line aligned.
static int64_t snapshotSlot(int64_t bytes) { return (bytes + 63) / 64 * 64; }

llvm::Error CheckpointWriter::save(const Trainer &trainer) {
  if (llvm::Error err = finish())
    return err;
  auto start = std::chrono::steady_clock::now();
  std::vector<Trainer::ShardTensor> shard = trainer.checkpointShard();
  // The snapshot is one buffer, kept for the next checkpoint (the write
  // that used it has finished): after the first checkpoint it costs no
  // page faults, only the copy. Huge pages where the kernel gives them; on
  // the cuda backend page-locked, so the copy from the device is DMA.
  int64_t need = 0;
  for (const Trainer::ShardTensor &t : shard)
    need += snapshotSlot(t.bytes);
  if (need > arenaBytes_) {
    constexpr size_t kHugePage = size_t(2) << 20;
    size_t bytes = (size_t(need) + kHugePage - 1) / kHugePage * kHugePage;
    void *p = nullptr;
    arena_.reset();
    arenaBytes_ = 0;
    if (::posix_memalign(&p, kHugePage, bytes) != 0)
      return makeError("rank " + llvm::Twine(rank_) + ": cannot allocate " +
                       llvm::Twine(bytes) +
                       " bytes of host memory for the checkpoint snapshot");
    ::madvise(p, bytes, MADV_HUGEPAGE);
    if (cleave_rt_host_pin(p, int64_t(bytes)) != 0) {
      std::free(p);
      return makeError("rank " + llvm::Twine(rank_) +
                       ": the checkpoint snapshot's host memory: " +
                       cleave_rt_error_message());
    }
    arena_.reset(static_cast<char *>(p));
    arenaBytes_ = int64_t(bytes);
  }
  // The buffers go to the snapshot in one batch (cpu backend: a memcpy
  // each; cuda: DMA on the copy stream, the training thread waiting for it
  // only); the scaler's host values are copied here.
  char *slot = arena_.get();
  std::vector<cleave_rt_copy_t> copies;
  copies.reserve(shard.size());
  for (Trainer::ShardTensor &t : shard) {
    if (t.host)
      std::memcpy(slot, t.data, size_t(t.bytes));
    else
      copies.push_back({slot, t.data, t.bytes});
    t.data = slot;
    slot += snapshotSlot(t.bytes);
  }
  if (cleave_rt_copy_to_host(copies.data(), int64_t(copies.size())) != 0)
    return makeError("rank " + llvm::Twine(rank_) +
                     ": cannot snapshot the checkpoint of step " +
                     llvm::Twine(trainer.stepCounter()) + ": " +
                     cleave_rt_error_message());
  snapshotSeconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  int64_t step = trainer.stepCounter();
  lastSaved_ = step;
  thread_ = std::thread([this, shard = std::move(shard), step]() mutable {
    write(std::move(shard), step);
  });
  return llvm::Error::success();
}

static std::string hex8(uint32_t v) {
  return llvm::formatv("{0:x-8}", v).str();
}

static json blockJson(const Trainer::ShardTensor &t) {
  return {{"dtype", t.dtype},
          {"global", t.globalShape},
          {"offsets", t.offsets},
          {"sizes", t.sizes},
          {"crc32c", hex8(t.crc32c)}};
}

llvm::Expected<int> mlir::cleave::checkpointWriterNice() {
  const char *text = std::getenv("CLEAVE_CHECKPOINT_NICE");
  if (!text || !*text)
    return 0;
  int nice = 0;
  if (llvm::StringRef(text).getAsInteger(10, nice) || nice < 0 || nice > 19)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::Twine("CLEAVE_CHECKPOINT_NICE='") + text +
            "': expected the checkpoint writer's nice value, an integer "
            "from 0 (the training's priority, the default) to 19");
  return nice;
}

/// The writer thread runs at CLEAVE_CHECKPOINT_NICE (checked before the
/// first step by RunFlags::check; 0 if it was not). Its CPU work is small
/// (a checksum and a staging copy per 8 MiB write); at nice 19 behind ranks
/// that keep every core busy it was not scheduled between its writes, and
/// the disk waited (docs/cleave-run.md has the measurements). It runs under
/// SCHED_BATCH: woken by the end of each write, it does not preempt the
/// training thread it shares a core with (as Gloo's event loop, in the
/// middle of a collective; docs/runtime.md), and keeps its full share.
static void setThisThreadsPriority() {
  sched_param param{};
  if (::sched_getscheduler(0) == SCHED_OTHER)
    ::sched_setscheduler(0, SCHED_BATCH, &param);
  llvm::Expected<int> nice = checkpointWriterNice();
  if (!nice) {
    llvm::consumeError(nice.takeError());
    return;
  }
  if (*nice > 0)
    ::setpriority(PRIO_PROCESS, pid_t(::syscall(SYS_gettid)), *nice);
}

/// Where rank `rank`'s shard of step folder `stepDir` goes ("" for the
/// tensor file, ".json" for its description, ".error" for why it failed).
static std::string shardPath(llvm::StringRef stepDir, int rank,
                             llvm::StringRef suffix) {
  return (stepDir + "/" + llvm::formatv("shard-{0}", rank).str() + suffix)
      .str();
}

void CheckpointWriter::write(std::vector<Trainer::ShardTensor> shard,
                             int64_t step) {
  setThisThreadsPriority();
  auto start = std::chrono::steady_clock::now();
  llvm::Error err = writeShard(shard, step);
  writeSeconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (err) {
    error_ = llvm::toString(std::move(err));
    // Rank 0's commit stops waiting for this shard when it sees why
    // (best effort: the disk may be what failed).
    std::string stepDir = checkpointStepDir(dir_, step);
    llvm::consumeError(
        writeAtomically(shardPath(stepDir, rank_, ".error"), error_));
    return;
  }
  // The commit (rank 0 waiting for the other shards) is not writing.
  if (rank_ == 0)
    if (llvm::Error err = commit(step))
      error_ = llvm::toString(std::move(err));
}

llvm::Error
CheckpointWriter::writeShard(std::vector<Trainer::ShardTensor> &shard,
                             int64_t step) {
  std::string stepDir = checkpointStepDir(dir_, step);
  if (std::error_code ec = llvm::sys::fs::create_directories(stepDir))
    return makeError("cannot create " + stepDir + ": " + ec.message());
  std::string file = shardPath(stepDir, rank_, ".ckpt");
  auto cannot = [&]() {
    return makeError("rank " + llvm::Twine(rank_) + ": cannot write " + file +
                     ": " + cleave_rt_error_message());
  };
  cleave_tensor_writer *writer = cleave_tensor_writer_create(file.c_str());
  if (!writer)
    return cannot();
  json tensors = json::object();
  for (Trainer::ShardTensor &t : shard) {
    // Here, not in the snapshot: the training thread only copies.
    t.crc32c = cleave_rt_crc32c(0, t.data, t.bytes);
    if (cleave_tensor_writer_add_crc32c(writer, t.key.c_str(), t.dtype,
                                        int64_t(t.sizes.size()), t.sizes.data(),
                                        t.data, t.crc32c) != 0) {
      cleave_tensor_writer_abort(writer);
      return cannot();
    }
    tensors[t.key] = blockJson(t);
  }
  uint32_t fileCrc = 0;
  if (cleave_tensor_writer_finish_crc32c(writer, &fileCrc) != 0)
    return cannot();
  uint64_t bytes = 0;
  llvm::sys::fs::file_size(file, bytes);
  ++written_;
  bytesWritten_ += int64_t(bytes);
  json meta = {{"rank", rank_},
               {"step", step},
               {"file", llvm::sys::path::filename(file).str()},
               {"bytes", bytes},
               {"crc32c", hex8(fileCrc)},
               {"tensors", tensors}};
  return writeAtomically(shardPath(stepDir, rank_, ".json"), meta.dump());
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
    std::string meta = shardPath(stepDir, r, ".json");
    while (!llvm::sys::fs::exists(meta)) {
      auto failed =
          llvm::MemoryBuffer::getFile(shardPath(stepDir, r, ".error"));
      if (failed)
        return makeError("checkpoint of step " + llvm::Twine(step) +
                         " not committed: " + (*failed)->getBuffer());
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
  // Older writes that never committed go; a newer step may be being
  // written by a rank that is ahead.
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
    std::string crc32c; ///< Empty in checkpoints written before checksums.
  };
  std::map<std::string, std::vector<Saved>> saved;
  std::map<std::string, uint64_t> fileBytes;
  int64_t step = 0;
  try {
    step = (*manifest).at("step").get<int64_t>();
    for (const json &shard : (*manifest).at("shards")) {
      std::string file =
          (stepDir + "/" + shard.at("file").get<std::string>()).str();
      fileBytes[file] = shard.at("bytes").get<uint64_t>();
      for (const auto &[key, t] : shard.at("tensors").items())
        saved[key].push_back(
            {file, Block{ints(t.at("offsets")), ints(t.at("sizes"))},
             ints(t.at("global")), t.at("dtype").get<int32_t>(),
             t.value("crc32c", std::string())});
    }
  } catch (const std::exception &e) {
    return makeError(manifestPath +
                     ": malformed checkpoint manifest: " + e.what());
  }
  std::map<std::string, cleave_tensor_file *> files;
  auto closeAll = llvm::make_scope_exit([&] {
    for (auto &[path, f] : files)
      cleave_tensor_file_close(f);
  });
  // Reads tensor `key` of saved block `s`, checking the shard file against
  // the manifest: its size, the tensor's checksum in its header (the
  // runtime checks the data against that). `read` reads from the open file
  // (a whole tensor, or its pieces) and returns the runtime's status.
  auto readSaved =
      [&](const Saved &s, const std::string &key,
          llvm::function_ref<int(cleave_tensor_file *)> read) -> llvm::Error {
    auto corrupt = [&](const llvm::Twine &what) {
      return makeError("checkpoint " + stepDir + " is corrupted: shard file " +
                       s.file + " " + what);
    };
    cleave_tensor_file *&f = files[s.file];
    if (!f) {
      uint64_t size = 0;
      if (std::error_code ec = llvm::sys::fs::file_size(s.file, size))
        return corrupt("cannot be read: " + ec.message());
      if (size != fileBytes[s.file])
        return corrupt("has " + llvm::Twine(size) +
                       " bytes but the manifest says " +
                       llvm::Twine(fileBytes[s.file]));
      if (!(f = cleave_tensor_file_open(s.file.c_str())))
        return corrupt(llvm::Twine("(") + cleave_rt_error_message() + ")");
    }
    const char *header =
        cleave_tensor_file_metadata(f, ("crc32c:" + key).c_str());
    if (!s.crc32c.empty() && (!header || s.crc32c != header))
      return corrupt("holds tensor '" + key + "' with crc32c " +
                     (header ? header : "(none)") + " but the manifest says " +
                     s.crc32c);
    if (read(f) != 0)
      return corrupt(llvm::Twine("(") + cleave_rt_error_message() + ")");
    return llvm::Error::success();
  };
  auto readWhole = [&](const Saved &s, const std::string &key, void *dst,
                       int64_t bytes) {
    return readSaved(s, key, [&](cleave_tensor_file *f) {
      return cleave_tensor_file_read(f, key.c_str(), dst, bytes);
    });
  };
  // On the cuda backend the blocks are read into host memory and copied to
  // the device (reading a file into managed memory would fault it in page
  // by page); on the cpu backend straight into place.
  bool onDevice = cleave_rt_buffers_on_device() != 0;
  std::vector<char> staging;
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
    // Where the block is assembled: in place, or on a device backend in
    // host memory, copied to the device once complete.
    void *dst = buffers[i];
    if (onDevice) {
      if (staging.size() < size_t(b.numBytes()))
        staging.resize(size_t(b.numBytes()));
      dst = staging.data();
    }
    for (const Saved &s : it->second) {
      if (s.global != global || s.dtype != b.dtype)
        return makeError("checkpoint " + stepDir + ": tensor '" + key +
                         "' was saved as " + llvm::Twine(s.global.size()) +
                         "-d " + cleave_rt_dtype_name(s.dtype) +
                         " of another shape or type than this program's");
      // Only the saved blocks that meet this rank's are read.
      bool meets = true;
      for (size_t d = 0; d < mine.sizes.size(); ++d)
        meets = meets && s.block.offsets[d] < mine.offsets[d] + mine.sizes[d] &&
                mine.offsets[d] < s.block.offsets[d] + s.block.sizes[d];
      if (!meets)
        continue;
      int64_t n = 1;
      for (int64_t d : s.block.sizes)
        n *= d;
      // The same block (a resume on the same mesh): straight into place.
      if (s.block.offsets == mine.offsets && s.block.sizes == mine.sizes) {
        if (llvm::Error err = readWhole(s, key, dst, n * elementBytes))
          return err;
        copied += n;
        continue;
      }
      // Another block: the part of each piece read that lies in this
      // rank's block goes into place (no copy of the whole saved block).
      struct Target {
        const Block &from, &to;
        void *dst;
        int64_t elementBytes, copiedBytes;
      } target{s.block, mine, dst, elementBytes, 0};
      auto piece = [](void *context, int64_t offset, const void *data,
                      int64_t bytes) {
        auto &t = *static_cast<Target *>(context);
        t.copiedBytes += copyOverlapPiece(data, offset, bytes, t.from, t.dst,
                                          t.to, t.elementBytes);
      };
      if (llvm::Error err = readSaved(s, key, [&](cleave_tensor_file *f) {
            return cleave_tensor_file_read_pieces(f, key.c_str(), piece,
                                                  &target);
          }))
        return err;
      copied += target.copiedBytes / elementBytes;
    }
    int64_t wanted = 1;
    for (int64_t d : mine.sizes)
      wanted *= d;
    if (copied != wanted)
      return makeError("checkpoint " + stepDir + ": the saved blocks of '" +
                       key + "' cover " + llvm::Twine(copied) + " of the " +
                       llvm::Twine(wanted) + " elements this rank needs");
    cleave_rt_copy_t toDevice{buffers[i], dst, b.numBytes()};
    if (onDevice && cleave_rt_copy_from_host(&toDevice, 1) != 0)
      return makeError("checkpoint " + stepDir + ": cannot copy '" + key +
                       "' to the device: " + cleave_rt_error_message());
  }
  // The loss scaler's state (checkpoints of this version have it).
  for (auto [name, value] : {std::pair{kLossScaleName, (void *)&scale},
                             {kGoodStepsName, (void *)&goodSteps},
                             {kSkippedStepsName, (void *)&skipped}}) {
    auto it = saved.find(std::string("scaler:") + name);
    if (it == saved.end() || it->second.empty())
      continue;
    if (llvm::Error err = readWhole(it->second.front(), it->first, value, 8))
      return err;
  }
  firstStep = step;
  stepsRun = 0;
  return llvm::Error::success();
}
