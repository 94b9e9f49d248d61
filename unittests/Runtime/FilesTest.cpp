//===- FilesTest.cpp - Tensor files and token files -----------------------===//

#include "cleave/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

class TempDir {
public:
  TempDir() {
    char t[] = "/tmp/cleave-files-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~TempDir() { std::system(("rm -rf " + path).c_str()); }
  std::string file(const std::string &name) const { return path + "/" + name; }
  std::string path;
};

std::string lastError() {
  std::string e = cleave_rt_error_message();
  cleave_rt_clear_error();
  return e;
}

bool has(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeAll(const std::string &path, const std::string &data) {
  std::ofstream out(path, std::ios::binary);
  out << data;
}

/// Writes w (f32 2x3), b (bf16 [3]), step (i64 scalar) with metadata.
void writeSample(const std::string &path) {
  float w[6] = {1, 2, 3, 4, 5, 6};
  uint16_t b[3] = {0x3f80, 0x4000, 0x4040};
  int64_t step = 42;
  int64_t wShape[] = {2, 3}, bShape[] = {3};
  cleave_tensor_writer *writer = cleave_tensor_writer_create(path.c_str());
  ASSERT_TRUE(writer);
  ASSERT_EQ(cleave_tensor_writer_add(writer, "w", CLEAVE_F32, 2, wShape, w), 0);
  ASSERT_EQ(cleave_tensor_writer_add(writer, "b", CLEAVE_BF16, 1, bShape, b),
            0);
  ASSERT_EQ(
      cleave_tensor_writer_add(writer, "step", CLEAVE_I64, 0, nullptr, &step),
      0);
  ASSERT_EQ(cleave_tensor_writer_set_metadata(writer, "model", "gpt2"), 0);
  ASSERT_EQ(cleave_tensor_writer_finish(writer), 0) << lastError();
}

TEST(TensorFileTest, RoundTrip) {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  writeSample(path);
  cleave_tensor_file *f = cleave_tensor_file_open(path.c_str());
  ASSERT_TRUE(f) << lastError();
  EXPECT_EQ(cleave_tensor_file_count(f), 3);
  EXPECT_STREQ(cleave_tensor_file_metadata(f, "model"), "gpt2");
  EXPECT_STREQ(cleave_tensor_file_metadata(f, "format"), "cleave");
  int32_t dtype;
  int64_t rank, shape[8];
  ASSERT_EQ(cleave_tensor_file_info(f, "w", &dtype, &rank, shape), 0);
  EXPECT_EQ(dtype, CLEAVE_F32);
  EXPECT_EQ(rank, 2);
  EXPECT_EQ(shape[1], 3);
  ASSERT_EQ(cleave_tensor_file_info(f, "step", &dtype, &rank, shape), 0);
  EXPECT_EQ(rank, 0);
  EXPECT_NE(cleave_tensor_file_info(f, "nope", &dtype, &rank, shape), 0);
  float w[6];
  ASSERT_EQ(cleave_tensor_file_read(f, "w", w, sizeof(w)), 0) << lastError();
  EXPECT_EQ(w[5], 6.0f);
  uint16_t b[3];
  ASSERT_EQ(cleave_tensor_file_read(f, "b", b, sizeof(b)), 0);
  EXPECT_EQ(b[2], 0x4040);
  int64_t step;
  ASSERT_EQ(cleave_tensor_file_read(f, "step", &step, 8), 0);
  EXPECT_EQ(step, 42);
  // Wrong size and missing tensor: clear errors.
  EXPECT_NE(cleave_tensor_file_read(f, "w", w, 20), 0);
  std::string e = lastError();
  EXPECT_TRUE(has(e, "tensor 'w' has 24 bytes (f32 [2,3]) but the "
                     "destination has 20"))
      << e;
  EXPECT_NE(cleave_tensor_file_read(f, "v", w, 24), 0);
  e = lastError();
  EXPECT_TRUE(has(e, "no tensor 'v'") && has(e, path)) << e;
  cleave_tensor_file_close(f);
  // No temporary file is left behind.
  EXPECT_EQ(std::system(("ls " + dir.path + " | grep -q tmp").c_str()) == 0,
            false);
}

// A writer killed mid-write leaves its temporary file; the next writer of
// the same path (and cleave-run at start) removes it, but never one of a
// live process or of another host.
TEST(TensorFileTest, StaleTemporariesAreRemoved) {
  TempDir dir;
  std::string path = dir.file("params.safetensors");
  char host[256] = {0};
  ASSERT_EQ(::gethostname(host, sizeof(host) - 1), 0);
  // Pids above the kernel's pid_max (at most 2^22) never run.
  std::string dead = path + ".tmp." + host + ".1073741824.0";
  std::string deadOld = path + ".tmp.1073741825.3";
  std::string live =
      path + ".tmp." + host + "." + std::to_string(::getppid()) + ".0";
  std::string otherHost = path + ".tmp.other-host.1073741824.0";
  std::string otherFile = dir.file("losses.st.tmp.1073741824.0");
  for (const std::string &f : {dead, deadOld, live, otherHost, otherFile})
    writeAll(f, "partial");
  EXPECT_EQ(cleave_tensor_file_remove_stale(path.c_str()), 2) << lastError();
  auto exists = [](const std::string &f) {
    return ::access(f.c_str(), F_OK) == 0;
  };
  EXPECT_FALSE(exists(dead));
  EXPECT_FALSE(exists(deadOld));
  EXPECT_TRUE(exists(live));
  EXPECT_TRUE(exists(otherHost));
  EXPECT_TRUE(exists(otherFile));
  writeAll(dead, "partial");
  writeSample(path); // the writer cleans before it writes
  EXPECT_FALSE(exists(dead));
  EXPECT_TRUE(exists(path));
  EXPECT_EQ(cleave_tensor_file_remove_stale(dir.file("nowhere/x").c_str()), 0);
  EXPECT_EQ(cleave_tensor_file_remove_stale(""), -1);
  EXPECT_TRUE(has(lastError(), "the path is empty"));
}

TEST(TensorFileTest, CorruptionIsDetected) {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  writeSample(path);
  std::string good = readAll(path);
  // A flipped data byte: the checksum names the tensor.
  std::string bad = good;
  bad[bad.size() - 1] ^= 0x40; // Inside the last tensor's data.
  writeAll(path, bad);
  cleave_tensor_file *f = cleave_tensor_file_open(path.c_str());
  ASSERT_TRUE(f);
  bool anyMismatch = false;
  for (const char *name : {"w", "b", "step"}) {
    std::vector<char> dst(64);
    int32_t dtype;
    int64_t rank, shape[8];
    cleave_tensor_file_info(f, name, &dtype, &rank, shape);
    int64_t bytes = std::string(name) == "w"   ? 24
                    : std::string(name) == "b" ? 6
                                               : 8;
    if (cleave_tensor_file_read(f, name, dst.data(), bytes) != 0) {
      std::string e = lastError();
      EXPECT_TRUE(has(e, "checksum mismatch for tensor")) << e;
      anyMismatch = true;
    }
  }
  EXPECT_TRUE(anyMismatch);
  cleave_tensor_file_close(f);
  // Truncated data.
  writeAll(path, good.substr(0, good.size() - 4));
  EXPECT_FALSE(cleave_tensor_file_open(path.c_str()));
  std::string e = lastError();
  EXPECT_TRUE(has(e, "truncated")) << e;
  // Truncated header, garbage header, tiny file, missing file.
  writeAll(path, good.substr(0, 20));
  EXPECT_FALSE(cleave_tensor_file_open(path.c_str()));
  EXPECT_TRUE(has(lastError(), "does not fit the file"));
  std::string garbage = good;
  garbage[9] = '!';
  writeAll(path, garbage);
  EXPECT_FALSE(cleave_tensor_file_open(path.c_str()));
  EXPECT_TRUE(has(lastError(), "not a JSON object"));
  writeAll(path, "abc");
  EXPECT_FALSE(cleave_tensor_file_open(path.c_str()));
  EXPECT_TRUE(has(lastError(), "too short"));
  EXPECT_FALSE(cleave_tensor_file_open(dir.file("missing").c_str()));
  e = lastError();
  EXPECT_TRUE(has(e, "rank 0: tensor_file_open: cannot open") &&
              has(e, "No such file"))
      << e;
}

TEST(Crc32cTest, KnownValuesCopyAndCombine) {
  // The check value of CRC-32C (RFC 3720) and an empty input.
  const char *digits = "123456789";
  EXPECT_EQ(cleave_rt_crc32c(0, digits, 9), 0xE3069283u);
  EXPECT_EQ(cleave_rt_crc32c(0, digits, 0), 0u);
  // Uneven lengths and alignments: continued, copied and combined pieces
  // agree with the whole.
  std::vector<unsigned char> data(300001);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<unsigned char>(i * 2654435761u >> 13);
  uint32_t whole = cleave_rt_crc32c(0, data.data(), int64_t(data.size()));
  for (int64_t cut : {int64_t(1), int64_t(7), int64_t(131073)}) {
    const unsigned char *p = data.data() + 3;
    int64_t n = int64_t(data.size()) - 3;
    uint32_t a = cleave_rt_crc32c(0, p, cut);
    uint32_t b = cleave_rt_crc32c(0, p + cut, n - cut);
    EXPECT_EQ(cleave_rt_crc32c(a, p + cut, n - cut), cleave_rt_crc32c(0, p, n));
    EXPECT_EQ(cleave_rt_crc32c_combine(a, b, n - cut),
              cleave_rt_crc32c(0, p, n));
  }
  std::vector<unsigned char> copy(data.size());
  EXPECT_EQ(
      cleave_rt_copy_crc32c(copy.data(), data.data(), int64_t(data.size()), 0),
      whole);
  EXPECT_EQ(copy, data);
}

TEST(Crc32cTest, InterleavedLanesAgreeWithTheDefinition) {
  // Bit by bit, from the polynomial: the reference for inputs long enough
  // for the three-lane loop (24 KiB blocks), at odd offsets and lengths.
  auto bitwise = [](const unsigned char *p, size_t n) {
    uint32_t c = ~0u;
    while (n--) {
      c ^= *p++;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
  };
  std::vector<unsigned char> data(3 * 24576 + 1000);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<unsigned char>(i * 2654435761u >> 11);
  for (size_t offset : {size_t(0), size_t(5)})
    for (size_t n : {size_t(24576), size_t(24576 * 2 + 13), data.size() - 5})
      EXPECT_EQ(cleave_rt_crc32c(0, data.data() + offset, int64_t(n)),
                bitwise(data.data() + offset, n))
          << "offset " << offset << ", " << n << " bytes";
}

TEST(TensorFileTest, LargeFilesAreExactWhereverWritten) {
  // Above 1 MiB the writer goes through O_DIRECT where the file system
  // has it (aligned 8 MiB writes, the last block padded and cut off);
  // tmpfs may refuse it and get plain writes. Either way the file is
  // exactly the header and the data, and reads back.
  TempDir disk;
  std::vector<std::string> dirs = {disk.path};
  struct stat st;
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode))
    dirs.push_back("/dev/shm");
  std::vector<float> big((size_t(9) << 20) / 4 + 3);
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = float(i % 1000) * 0.5f;
  int64_t step = 7;
  for (const std::string &dir : dirs) {
    std::string path =
        dir + "/cleave-large-" + std::to_string(::getpid()) + ".safetensors";
    cleave_tensor_writer *writer = cleave_tensor_writer_create(path.c_str());
    ASSERT_TRUE(writer);
    int64_t shape[] = {int64_t(big.size())};
    ASSERT_EQ(cleave_tensor_writer_add_crc32c(
                  writer, "big", CLEAVE_F32, 1, shape, big.data(),
                  cleave_rt_crc32c(0, big.data(), int64_t(big.size() * 4))),
              0);
    ASSERT_EQ(
        cleave_tensor_writer_add(writer, "step", CLEAVE_I64, 0, nullptr, &step),
        0);
    uint32_t fileCrc = 0;
    ASSERT_EQ(cleave_tensor_writer_finish_crc32c(writer, &fileCrc), 0)
        << lastError();
    std::string bytes = readAll(path);
    uint64_t header = 0;
    std::memcpy(&header, bytes.data(), 8);
    EXPECT_EQ(bytes.size(), 8 + header + big.size() * 4 + 8) << path;
    EXPECT_EQ(fileCrc, cleave_rt_crc32c(0, bytes.data(), int64_t(bytes.size())))
        << path;
    cleave_tensor_file *f = cleave_tensor_file_open(path.c_str());
    ASSERT_TRUE(f) << lastError();
    std::vector<float> back(big.size());
    ASSERT_EQ(cleave_tensor_file_read(f, "big", back.data(),
                                      int64_t(back.size() * 4)),
              0)
        << lastError();
    EXPECT_EQ(back, big) << path;
    int64_t stepBack = 0;
    ASSERT_EQ(cleave_tensor_file_read(f, "step", &stepBack, 8), 0);
    EXPECT_EQ(stepBack, 7);
    cleave_tensor_file_close(f);
    // A flipped byte in the large tensor (read with O_DIRECT where the
    // file system has it) is caught by its checksum.
    bytes[bytes.size() - 5000] ^= 1;
    writeAll(path, bytes);
    f = cleave_tensor_file_open(path.c_str());
    ASSERT_TRUE(f) << lastError();
    EXPECT_NE(cleave_tensor_file_read(f, "big", back.data(),
                                      int64_t(back.size() * 4)),
              0);
    EXPECT_TRUE(has(lastError(), "checksum mismatch for tensor 'big'"));
    cleave_tensor_file_close(f);
    ::unlink(path.c_str());
  }
}

/// Collects what cleave_tensor_file_read_pieces gives: the bytes at their
/// offsets, and whether the pieces came in order without gaps.
struct Pieces {
  std::string bytes;
  bool inOrder = true;
  int count = 0;
  static void add(void *context, int64_t offset, const void *data, int64_t n) {
    auto &p = *static_cast<Pieces *>(context);
    p.inOrder = p.inOrder && offset == int64_t(p.bytes.size()) && n > 0;
    p.bytes.append(static_cast<const char *>(data), size_t(n));
    ++p.count;
  }
};

TEST(TensorFileTest, PiecesAreTheTensorAndCorruptionIsCaught) {
  // 20 MiB and a bit, starting at an unaligned file offset: three pieces
  // of 8 MiB or less (each checksummed as it comes), on the disk and on
  // tmpfs; and a small tensor with zlib's crc32, in one piece.
  TempDir disk;
  std::vector<std::string> dirs = {disk.path};
  struct stat st;
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode))
    dirs.push_back("/dev/shm");
  std::vector<int32_t> big((size_t(20) << 20) / 4 + 1001);
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = int32_t(i * 2654435761u);
  int32_t small[5] = {1, -2, 3, -4, 5};
  std::string bigBytes(reinterpret_cast<const char *>(big.data()),
                       big.size() * 4);
  for (const std::string &dir : dirs) {
    std::string path =
        dir + "/cleave-pieces-" + std::to_string(::getpid()) + ".safetensors";
    cleave_tensor_writer *writer = cleave_tensor_writer_create(path.c_str());
    ASSERT_TRUE(writer);
    int64_t bigShape[] = {int64_t(big.size())}, smallShape[] = {5};
    ASSERT_EQ(cleave_tensor_writer_add_crc32c(
                  writer, "big", CLEAVE_I32, 1, bigShape, big.data(),
                  cleave_rt_crc32c(0, big.data(), int64_t(bigBytes.size()))),
              0);
    ASSERT_EQ(cleave_tensor_writer_add(writer, "small", CLEAVE_I32, 1,
                                       smallShape, small),
              0);
    ASSERT_EQ(cleave_tensor_writer_finish(writer), 0) << lastError();
    cleave_tensor_file *f = cleave_tensor_file_open(path.c_str());
    ASSERT_TRUE(f) << lastError();
    Pieces pieces;
    ASSERT_EQ(cleave_tensor_file_read_pieces(f, "big", Pieces::add, &pieces), 0)
        << lastError();
    EXPECT_TRUE(pieces.inOrder) << path;
    EXPECT_GE(pieces.count, 3) << path;
    EXPECT_TRUE(pieces.bytes == bigBytes) << path;
    Pieces few;
    ASSERT_EQ(cleave_tensor_file_read_pieces(f, "small", Pieces::add, &few), 0)
        << lastError();
    EXPECT_EQ(few.bytes, std::string(reinterpret_cast<const char *>(small),
                                     sizeof(small)));
    EXPECT_NE(cleave_tensor_file_read_pieces(f, "none", Pieces::add, &few), 0);
    EXPECT_TRUE(has(lastError(), "no tensor 'none'"));
    // The whole read, straight into the destination.
    std::vector<int32_t> back(big.size());
    ASSERT_EQ(cleave_tensor_file_read(f, "big", back.data(),
                                      int64_t(bigBytes.size())),
              0)
        << lastError();
    EXPECT_EQ(back, big) << path;
    cleave_tensor_file_close(f);
    // One flipped byte in the middle chunk of the big tensor, then in the
    // small one: both reads fail naming the tensor.
    std::string file = readAll(path);
    uint64_t header = 0;
    std::memcpy(&header, file.data(), 8);
    size_t dataStart = 8 + header;
    for (const char *name : {"big", "small"}) {
      std::string bad = file;
      size_t at = std::string(name) == "big" ? dataStart + (size_t(10) << 20)
                                             : bad.size() - 7;
      bad[at] ^= 0x10;
      writeAll(path, bad);
      f = cleave_tensor_file_open(path.c_str());
      ASSERT_TRUE(f) << lastError();
      Pieces corrupt;
      EXPECT_NE(cleave_tensor_file_read_pieces(f, name, Pieces::add, &corrupt),
                0)
          << name << " in " << path;
      EXPECT_TRUE(
          has(lastError(),
              std::string("checksum mismatch for tensor '") + name + "'"))
          << path;
      if (std::string(name) == "big") {
        EXPECT_NE(cleave_tensor_file_read(f, "big", back.data(),
                                          int64_t(bigBytes.size())),
                  0);
        EXPECT_TRUE(has(lastError(), "checksum mismatch for tensor 'big'"));
      }
      cleave_tensor_file_close(f);
    }
    // Truncated in the middle of the big tensor: an error, not a short read.
    writeAll(path, file.substr(0, dataStart + (size_t(12) << 20)));
    EXPECT_FALSE(cleave_tensor_file_open(path.c_str()));
    lastError();
    ::unlink(path.c_str());
  }
}

TEST(TensorFileTest, GivenCrc32cIsStoredCheckedAndCombined) {
  TempDir dir;
  std::string path = dir.file("shard.ckpt");
  float w[6] = {1, 2, 3, 4, 5, 6};
  int64_t step = 42, shape[] = {2, 3};
  cleave_tensor_writer *writer = cleave_tensor_writer_create(path.c_str());
  ASSERT_TRUE(writer);
  ASSERT_EQ(cleave_tensor_writer_add_crc32c(writer, "w", CLEAVE_F32, 2, shape,
                                            w, cleave_rt_crc32c(0, w, 24)),
            0);
  ASSERT_EQ(cleave_tensor_writer_add_crc32c(writer, "step", CLEAVE_I64, 0,
                                            nullptr, &step,
                                            cleave_rt_crc32c(0, &step, 8)),
            0);
  uint32_t fileCrc = 0;
  ASSERT_EQ(cleave_tensor_writer_finish_crc32c(writer, &fileCrc), 0)
      << lastError();
  std::string good = readAll(path);
  EXPECT_EQ(fileCrc, cleave_rt_crc32c(0, good.data(), int64_t(good.size())));
  cleave_tensor_file *f = cleave_tensor_file_open(path.c_str());
  ASSERT_TRUE(f);
  EXPECT_FALSE(cleave_tensor_file_metadata(f, "crc32:w"));
  ASSERT_TRUE(cleave_tensor_file_metadata(f, "crc32c:w"));
  float back[6];
  EXPECT_EQ(cleave_tensor_file_read(f, "w", back, 24), 0) << lastError();
  cleave_tensor_file_close(f);
  // A wrong CRC given is caught on read, naming the tensor.
  writer = cleave_tensor_writer_create(path.c_str());
  ASSERT_EQ(cleave_tensor_writer_add_crc32c(writer, "w", CLEAVE_F32, 2, shape,
                                            w, 1234),
            0);
  ASSERT_EQ(cleave_tensor_writer_finish(writer), 0);
  f = cleave_tensor_file_open(path.c_str());
  ASSERT_TRUE(f);
  EXPECT_NE(cleave_tensor_file_read(f, "w", back, 24), 0);
  std::string e = lastError();
  EXPECT_TRUE(has(e, "checksum mismatch for tensor 'w'") &&
              has(e, "crc32c 000004d2"))
      << e;
  cleave_tensor_file_close(f);
}

TEST(TensorFileTest, WriterRejectsBadInput) {
  TempDir dir;
  cleave_tensor_writer *w = cleave_tensor_writer_create(dir.file("x").c_str());
  float data[4] = {0};
  int64_t shape[] = {4};
  EXPECT_EQ(cleave_tensor_writer_add(w, "a", CLEAVE_F32, 1, shape, data), 0);
  EXPECT_NE(cleave_tensor_writer_add(w, "a", CLEAVE_F32, 1, shape, data), 0);
  EXPECT_TRUE(has(lastError(), "added twice"));
  EXPECT_NE(cleave_tensor_writer_add(w, "b", 9, 1, shape, data), 0);
  EXPECT_TRUE(has(lastError(), "unknown dtype code 9"));
  EXPECT_NE(cleave_tensor_writer_set_metadata(w, "crc32:a", "0"), 0);
  EXPECT_NE(cleave_tensor_writer_set_metadata(w, "crc32c:a", "0"), 0);
  EXPECT_TRUE(has(lastError(), "reserved"));
  cleave_tensor_writer_abort(w);
  // A directory that does not exist: the error names the path.
  w = cleave_tensor_writer_create("/nonexistent-dir/x.safetensors");
  EXPECT_NE(cleave_tensor_writer_finish(w), 0);
  EXPECT_TRUE(has(lastError(), "/nonexistent-dir/x.safetensors.tmp"));
}

/// Interop with the safetensors layout written and read by plain Python
/// (json + struct, as the safetensors package lays files out).
TEST(TensorFileTest, PythonInterop) {
  TempDir dir;
  std::string script = dir.file("st.py");
  writeAll(script, R"PY(
import json, struct, sys
mode, path = sys.argv[1], sys.argv[2]
if mode == "write":
    # What safetensors.torch.save_file produces: compact JSON, sorted by
    # dtype size then name, header padded with spaces to 8 bytes.
    a = struct.pack("<4d", 1.5, -2.0, 3.25, 4.0)
    b = struct.pack("<6f", *[float(i) for i in range(6)])
    c = struct.pack("<3H", 0x3f80, 0x4000, 0xbf80)
    header = {"a": {"dtype": "F64", "shape": [4], "data_offsets": [0, 32]},
              "b": {"dtype": "F32", "shape": [2, 3], "data_offsets": [32, 56]},
              "c": {"dtype": "BF16", "shape": [3], "data_offsets": [56, 62]},
              "__metadata__": {"format": "pt"}}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + a + b + c)
else:
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    assert n % 8 == 0, n
    meta = header.pop("__metadata__")
    assert meta["format"] == "cleave", meta
    body = data[8 + n:]
    spans = sorted(v["data_offsets"] for v in header.values())
    assert spans[0][0] == 0 and spans[-1][1] == len(body), spans
    for (b0, e0), (b1, e1) in zip(spans, spans[1:]):
        assert e0 == b1, spans
    w = header["w"]
    assert w["dtype"] == "F32" and w["shape"] == [2, 3], w
    b0, e0 = w["data_offsets"]
    assert struct.unpack("<6f", body[b0:e0]) == (1, 2, 3, 4, 5, 6)
    assert header["step"]["shape"] == []
    print("python read ok")
)PY");
  std::string pyFile = dir.file("py.safetensors");
  ASSERT_EQ(
      std::system(("/usr/bin/python3 " + script + " write " + pyFile).c_str()),
      0);
  cleave_tensor_file *f = cleave_tensor_file_open(pyFile.c_str());
  ASSERT_TRUE(f) << lastError();
  double a[4];
  float b[6];
  uint16_t c[3];
  ASSERT_EQ(cleave_tensor_file_read(f, "a", a, sizeof(a)), 0) << lastError();
  ASSERT_EQ(cleave_tensor_file_read(f, "b", b, sizeof(b)), 0);
  ASSERT_EQ(cleave_tensor_file_read(f, "c", c, sizeof(c)), 0);
  EXPECT_EQ(a[2], 3.25);
  EXPECT_EQ(b[5], 5.0f);
  EXPECT_EQ(c[2], 0xbf80);
  EXPECT_STREQ(cleave_tensor_file_metadata(f, "format"), "pt");
  cleave_tensor_file_close(f);
  std::string ours = dir.file("ours.safetensors");
  writeSample(ours);
  EXPECT_EQ(
      std::system(("/usr/bin/python3 " + script + " read " + ours).c_str()), 0);
}

//===----------------------------------------------------------------------===//
// Token files
//===----------------------------------------------------------------------===//

TEST(TokenFileTest, BatchesAreTheSameWhateverTheSplit) {
  TempDir dir;
  std::vector<uint16_t> tokens(5000);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = uint16_t(i % 1000);
  std::string path = dir.file("train.bin");
  writeAll(path, std::string(reinterpret_cast<char *>(tokens.data()),
                             tokens.size() * 2));
  cleave_token_file *f = cleave_token_file_open(path.c_str(), 2);
  ASSERT_TRUE(f) << lastError();
  EXPECT_EQ(cleave_token_file_length(f), 5000);
  const int64_t rows = 8, seq = 16;
  std::vector<int32_t> in(rows * seq), tg(rows * seq);
  ASSERT_EQ(cleave_token_file_batch(f, 1234, 7, 0, rows, seq, 1000, in.data(),
                                    tg.data()),
            0)
      << lastError();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t + 1 < seq; ++t) {
      EXPECT_EQ(tg[r * seq + t], in[r * seq + t + 1]); // Shifted by one.
      EXPECT_EQ((in[r * seq + t] + 1) % 1000, in[r * seq + t + 1]);
    }
  // Rows 3..5 asked alone (another rank's share) are the same rows.
  std::vector<int32_t> in2(3 * seq), tg2(3 * seq);
  ASSERT_EQ(cleave_token_file_batch(f, 1234, 7, 3, 3, seq, 1000, in2.data(),
                                    tg2.data()),
            0);
  EXPECT_TRUE(std::equal(in2.begin(), in2.end(), in.begin() + 3 * seq));
  // The documented start position: Philox with key seed ^ "TOKENS".
  uint32_t w[4];
  cleave_rt_philox(1234 ^ 0x544F4B454E53ull, 3, 0, 7, 0, w);
  uint64_t start = ((uint64_t(w[1]) << 32) | w[0]) % (5000 - seq);
  EXPECT_EQ(in2[0], int32_t(start % 1000));
  // Another step gives other rows; a memory copy gives the same rows.
  std::vector<int32_t> in3(rows * seq), tg3(rows * seq);
  cleave_rt_clear_error();
  cleave_token_file_batch(f, 1234, 8, 0, rows, seq, 1000, in3.data(),
                          tg3.data());
  EXPECT_NE(in, in3);
  cleave_token_file *m = cleave_token_file_from_memory(tokens.data(), 5000, 2);
  cleave_token_file_batch(m, 1234, 7, 0, rows, seq, 1000, in3.data(),
                          tg3.data());
  EXPECT_EQ(in, in3);
  cleave_token_file_close(m);
  cleave_token_file_close(f);
}

TEST(TokenFileTest, BadInputGivesClearErrors) {
  TempDir dir;
  std::string empty = dir.file("empty.bin"), odd = dir.file("odd.bin");
  writeAll(empty, "");
  writeAll(odd, "abc");
  EXPECT_FALSE(cleave_token_file_open(empty.c_str(), 2));
  EXPECT_TRUE(has(lastError(), "is empty"));
  EXPECT_FALSE(cleave_token_file_open(odd.c_str(), 2));
  EXPECT_TRUE(has(lastError(), "size 3 bytes is not a multiple of the token "
                               "size 2"));
  EXPECT_FALSE(cleave_token_file_open(odd.c_str(), 3));
  EXPECT_TRUE(has(lastError(), "token_bytes is 3"));
  EXPECT_FALSE(cleave_token_file_open(dir.file("nope.bin").c_str(), 4));
  EXPECT_TRUE(has(lastError(), "cannot open"));
  uint32_t tokens[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 70000};
  cleave_token_file *f = cleave_token_file_from_memory(tokens, 10, 4);
  std::vector<int32_t> in(100), tg(100);
  EXPECT_NE(
      cleave_token_file_batch(f, 0, 0, 0, 1, 10, 100, in.data(), tg.data()), 0);
  EXPECT_TRUE(has(lastError(), "has 10 tokens, too few for seq_len 10"));
  // A window that includes position 9 finds the bad token.
  bool found = false;
  for (int step = 0; step < 50 && !found; ++step) {
    if (cleave_token_file_batch(f, 0, step, 0, 4, 5, 100, in.data(),
                                tg.data()) != 0) {
      std::string e = lastError();
      EXPECT_TRUE(has(e, "token at position 9 is 70000, not below the "
                         "vocabulary size 100"))
          << e;
      found = true;
    }
  }
  EXPECT_TRUE(found);
  EXPECT_NE(
      cleave_token_file_batch(f, 0, 0, 0, 1, 0, 100, in.data(), tg.data()), 0);
  EXPECT_TRUE(has(lastError(), "seq_len 0 must be positive"));
  EXPECT_NE(cleave_token_file_batch(nullptr, 0, 0, 0, 1, 4, 100, in.data(),
                                    tg.data()),
            0);
  lastError();
  cleave_token_file_close(f);
}

} // namespace
