//===- CheckpointIOBench.cpp - Where a checkpoint write's time goes -------===//
//
// cleave-bench-checkpoint-io [DIR] [MB] [WRITERS]: one rank's shard of MB
// megabytes (default 300: a quarter of the ~100M-parameter GPT's 1.2 GB
// checkpoint with AdamW) taken apart into the steps of a checkpoint, each
// timed alone (median of 3):
//
//   * the snapshot on the training thread: a fresh buffer with the copy and
//     CRC32C in one pass (what it was), a memcpy into a kept buffer (what it
//     is), and the CRC32C alone (now on the writer thread);
//   * the file: buffered write() then fsync (what the writer did), O_DIRECT
//     8 MiB writes then fsync, and the runtime's tensor writer end to end;
//   * WRITERS (default 4) tensor writers at once, as the ranks write;
//   * reading the file back from the disk (its pages dropped with
//     posix_fadvise): O_DIRECT reads alone, each followed by the copy and
//     CRC32C (the reader before), the runtime's reader (plain preads, the
//     kernel asked to read ahead, each piece checksummed after its read),
//     the same without the hint, into a fresh buffer, a restore onto
//     another mesh that needs a quarter (a whole copy then part of it,
//     before; the pieces, now), two readers of the same file (as data
//     parallel replicas: the page cache reads it once) and WRITERS
//     readers of their own files, each now and before, and from the page
//     cache.
//
// It prints numbers; nothing is checked. Files go to DIR (default /tmp).
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The median of 3 runs of `body`, in seconds.
double median3(const std::function<void()> &body) {
  std::vector<double> t;
  for (int i = 0; i < 3; ++i) {
    double start = now();
    body();
    t.push_back(now() - start);
  }
  std::sort(t.begin(), t.end());
  return t[1];
}

void report(const char *what, double seconds, double bytes) {
  std::printf("  %-52s %8.1f ms  %7.0f MB/s\n", what, 1e3 * seconds,
              bytes / seconds / 1e6);
  std::fflush(stdout);
}

[[noreturn]] void fail(const std::string &what) {
  std::fprintf(stderr, "cleave-bench-checkpoint-io: %s: %s\n", what.c_str(),
               std::strerror(errno));
  std::exit(1);
}

void writeAll(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w <= 0)
      fail("write");
    p += w;
    n -= size_t(w);
  }
}

/// Writes `bytes` of `data` as one tensor file at `path` (as a shard).
void tensorFile(const std::string &path, const char *data, int64_t bytes) {
  cleave_tensor_writer *w = cleave_tensor_writer_create(path.c_str());
  int64_t shape[1] = {bytes / 4};
  uint32_t crc = cleave_rt_crc32c(0, data, bytes);
  if (!w ||
      cleave_tensor_writer_add_crc32c(w, "t", CLEAVE_F32, 1, shape, data,
                                      crc) != 0 ||
      cleave_tensor_writer_finish(w) != 0) {
    std::fprintf(stderr, "%s\n", cleave_rt_error_message());
    std::exit(1);
  }
}

void dropCache(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    fail("open " + path);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

/// Reads tensor "t" of `shard` into `dst` with the runtime's reader.
void readTensor(const std::string &shard, char *dst, int64_t bytes) {
  cleave_tensor_file *f = cleave_tensor_file_open(shard.c_str());
  if (!f || cleave_tensor_file_read(f, "t", dst, bytes) != 0) {
    std::fprintf(stderr, "%s\n", cleave_rt_error_message());
    std::exit(1);
  }
  cleave_tensor_file_close(f);
}

/// Reads `bytes` of `path` from offset 0 (the header and most of the
/// data: the disk's part of a read) in aligned 8 MiB O_DIRECT reads
/// into `staging`, calling `each(data, at, n)` after each read (no overlap:
/// what the reader did before it read ahead on a thread).
template <typename Each>
void directReads(const std::string &path, char *staging, int64_t bytes,
                 Each &&each) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0)
    fail("open O_DIRECT " + path);
  constexpr int64_t kChunk = int64_t(8) << 20;
  for (int64_t at = 0; at < bytes; at += kChunk) {
    int64_t n = std::min(kChunk, bytes - at);
    if (::pread(fd, staging, size_t((n + 4095) / 4096 * 4096), off_t(at)) < n)
      fail("pread O_DIRECT " + path);
    each(staging, at, n);
  }
  ::close(fd);
}

/// Reads `bytes` of `path` into `dst` with plain 8 MiB preads (through the
/// page cache), checksumming each piece after it.
void bufferedRead(const std::string &path, char *dst, int64_t bytes) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    fail("open " + path);
  uint32_t crc = 0;
  constexpr int64_t kChunk = int64_t(8) << 20;
  for (int64_t at = 0; at < bytes; at += kChunk) {
    int64_t n = std::min(kChunk, bytes - at);
    if (::pread(fd, dst + at, size_t(n), off_t(at)) < n)
      fail("pread " + path);
    crc = cleave_rt_crc32c(crc, dst + at, n);
  }
  ::close(fd);
}

/// The reader as it was: O_DIRECT reads through its own staging buffer,
/// each followed by the copy and CRC32C.
void directRead(const std::string &path, char *dst, int64_t bytes) {
  void *staging = nullptr;
  if (::posix_memalign(&staging, 4096, size_t(8) << 20) != 0)
    fail("posix_memalign");
  uint32_t crc = 0;
  directReads(path, static_cast<char *>(staging), bytes,
              [&](const char *data, int64_t at, int64_t n) {
                crc = cleave_rt_copy_crc32c(dst + at, data, n, crc);
              });
  std::free(staging);
}

/// The read side: a shard read back from the disk (its pages dropped
/// before each run) the ways the runtime reads and did, and by several
/// readers at once as the ranks of a resume do.
void readBack(const std::string &shard, std::vector<char> &kept, int64_t bytes,
              int readers) {
  void *aligned = nullptr;
  if (::posix_memalign(&aligned, 4096, size_t(8) << 20) != 0)
    fail("posix_memalign");
  char *staging = static_cast<char *>(aligned);
  double size = double(bytes);
  std::printf("reading the shard back from the disk (pages dropped first):\n");
  report("O_DIRECT 8 MiB reads alone (no copy, no CRC)", median3([&] {
           dropCache(shard);
           directReads(shard, staging, bytes,
                       [](const char *, int64_t, int64_t) {});
         }),
         size);
  report("O_DIRECT reads, then copy + CRC32C of each (before)", median3([&] {
           dropCache(shard);
           directRead(shard, kept.data(), bytes);
         }),
         size);
  report("tensor reader: plain preads, read ahead (now)", median3([&] {
           dropCache(shard);
           readTensor(shard, kept.data(), bytes);
         }),
         size);
  report("plain preads + CRC32C, no WILLNEED hint", median3([&] {
           dropCache(shard);
           bufferedRead(shard, kept.data(), bytes);
         }),
         size);
  report("into a fresh buffer (its page faults; tensor reader)", median3([&] {
           dropCache(shard);
           std::unique_ptr<char[]> fresh(new char[size_t(bytes)]);
           readTensor(shard, fresh.get(), bytes);
         }),
         size);
  // A restore onto another mesh that needs a quarter of the saved block.
  report("reshard, before: whole block into a fresh buffer, copy 1/4",
         median3([&] {
           dropCache(shard);
           std::unique_ptr<char[]> whole(new char[size_t(bytes)]);
           readTensor(shard, whole.get(), bytes);
           std::memcpy(kept.data(), whole.get(), size_t(bytes / 4));
         }),
         size);
  report(
      "reshard, now: the pieces, copy 1/4 of each", median3([&] {
        dropCache(shard);
        cleave_tensor_file *f = cleave_tensor_file_open(shard.c_str());
        auto quarter = [](void *dst, int64_t at, const void *data, int64_t n) {
          std::memcpy(static_cast<char *>(dst) + at / 4, data, size_t(n / 4));
        };
        if (!f ||
            cleave_tensor_file_read_pieces(f, "t", quarter, kept.data()) != 0)
          fail(cleave_rt_error_message());
        cleave_tensor_file_close(f);
      }),
      size);
  std::printf("several readers at once (tensor reader, into kept buffers):\n");
  // Two buffers at least: the same shard is read twice at once below.
  std::vector<std::vector<char>> dsts(size_t(std::max(readers, 2)),
                                      std::vector<char>(size_t(bytes), 1));
  report("2 readers of the same shard (as dp replicas)", median3([&] {
           dropCache(shard);
           std::vector<std::thread> threads;
           for (int i = 0; i < 2; ++i)
             threads.emplace_back(
                 [&, i] { readTensor(shard, dsts[size_t(i)].data(), bytes); });
           for (auto &t : threads)
             t.join();
         }),
         2 * size);
  report("2 readers of the same shard, O_DIRECT (before)", median3([&] {
           dropCache(shard);
           std::vector<std::thread> threads;
           for (int i = 0; i < 2; ++i)
             threads.emplace_back(
                 [&, i] { directRead(shard, dsts[size_t(i)].data(), bytes); });
           for (auto &t : threads)
             t.join();
         }),
         2 * size);
  std::vector<std::string> copies;
  for (int i = 0; i < readers; ++i) {
    copies.push_back(shard + ".r" + std::to_string(i));
    tensorFile(copies.back(), kept.data(), bytes);
  }
  char what[64];
  std::snprintf(what, sizeof(what), "%d readers of their own shards", readers);
  report(what, median3([&] {
           std::vector<std::thread> threads;
           for (int i = 0; i < readers; ++i) {
             dropCache(copies[size_t(i)]);
             threads.emplace_back([&, i] {
               readTensor(copies[size_t(i)], dsts[size_t(i)].data(), bytes);
             });
           }
           for (auto &t : threads)
             t.join();
         }),
         double(readers) * size);
  std::snprintf(what, sizeof(what),
                "%d readers of their own shards, O_DIRECT (before)", readers);
  report(what, median3([&] {
           std::vector<std::thread> threads;
           for (int i = 0; i < readers; ++i) {
             dropCache(copies[size_t(i)]);
             threads.emplace_back([&, i] {
               directRead(copies[size_t(i)], dsts[size_t(i)].data(), bytes);
             });
           }
           for (auto &t : threads)
             t.join();
         }),
         double(readers) * size);
  for (const std::string &copy : copies)
    ::unlink(copy.c_str());
  readTensor(shard, kept.data(), bytes);
  report("from the page cache (tensor reader)",
         median3([&] { readTensor(shard, kept.data(), bytes); }), size);
  std::free(aligned);
}

} // namespace

int main(int argc, char **argv) {
  std::string dir = argc > 1 ? argv[1] : "/tmp";
  int64_t mb = argc > 2 ? std::atoll(argv[2]) : 300;
  int writers = argc > 3 ? std::atoi(argv[3]) : 4;
  int64_t bytes = mb << 20;
  std::printf("one shard of %lld MB; files in %s\n", (long long)mb,
              dir.c_str());
  std::vector<char> source(size_t(bytes), 0);
  for (int64_t i = 0; i < bytes; i += 4096)
    source[size_t(i)] = char(i * 2654435761u >> 24);

  std::printf("snapshot (training thread before), and the checksum:\n");
  report("new buffer, copy + CRC32C in one pass (before)", median3([&] {
           std::unique_ptr<char[]> copy(new char[size_t(bytes)]);
           cleave_rt_copy_crc32c(copy.get(), source.data(), bytes, 0);
         }),
         double(bytes));
  std::vector<char> kept(size_t(bytes), 1);
  report("memcpy into a kept buffer (now)", median3([&] {
           std::memcpy(kept.data(), source.data(), size_t(bytes));
         }),
         double(bytes));
  report("CRC32C alone (now on the writer thread)",
         median3([&] { cleave_rt_crc32c(0, kept.data(), bytes); }),
         double(bytes));

  std::printf("one file (one writer):\n");
  std::string file = dir + "/cleave-bench-checkpoint-io.bin";
  double writeSeconds = 0, syncSeconds = 0;
  report("buffered write() + fsync (before)", median3([&] {
           int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
           if (fd < 0)
             fail("open " + file);
           double start = now();
           writeAll(fd, kept.data(), size_t(bytes));
           double written = now();
           ::fsync(fd);
           writeSeconds = written - start;
           syncSeconds = now() - written;
           ::close(fd);
         }),
         double(bytes));
  std::printf("    of which write() %.1f ms, fsync %.1f ms (last run)\n",
              1e3 * writeSeconds, 1e3 * syncSeconds);
  void *aligned = nullptr;
  constexpr size_t kChunk = size_t(8) << 20;
  if (::posix_memalign(&aligned, 4096, kChunk) != 0)
    fail("posix_memalign");
  report(
      "O_DIRECT 8 MiB writes via a staging copy + fsync", median3([&] {
        int fd =
            ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
        if (fd < 0)
          fail("open O_DIRECT " + file);
        for (int64_t done = 0; done < bytes; done += int64_t(kChunk)) {
          size_t n = size_t(std::min<int64_t>(bytes - done, kChunk));
          std::memcpy(aligned, kept.data() + done, n);
          writeAll(fd, static_cast<char *>(aligned), (n + 4095) / 4096 * 4096);
        }
        ::fsync(fd);
        ::close(fd);
      }),
      double(bytes));
  std::free(aligned);
  std::string shard = dir + "/cleave-bench-checkpoint-io.ckpt";
  report("tensor writer (CRC32C + file, as the writer thread)",
         median3([&] { tensorFile(shard, kept.data(), bytes); }),
         double(bytes));

  std::printf("%d writers at once (tensor writer, %lld MB each):\n", writers,
              (long long)mb);
  report("all of them", median3([&] {
           std::vector<std::thread> threads;
           for (int i = 0; i < writers; ++i)
             threads.emplace_back([&, i] {
               tensorFile(shard + "." + std::to_string(i), kept.data(), bytes);
             });
           for (auto &t : threads)
             t.join();
         }),
         double(bytes) * writers);
  for (int i = 0; i < writers; ++i)
    ::unlink((shard + "." + std::to_string(i)).c_str());

  readBack(shard, kept, bytes, writers);
  ::unlink(file.c_str());
  ::unlink(shard.c_str());
  return 0;
}
