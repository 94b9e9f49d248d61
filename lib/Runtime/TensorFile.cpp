//===- TensorFile.cpp - safetensors-compatible tensor files ---------------===//
//
// Layout: an 8-byte little-endian header length, a JSON header, the data.
// Reads check every offset and size against the file before touching data
// (pread, no mmap: a truncated file is an error, never a SIGBUS) and verify
// the "crc32:<name>" or "crc32c:<name>" metadata when present. Writes go to a
// temporary file in the same directory (with O_DIRECT from 1 MiB on, see
// FileOut), fsync'd and renamed into place.
//
//===----------------------------------------------------------------------===//

#include "DType.h"
#include "Error.h"
#include "cleave/Runtime/DTypeTable.h"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <map>
#include <memory>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

using namespace cleave::rt;
using nlohmann::json;

namespace {

/// safetensors dtypes the runtime has no ABI code for: files holding them
/// still parse (their other tensors are usable), reading them is an error.
struct ForeignDType {
  const char *name;
  int64_t size;
};
const ForeignDType kForeignDTypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
    {"I16", 2},  {"U16", 2}, {"U32", 4}, {"U64", 8},
};

/// The element size and ABI code (-1 when the runtime has none) of the
/// safetensors dtype `name`; nullopt for a name safetensors does not have.
std::optional<std::pair<int64_t, int32_t>>
lookupFileDType(const std::string &name) {
  if (const DTypeInfo *info = lookupDTypeByFileName(name))
    return std::make_pair(info->bytes, info->code);
  for (const ForeignDType &foreign : kForeignDTypes)
    if (name == foreign.name)
      return std::make_pair(foreign.size, int32_t(-1));
  return std::nullopt;
}

const char *safetensorsName(int32_t code) {
  const DTypeInfo *info = lookupDType(code);
  return info ? info->fileName.data() : nullptr;
}

constexpr uint64_t kMaxHeaderBytes = 100u << 20;

/// Files of kDirectMin bytes or more are written with O_DIRECT, in kChunk
/// transfers through a staging buffer aligned to kAlign (see FileOut).
/// Reads are plain preads of kChunk bytes or less, the kernel asked to
/// read ahead (POSIX_FADV_WILLNEED) for tensors of kReadAheadMin bytes or
/// more.
constexpr size_t kAlign = 4096, kChunk = size_t(8) << 20;
constexpr uint64_t kDirectMin = 1 << 20, kReadAheadMin = 1 << 20;

struct FreeAligned {
  void operator()(char *p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<char, FreeAligned>;

/// A kChunk staging buffer aligned for O_DIRECT, or null.
AlignedBuffer stagingBuffer() {
  void *p = nullptr;
  if (::posix_memalign(&p, kAlign, kChunk) != 0)
    return nullptr;
  return AlignedBuffer(static_cast<char *>(p));
}

std::string crcText(uint32_t crc) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "%08x", crc);
  return buffer;
}

uint32_t crcOf(const void *data, uint64_t bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const Bytef *p = static_cast<const Bytef *>(data);
  while (bytes > 0) {
    uInt chunk = uInt(std::min<uint64_t>(bytes, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    bytes -= chunk;
  }
  return uint32_t(crc);
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

/// Reads exactly `bytes` at `offset`; throws naming the file if short.
void preadAll(int fd, const std::string &path, void *dst, uint64_t bytes,
              uint64_t offset) {
  char *p = static_cast<char *>(dst);
  while (bytes > 0) {
    ssize_t n = ::pread(fd, p, size_t(std::min<uint64_t>(bytes, 1u << 30)),
                        off_t(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      throw RuntimeError(concat(
          path, ": cannot read ", bytes, " bytes at offset ", offset, ": ",
          n == 0 ? "the file is truncated" : std::strerror(errno)));
    p += n;
    bytes -= uint64_t(n);
    offset += uint64_t(n);
  }
}

} // namespace

struct cleave_tensor_file {
  struct Entry {
    std::string name;
    std::string dtypeName;
    int32_t dtype;
    int64_t elementSize;
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  std::string path;
  int fd = -1;
  /// The buffer of cleave_tensor_file_read_pieces (kChunk bytes).
  AlignedBuffer staging;
  uint64_t dataStart = 0;
  std::vector<Entry> entries;
  std::map<std::string, size_t> index;
  std::map<std::string, std::string> metadata;
  ~cleave_tensor_file() {
    if (fd >= 0)
      ::close(fd);
  }
  const Entry &find(const std::string &name) const;
};

const cleave_tensor_file::Entry &
cleave_tensor_file::find(const std::string &name) const {
  auto it = index.find(name);
  if (it != index.end())
    return entries[it->second];
  std::string names;
  for (size_t i = 0; i < entries.size() && i < 10; ++i)
    names += (i ? ", " : "") + entries[i].name;
  if (entries.size() > 10)
    names += ", ...";
  throw RuntimeError(concat(path, ": no tensor '", name, "' (the file has ",
                            entries.size(), ": ", names, ")"));
}

namespace {

/// Parses one tensor entry of the header.
cleave_tensor_file::Entry parseEntry(const std::string &path,
                                     const std::string &name, const json &v,
                                     uint64_t dataBytes) {
  std::string where = concat(path, ": tensor '", name, "'");
  require(v.is_object(), where + ": the header entry is not an object");
  cleave_tensor_file::Entry e;
  e.name = name;
  require(v.contains("dtype") && v["dtype"].is_string(),
          where + ": no dtype string");
  e.dtypeName = v["dtype"].get<std::string>();
  auto info = lookupFileDType(e.dtypeName);
  require(info.has_value(), where, ": unknown dtype '", e.dtypeName, "'");
  e.elementSize = info->first;
  e.dtype = info->second;
  require(v.contains("shape") && v["shape"].is_array(),
          where + ": no shape array");
  uint64_t elements = 1;
  for (const json &d : v["shape"]) {
    require(d.is_number_integer() && d.get<int64_t>() >= 0,
            where + ": shape entries must be non-negative integers");
    e.shape.push_back(d.get<int64_t>());
    require(e.shape.back() == 0 ||
                elements <= (uint64_t(1) << 62) / uint64_t(e.shape.back()),
            where + ": the shape is too large");
    elements *= uint64_t(e.shape.back());
  }
  const json &o = v.contains("data_offsets") ? v["data_offsets"] : json();
  require(o.is_array() && o.size() == 2 && o[0].is_number_unsigned() &&
              o[1].is_number_unsigned(),
          where + ": data_offsets must be two non-negative integers");
  e.begin = o[0].get<uint64_t>();
  e.end = o[1].get<uint64_t>();
  require(e.begin <= e.end, where, ": data_offsets [", e.begin, ", ", e.end,
          "] are reversed");
  uint64_t need = elements * uint64_t(e.elementSize);
  require(e.end - e.begin == need, where, ": shape ", shapeText(e.shape),
          " of ", e.dtypeName, " needs ", need, " bytes but data_offsets span ",
          e.end - e.begin);
  require(e.end <= dataBytes, where, ": its data ends at byte ", e.end,
          " but the file holds only ", dataBytes,
          " bytes of data (truncated?)");
  return e;
}

cleave_tensor_file *openTensorFile(const char *pathText) {
  require(pathText, "the path is NULL");
  auto file = std::make_unique<cleave_tensor_file>();
  file->path = pathText;
  const std::string &path = file->path;
  file->fd = ::open(pathText, O_RDONLY | O_CLOEXEC);
  require(file->fd >= 0, "cannot open ", path, ": ", std::strerror(errno));
  struct stat st;
  require(::fstat(file->fd, &st) == 0 && S_ISREG(st.st_mode), path,
          " is not a regular file");
  uint64_t size = uint64_t(st.st_size);
  require(size >= 8, path, ": ", size,
          " bytes is too short for a tensor file (the "
          "8-byte header length is missing)");
  unsigned char lengthBytes[8];
  preadAll(file->fd, path, lengthBytes, 8, 0);
  uint64_t headerBytes = 0;
  for (int i = 0; i < 8; ++i)
    headerBytes |= uint64_t(lengthBytes[i]) << (8 * i);
  require(headerBytes <= kMaxHeaderBytes && 8 + headerBytes <= size, path,
          ": header length ", headerBytes, " does not fit the file of ", size,
          " bytes (truncated or not a tensor file)");
  std::string header(headerBytes, '\0');
  preadAll(file->fd, path, header.data(), headerBytes, 8);
  file->dataStart = 8 + headerBytes;
  json doc = json::parse(header, nullptr, false);
  require(!doc.is_discarded() && doc.is_object(), path,
          ": the header is not a JSON object (corrupt file?)");
  for (auto &[key, value] : doc.items()) {
    if (key == "__metadata__") {
      require(value.is_object(), path + ": __metadata__ is not an object");
      for (auto &[mk, mv] : value.items()) {
        require(mv.is_string(), path, ": metadata '", mk, "' is not a string");
        file->metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    file->index[key] = file->entries.size();
    file->entries.push_back(
        parseEntry(path, key, value, size - file->dataStart));
  }
  std::vector<const cleave_tensor_file::Entry *> sorted;
  for (const auto &e : file->entries)
    sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(),
            [](auto *a, auto *b) { return a->begin < b->begin; });
  for (size_t i = 1; i < sorted.size(); ++i)
    require(sorted[i]->begin >= sorted[i - 1]->end, path, ": tensors '",
            sorted[i - 1]->name, "' and '", sorted[i]->name, "' overlap");
  return file.release();
}

/// Calls `visit(data, at, n)` for the bytes [offset, offset + bytes) of
/// `file`, in order, `at` counting from `offset`: plain preads of kChunk
/// bytes or less, into `dst` + `at` (or, if `dst` is null, into a kChunk
/// buffer of the file's, reused). The kernel is told first that the whole
/// range will be needed, so it reads ahead of the preads, with many
/// requests in flight (on this machine's disk reads through the page cache
/// ran at twice O_DIRECT's rate, docs/runtime.md), and `visit` (a checksum)
/// sees each piece while it is still in the CPU's cache.
template <typename Visit>
void forEachChunk(cleave_tensor_file &file, uint64_t bytes, uint64_t offset,
                  char *dst, Visit &&visit) {
  if (bytes >= kReadAheadMin)
    ::posix_fadvise(file.fd, off_t(offset), off_t(bytes), POSIX_FADV_WILLNEED);
  if (!dst && !file.staging) {
    file.staging = stagingBuffer();
    require(file.staging != nullptr, file.path,
            ": cannot allocate a read buffer");
  }
  for (uint64_t at = 0; at < bytes;) {
    uint64_t n = std::min<uint64_t>(bytes - at, kChunk);
    char *to = dst ? dst + at : file.staging.get();
    preadAll(file.fd, file.path, to, n, offset + at);
    visit(to, at, n);
    at += n;
  }
}

const cleave_tensor_file::Entry &readableEntry(cleave_tensor_file *file,
                                               const char *name) {
  require(file && name, "the file or the name is NULL");
  const cleave_tensor_file::Entry &e = file->find(name);
  require(e.dtype >= 0, file->path, ": tensor '", e.name, "' has dtype ",
          e.dtypeName, ", which the runtime does not support");
  return e;
}

/// The checksums a tensor's header entry has (zlib's crc32, CRC32C),
/// accumulated over its data piece by piece, then checked.
class Checksums {
public:
  Checksums(const cleave_tensor_file &file, const cleave_tensor_file::Entry &e)
      : file(file), e(e) {
    auto crc32 = file.metadata.find("crc32:" + e.name);
    auto crc32c = file.metadata.find("crc32c:" + e.name);
    if (crc32 != file.metadata.end())
      wantZlib = &crc32->second;
    if (crc32c != file.metadata.end())
      wantCrc32c = &crc32c->second;
  }

  void add(const char *data, uint64_t n) {
    if (wantZlib)
      zlib = ::crc32_z(zlib, reinterpret_cast<const Bytef *>(data), n);
    if (wantCrc32c)
      crc32c = cleave_rt_crc32c(crc32c, data, int64_t(n));
  }

  /// Throws naming the tensor if a checksum does not match.
  void check() const {
    if (wantZlib)
      compare("crc32", *wantZlib, uint32_t(zlib));
    if (wantCrc32c)
      compare("crc32c", *wantCrc32c, crc32c);
  }

private:
  void compare(const char *kind, const std::string &expected,
               uint32_t actual) const {
    require(crcText(actual) == expected, file.path,
            ": checksum mismatch for tensor '", e.name, "': the header says ",
            kind, " ", expected, " but the data has ", crcText(actual),
            " (the file is corrupt)");
  }

  const cleave_tensor_file &file;
  const cleave_tensor_file::Entry &e;
  const std::string *wantZlib = nullptr, *wantCrc32c = nullptr;
  uLong zlib = ::crc32(0L, Z_NULL, 0);
  uint32_t crc32c = 0;
};

void readTensor(cleave_tensor_file *file, const char *name, void *dst,
                int64_t bytes) {
  const cleave_tensor_file::Entry &e = readableEntry(file, name);
  uint64_t size = e.end - e.begin;
  require(bytes >= 0 && uint64_t(bytes) == size, file->path, ": tensor '",
          e.name, "' has ", size, " bytes (", dtypeName(e.dtype), " ",
          shapeText(e.shape), ") but the destination has ", bytes);
  require(dst || size == 0, "the destination is NULL");
  // Each piece is checksummed right after it is read, while it is still
  // in the CPU's cache, not in a second pass over the tensor.
  Checksums checksums(*file, e);
  forEachChunk(
      *file, size, file->dataStart + e.begin, static_cast<char *>(dst),
      [&](const char *data, uint64_t, uint64_t n) { checksums.add(data, n); });
  checksums.check();
}

/// Streams tensor `name` to `fn` in pieces, then checks its checksums.
void readPieces(cleave_tensor_file *file, const char *name,
                cleave_tensor_piece_fn fn, void *context) {
  const cleave_tensor_file::Entry &e = readableEntry(file, name);
  require(fn, "the piece function is NULL");
  Checksums checksums(*file, e);
  forEachChunk(*file, e.end - e.begin, file->dataStart + e.begin, nullptr,
               [&](const char *data, uint64_t at, uint64_t n) {
                 checksums.add(data, n);
                 fn(context, int64_t(at), data, int64_t(n));
               });
  checksums.check();
}

} // namespace

//===----------------------------------------------------------------------===//
// Writer
//===----------------------------------------------------------------------===//

struct cleave_tensor_writer {
  struct Item {
    std::string name;
    int32_t dtype;
    std::vector<int64_t> shape;
    const void *data;
    uint64_t bytes;
    /// Given by the caller (add_crc32c), else zlib's crc32 is computed.
    bool hasCrc32c = false;
    uint32_t crc32c = 0;
  };
  std::string path;
  std::vector<Item> items;
  std::map<std::string, std::string> metadata;
};

namespace {

void addTensor(cleave_tensor_writer *w, const char *name, int32_t dtype,
               int64_t rank, const int64_t *shape, const void *data) {
  require(w && name && *name, "the writer or the tensor name is NULL/empty");
  std::string where = concat(w->path, ": tensor '", name, "'");
  require(std::string(name) != "__metadata__", where + ": reserved name");
  for (const auto &item : w->items)
    require(item.name != name, where + ": added twice");
  checkDType(dtype);
  require(rank >= 0 && rank <= 8 && (rank == 0 || shape), where, ": rank ",
          rank, " (must be 0..8 with a shape)");
  cleave_tensor_writer::Item item{name, dtype, {}, data, 0};
  uint64_t elements = 1;
  for (int64_t i = 0; i < rank; ++i) {
    require(shape[i] >= 0, where, ": dimension ", i, " is ", shape[i]);
    item.shape.push_back(shape[i]);
    elements *= uint64_t(shape[i]);
  }
  item.bytes = elements * uint64_t(dtypeSize(dtype));
  require(data || item.bytes == 0, where + ": the data pointer is NULL");
  w->items.push_back(std::move(item));
}

void writeAll(int fd, const std::string &path, const void *data,
              uint64_t bytes) {
  const char *p = static_cast<const char *>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, size_t(std::min<uint64_t>(bytes, 1u << 30)));
    if (n < 0 && errno == EINTR)
      continue;
    require(n > 0, "cannot write ", path, ": ", std::strerror(errno));
    p += n;
    bytes -= uint64_t(n);
  }
}

/// The data of a file being written, through an aligned staging buffer with
/// O_DIRECT where the file system takes it: large aligned writes straight
/// to the disk. Buffered writes copy everything into the page cache first,
/// and its write-back (which fsync then waits for) ran at a fraction of the
/// disk's speed here; they also evict the pages the training uses. Files
/// below kDirectMin bytes, and file systems without O_DIRECT (tmpfs), get
/// plain writes.
class FileOut {
public:
  FileOut(int fd, const std::string &path, uint64_t size) : fd(fd), path(path) {
    if (size < kDirectMin)
      return;
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || !(staging = stagingBuffer()))
      return;
    direct = ::fcntl(fd, F_SETFL, flags | O_DIRECT) == 0;
  }

  void append(const void *data, uint64_t bytes) {
    total += bytes;
    if (!staging || !direct) {
      writeAll(fd, path, data, bytes);
      return;
    }
    const char *p = static_cast<const char *>(data);
    while (bytes > 0) {
      size_t n = size_t(std::min<uint64_t>(bytes, kChunk - used));
      std::memcpy(staging.get() + used, p, n);
      used += n;
      p += n;
      bytes -= n;
      if (used == kChunk)
        flush(used);
    }
  }

  /// Writes what is staged (the last block padded with zeros, then cut off
  /// by ftruncate).
  void finish() {
    if (!staging || used == 0)
      return;
    size_t padded = (used + kAlign - 1) / kAlign * kAlign;
    std::memset(staging.get() + used, 0, padded - used);
    bool wasDirect = direct;
    flush(direct ? padded : used);
    if (wasDirect && padded != used) {
      int truncated = ::ftruncate(fd, off_t(total));
      require(truncated == 0, "ftruncate ", path, ": ", std::strerror(errno));
    }
  }

  /// Writes what is staged with plain writes (the stall test hook's file
  /// then has what was appended).
  void drain() {
    if (!staging || used == 0)
      return;
    buffered();
    flush(used);
  }

private:
  /// Writes the first `bytes` bytes staged; on EINVAL (the file system
  /// refused this O_DIRECT write) falls back to plain writes.
  void flush(size_t bytes) {
    size_t done = 0;
    while (done < bytes) {
      ssize_t n = ::write(fd, staging.get() + done, bytes - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EINVAL && direct) {
        buffered();
        bytes = std::min(bytes, used); // no padding in plain writes
        continue;
      }
      require(n > 0, "cannot write ", path, ": ", std::strerror(errno));
      done += size_t(n);
    }
    used = 0;
  }

  void buffered() {
    if (!direct)
      return;
    direct = false;
    int flags = ::fcntl(fd, F_GETFL);
    require(flags >= 0 && ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) == 0,
            "cannot clear O_DIRECT on ", path, ": ", std::strerror(errno));
  }

  int fd;
  const std::string &path;
  AlignedBuffer staging;
  bool direct = false;
  size_t used = 0;
  uint64_t total = 0;
};

/// The header: tensors ordered by element size (largest first) then name,
/// as the safetensors package does, padded with spaces to 8 bytes.
std::string buildHeader(cleave_tensor_writer &w) {
  std::stable_sort(w.items.begin(), w.items.end(), [](auto &a, auto &b) {
    int64_t sa = dtypeSize(a.dtype), sb = dtypeSize(b.dtype);
    return sa != sb ? sa > sb : a.name < b.name;
  });
  json doc = json::object();
  json meta = json::object();
  for (const auto &[k, v] : w.metadata)
    meta[k] = v;
  meta["format"] = "cleave";
  uint64_t offset = 0;
  for (const auto &item : w.items) {
    if (item.hasCrc32c)
      meta["crc32c:" + item.name] = crcText(item.crc32c);
    else
      meta["crc32:" + item.name] = crcText(crcOf(item.data, item.bytes));
    doc[item.name] = {{"dtype", safetensorsName(item.dtype)},
                      {"shape", item.shape},
                      {"data_offsets", {offset, offset + item.bytes}}};
    offset += item.bytes;
  }
  doc["__metadata__"] = meta;
  std::string header = doc.dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  return header;
}

std::string hostName() {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0)
    return "localhost";
  return name;
}

/// The temporaries of writers of `path` on this host whose process is gone.
int removeStaleTemporaries(const std::string &path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  std::string prefix =
      (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  DIR *d = ::opendir(dir.empty() ? "/" : dir.c_str());
  if (!d)
    return 0; // no folder yet: nothing stale
  std::string host = hostName();
  int removed = 0;
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0)
      continue;
    // <host>.<pid>.<n>, or <pid>.<n> from before the host was named; the
    // host may contain dots, so read from the right.
    std::string rest = name.substr(prefix.size());
    size_t last = rest.rfind('.');
    if (last == std::string::npos)
      continue;
    size_t second = rest.rfind('.', last - 1);
    std::string pidText = second == std::string::npos
                              ? rest.substr(0, last)
                              : rest.substr(second + 1, last - second - 1);
    std::string owner =
        second == std::string::npos ? host : rest.substr(0, second);
    char *end = nullptr;
    long pid = std::strtol(pidText.c_str(), &end, 10);
    if (pidText.empty() || *end || pid <= 0 || owner != host ||
        pid == ::getpid())
      continue;
    if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH)
      continue; // alive (or not ours to know)
    removed += ::unlink((dir + "/" + name).c_str()) == 0;
  }
  ::closedir(d);
  return removed;
}

/// The test hook CLEAVE_FAULT_STALL_WRITE: whether the writer of `path`
/// stalls mid-write.
bool stallsWriting(const std::string &path) {
  const char *suffix = std::getenv("CLEAVE_FAULT_STALL_WRITE");
  size_t n = suffix ? std::strlen(suffix) : 0;
  return n > 0 && path.size() >= n &&
         path.compare(path.size() - n, n, suffix) == 0;
}

/// Writes the file; returns the CRC32C of all of it if `wantCrc` (else 0).
uint32_t finishWriter(cleave_tensor_writer &w, bool wantCrc) {
  std::string header = buildHeader(w);
  removeStaleTemporaries(w.path);
  static std::atomic<int> counter{0};
  static const std::string host = hostName();
  std::string tmp =
      concat(w.path, ".tmp.", host, ".", ::getpid(), ".", counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  require(fd >= 0, "cannot create ", tmp, ": ", std::strerror(errno));
  uint32_t fileCrc = 0;
  try {
    unsigned char length[8];
    for (int i = 0; i < 8; ++i)
      length[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
    uint64_t size = 8 + header.size();
    for (const auto &item : w.items)
      size += item.bytes;
    FileOut out(fd, tmp, size);
    out.append(length, 8);
    out.append(header.data(), header.size());
    fileCrc = cleave_rt_crc32c(cleave_rt_crc32c(0, length, 8), header.data(),
                               int64_t(header.size()));
    bool stall = stallsWriting(w.path);
    for (size_t i = 0; i < w.items.size(); ++i) {
      const auto &item = w.items[i];
      if (stall && i == w.items.size() / 2) {
        out.drain();
        std::fprintf(stderr, "CLEAVE_FAULT_STALL_WRITE: stalled writing %s\n",
                     tmp.c_str());
        std::fflush(stderr);
        for (;;)
          ::pause();
      }
      out.append(item.data, item.bytes);
      if (!wantCrc)
        continue;
      uint32_t crc = item.hasCrc32c
                         ? item.crc32c
                         : cleave_rt_crc32c(0, item.data, int64_t(item.bytes));
      fileCrc = cleave_rt_crc32c_combine(fileCrc, crc, int64_t(item.bytes));
    }
    out.finish();
    // The call first: the message's strerror(errno) must see its errno.
    int synced = ::fsync(fd);
    require(synced == 0, "fsync ", tmp, ": ", std::strerror(errno));
    int closed = ::close(fd);
    require(closed == 0, "close ", tmp, ": ", std::strerror(errno));
    fd = -1;
    int renamed = ::rename(tmp.c_str(), w.path.c_str());
    require(renamed == 0, "cannot rename ", tmp, " to ", w.path, ": ",
            std::strerror(errno));
  } catch (...) {
    if (fd >= 0)
      ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  size_t slash = w.path.rfind('/');
  std::string dir =
      slash == std::string::npos ? "." : w.path.substr(0, slash + 1);
  int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd >= 0) {
    ::fsync(dirFd); // Makes the rename durable.
    ::close(dirFd);
  }
  return fileCrc;
}

} // namespace

extern "C" {

cleave_tensor_file *cleave_tensor_file_open(const char *path) {
  return guard("tensor_file_open", static_cast<cleave_tensor_file *>(nullptr),
               [&] { return openTensorFile(path); });
}

void cleave_tensor_file_close(cleave_tensor_file *file) { delete file; }

int64_t cleave_tensor_file_count(const cleave_tensor_file *file) {
  return file ? int64_t(file->entries.size()) : -1;
}

const char *cleave_tensor_file_name(const cleave_tensor_file *file,
                                    int64_t index) {
  if (!file || index < 0 || index >= int64_t(file->entries.size()))
    return nullptr;
  return file->entries[size_t(index)].name.c_str();
}

int cleave_tensor_file_info(const cleave_tensor_file *file, const char *name,
                            int32_t *dtype, int64_t *rank, int64_t shape[8]) {
  if (!file || !name || !file->index.count(name))
    return 1;
  const auto &e = file->entries[file->index.at(name)];
  if (e.shape.size() > 8)
    return 1;
  if (dtype)
    *dtype = e.dtype;
  if (rank)
    *rank = int64_t(e.shape.size());
  if (shape)
    std::copy(e.shape.begin(), e.shape.end(), shape);
  return 0;
}

int cleave_tensor_file_read(cleave_tensor_file *file, const char *name,
                            void *dst, int64_t bytes) {
  return guard("tensor_file_read", 1, [&] {
    readTensor(file, name, dst, bytes);
    return 0;
  });
}

int cleave_tensor_file_read_pieces(cleave_tensor_file *file, const char *name,
                                   cleave_tensor_piece_fn fn, void *context) {
  return guard("tensor_file_read_pieces", 1, [&] {
    readPieces(file, name, fn, context);
    return 0;
  });
}

const char *cleave_tensor_file_metadata(const cleave_tensor_file *file,
                                        const char *key) {
  if (!file || !key)
    return nullptr;
  auto it = file->metadata.find(key);
  return it == file->metadata.end() ? nullptr : it->second.c_str();
}

cleave_tensor_writer *cleave_tensor_writer_create(const char *path) {
  return guard("tensor_writer_create",
               static_cast<cleave_tensor_writer *>(nullptr), [&] {
                 require(path && *path, "the path is NULL or empty");
                 auto *w = new cleave_tensor_writer;
                 w->path = path;
                 return w;
               });
}

int cleave_tensor_writer_add(cleave_tensor_writer *writer, const char *name,
                             int32_t dtype, int64_t rank, const int64_t *shape,
                             const void *data) {
  return guard("tensor_writer_add", 1, [&] {
    addTensor(writer, name, dtype, rank, shape, data);
    return 0;
  });
}

int cleave_tensor_writer_set_metadata(cleave_tensor_writer *writer,
                                      const char *key, const char *value) {
  return guard("tensor_writer_set_metadata", 1, [&] {
    require(writer && key && *key && value, "NULL writer, key or value");
    std::string k = key;
    require(k != "format" && k.rfind("crc32:", 0) != 0 &&
                k.rfind("crc32c:", 0) != 0,
            writer->path, ": metadata key '", k,
            "' is reserved for the runtime");
    writer->metadata[k] = value;
    return 0;
  });
}

int cleave_tensor_writer_add_crc32c(cleave_tensor_writer *writer,
                                    const char *name, int32_t dtype,
                                    int64_t rank, const int64_t *shape,
                                    const void *data, uint32_t crc32c) {
  return guard("tensor_writer_add_crc32c", 1, [&] {
    addTensor(writer, name, dtype, rank, shape, data);
    writer->items.back().hasCrc32c = true;
    writer->items.back().crc32c = crc32c;
    return 0;
  });
}

int cleave_tensor_writer_finish(cleave_tensor_writer *writer) {
  return cleave_tensor_writer_finish_crc32c(writer, nullptr);
}

int cleave_tensor_writer_finish_crc32c(cleave_tensor_writer *writer,
                                       uint32_t *file_crc32c) {
  int rc = guard("tensor_writer_finish", 1, [&] {
    require(writer, "the writer is NULL");
    uint32_t crc = finishWriter(*writer, file_crc32c != nullptr);
    if (file_crc32c)
      *file_crc32c = crc;
    return 0;
  });
  delete writer;
  return rc;
}

void cleave_tensor_writer_abort(cleave_tensor_writer *writer) { delete writer; }

int cleave_tensor_file_remove_stale(const char *path) {
  return guard("tensor_file_remove_stale", -1, [&] {
    require(path && *path, "the path is empty");
    return removeStaleTemporaries(path);
  });
}

} // extern "C"
