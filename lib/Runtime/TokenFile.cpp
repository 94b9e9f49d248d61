//===- TokenFile.cpp - nanoGPT-style token files and batch sampling -------===//
//
// A token file is a raw array of uint16 or uint32 (nanoGPT's train.bin). Row
// r of the global batch of step s starts at
//   start = (w0 | w1 << 32) mod (length - seq_len)
// where (w0, w1, w2, w3) = Philox-4x32-10 with key seed ^ kTokenSeedXor and
// counter (r lo, r hi, s lo, s hi); inputs are tokens[start, start+seq_len),
// targets tokens[start+1, start+seq_len]. Every rank computes the same rows
// whatever part of the batch it asks for.
//
//===----------------------------------------------------------------------===//

#include "Error.h"
#include "Philox.h"

#include "cleave/Runtime/Runtime.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace cleave::rt;

namespace {
/// Keeps token positions independent of cleave_rt_fill streams that use the
/// same seed ("TOKENS" in ASCII).
constexpr uint64_t kTokenSeedXor = 0x544F4B454E53ull;
} // namespace

struct cleave_token_file {
  std::string name;
  const unsigned char *data = nullptr;
  int64_t count = 0;
  int32_t tokenBytes = 2;
  void *map = nullptr;
  size_t mapBytes = 0;
  std::vector<unsigned char> owned;
  ~cleave_token_file() {
    if (map)
      ::munmap(map, mapBytes);
  }
  uint32_t token(int64_t i) const {
    if (tokenBytes == 2) {
      uint16_t v;
      std::memcpy(&v, data + 2 * i, 2);
      return v;
    }
    uint32_t v;
    std::memcpy(&v, data + 4 * i, 4);
    return v;
  }
};

namespace {

void checkTokenBytes(int32_t tokenBytes) {
  require(tokenBytes == 2 || tokenBytes == 4, "token_bytes is ", tokenBytes,
          " (must be 2 or 4)");
}

cleave_token_file *openTokens(const char *path, int32_t tokenBytes) {
  require(path, "the path is NULL");
  checkTokenBytes(tokenBytes);
  auto file = std::make_unique<cleave_token_file>();
  file->name = path;
  file->tokenBytes = tokenBytes;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  require(fd >= 0, "cannot open ", path, ": ", std::strerror(errno));
  struct stat st;
  bool ok = ::fstat(fd, &st) == 0;
  if (!ok || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw RuntimeError(concat(path, " is not a regular file"));
  }
  uint64_t size = uint64_t(st.st_size);
  if (size == 0 || size % uint64_t(tokenBytes) != 0) {
    ::close(fd);
    throw RuntimeError(
        size == 0 ? concat(path, " is empty")
                  : concat(path, ": its size ", size,
                           " bytes is not a multiple of the token size ",
                           tokenBytes, " (wrong token_bytes, or truncated)"));
  }
  void *map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int mapErrno = errno;
  ::close(fd);
  require(map != MAP_FAILED, "cannot map ", path, ": ",
          std::strerror(mapErrno));
  ::madvise(map, size, MADV_RANDOM);
  file->map = map;
  file->mapBytes = size;
  file->data = static_cast<const unsigned char *>(map);
  file->count = int64_t(size / uint64_t(tokenBytes));
  return file.release();
}

cleave_token_file *tokensFromMemory(const void *tokens, int64_t count,
                                    int32_t tokenBytes) {
  checkTokenBytes(tokenBytes);
  require(count > 0, "count is ", count, " (must be positive)");
  require(tokens, "the token pointer is NULL");
  auto file = std::make_unique<cleave_token_file>();
  file->name = "<memory>";
  file->tokenBytes = tokenBytes;
  const unsigned char *p = static_cast<const unsigned char *>(tokens);
  file->owned.assign(p, p + count * tokenBytes);
  file->data = file->owned.data();
  file->count = count;
  return file.release();
}

void sampleBatch(const cleave_token_file *file, uint64_t seed, int64_t step,
                 int64_t firstRow, int64_t rows, int64_t seqLen, int64_t vocab,
                 int32_t *inputs, int32_t *targets) {
  require(file, "the token file is NULL");
  require(step >= 0 && firstRow >= 0 && rows >= 0, file->name, ": step ", step,
          ", first_row ", firstRow, " and rows ", rows,
          " must be non-negative");
  require(seqLen >= 1, file->name, ": seq_len ", seqLen, " must be positive");
  require(vocab >= 1 && vocab <= (int64_t(1) << 31), file->name, ": vocab ",
          vocab, " must be in [1, 2^31]");
  require(rows == 0 || (inputs && targets), "inputs or targets is NULL");
  require(file->count >= seqLen + 1, file->name, " has ", file->count,
          " tokens, too few for seq_len ", seqLen, " (needs ", seqLen + 1, ")");
  PhiloxKey key = philoxKey(seed ^ kTokenSeedXor);
  uint64_t span = uint64_t(file->count - seqLen);
  for (int64_t i = 0; i < rows; ++i) {
    uint64_t row = uint64_t(firstRow + i);
    PhiloxCounter w = philox4x32_10({uint32_t(row), uint32_t(row >> 32),
                                     uint32_t(uint64_t(step)),
                                     uint32_t(uint64_t(step) >> 32)},
                                    key);
    int64_t start = int64_t(((uint64_t(w[1]) << 32) | w[0]) % span);
    for (int64_t t = 0; t <= seqLen; ++t) {
      uint32_t token = file->token(start + t);
      if (int64_t(token) >= vocab)
        throw RuntimeError(concat(file->name, ": token at position ", start + t,
                                  " is ", token,
                                  ", not below the vocabulary size ", vocab,
                                  " (row ", row, " of step ", step, ")"));
      if (t < seqLen)
        inputs[i * seqLen + t] = int32_t(token);
      if (t > 0)
        targets[i * seqLen + t - 1] = int32_t(token);
    }
  }
}

} // namespace

extern "C" {

cleave_token_file *cleave_token_file_open(const char *path,
                                          int32_t token_bytes) {
  return guard("token_file_open", static_cast<cleave_token_file *>(nullptr),
               [&] { return openTokens(path, token_bytes); });
}

cleave_token_file *cleave_token_file_from_memory(const void *tokens,
                                                 int64_t count,
                                                 int32_t token_bytes) {
  return guard("token_file_from_memory",
               static_cast<cleave_token_file *>(nullptr),
               [&] { return tokensFromMemory(tokens, count, token_bytes); });
}

void cleave_token_file_close(cleave_token_file *file) { delete file; }

int64_t cleave_token_file_length(const cleave_token_file *file) {
  return file ? file->count : -1;
}

int cleave_token_file_batch(cleave_token_file *file, uint64_t seed,
                            int64_t step, int64_t first_row, int64_t rows,
                            int64_t seq_len, int64_t vocab, int32_t *inputs,
                            int32_t *targets) {
  return guard("token_file_batch", 1, [&] {
    sampleBatch(file, seed, step, first_row, rows, seq_len, vocab, inputs,
                targets);
    return 0;
  });
}

} // extern "C"
