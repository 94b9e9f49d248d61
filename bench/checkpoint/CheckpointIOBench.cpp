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
//   * reading the file back with the runtime's reader, from the disk (its
//     pages dropped with posix_fadvise) and from the page cache.
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

  std::printf("reading the shard back (tensor file reader, CRC checked):\n");
  auto read = [&] {
    cleave_tensor_file *f = cleave_tensor_file_open(shard.c_str());
    if (!f || cleave_tensor_file_read(f, "t", kept.data(), bytes) != 0) {
      std::fprintf(stderr, "%s\n", cleave_rt_error_message());
      std::exit(1);
    }
    cleave_tensor_file_close(f);
  };
  report("from the disk (its pages dropped first)", median3([&] {
           dropCache(shard);
           read();
         }),
         double(bytes));
  read();
  report("from the page cache", median3(read), double(bytes));
  ::unlink(file.c_str());
  ::unlink(shard.c_str());
  return 0;
}
