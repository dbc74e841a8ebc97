#include "src/call/prefix_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "src/base/check.h"
#include "src/base/file_io.h"
#include "src/base/temp_files.h"

namespace fg::call {

namespace {

constexpr char kMagic[8] = {'F', 'G', 'P', 'R', 'E', 'F', 'I', 'X'};
constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

// Appends little-endian-as-host values to a byte buffer.
class Out {
 public:
  template <typename T>
  void Put(const T& v) {
    PutArray(&v, 1);
  }
  template <typename T>
  void PutArray(const T* p, size_t n) {
    if (n == 0) return;
    const size_t at = buf_.size();
    buf_.resize(at + n * sizeof(T));
    std::memcpy(buf_.data() + at, p, n * sizeof(T));
  }
  std::vector<uint8_t>& bytes() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

// Bounds-checked reader over the file's bytes.
class In {
 public:
  explicit In(std::span<const uint8_t> b) : b_(b) {}
  template <typename T>
  bool Get(T* v) {
    if (b_.size() - at_ < sizeof(T)) return false;
    std::memcpy(v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  template <typename T>
  bool GetArray(T* p, size_t n) {
    if (n > (b_.size() - at_) / sizeof(T)) return false;
    std::memcpy(p, b_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return true;
  }
  bool Skip(size_t n) {
    if (n > b_.size() - at_) return false;
    at_ += n;
    return true;
  }
  size_t left() const { return b_.size() - at_; }

 private:
  std::span<const uint8_t> b_;
  size_t at_ = 0;
};

std::string Errno() { return std::strerror(errno); }

// Whether every value is finite (by the exponent bits: vectorizes, unlike std::isfinite).
bool AllFinite(std::span<const float> values) {
  uint32_t bad = 0;
  for (const float f : values) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

// Hash64 over bytes that arrive in pieces: the same result as Hash64 over their concatenation.
class Hasher {
 public:
  explicit Hasher(uint64_t seed = 0) : h_(kFnvOffset ^ (seed * 0x9e3779b97f4a7c15ull)) {}
  void Update(const void* data, size_t n) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    size_ += n;
    if (carry_n_ > 0) {  // finish the word a previous piece started
      const size_t take = std::min(n, 8 - carry_n_);
      std::memcpy(carry_ + carry_n_, p, take);
      carry_n_ += take;
      p += take;
      n -= take;
      if (carry_n_ < 8) return;
      Word(carry_);
      carry_n_ = 0;
    }
    for (; n >= 8; p += 8, n -= 8) Word(p);
    std::memcpy(carry_, p, n);
    carry_n_ = n;
  }
  uint64_t Finish() const {
    uint64_t h = h_;
    for (size_t i = 0; i < carry_n_; ++i) h = (h ^ carry_[i]) * kFnvPrime;
    h ^= static_cast<uint64_t>(size_);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
  }

 private:
  void Word(const uint8_t* p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h_ = (h_ ^ w) * kFnvPrime;
    h_ ^= h_ >> 29;
  }
  uint64_t h_;
  uint64_t size_ = 0;
  uint8_t carry_[8] = {};
  size_t carry_n_ = 0;
};

// Writes the file through one descriptor, hashing every byte written.
class FileOut {
 public:
  explicit FileOut(int fd) : fd_(fd) {}
  template <typename T>
  bool Put(const T& v) {
    return Write(&v, sizeof(T));
  }
  bool Write(const void* data, size_t n) {
    hash_.Update(data, n);
    const uint8_t* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  uint64_t hash() const { return hash_.Finish(); }

 private:
  int fd_;
  Hasher hash_;
};

}  // namespace

uint64_t Hash64(std::span<const uint8_t> bytes, uint64_t seed) {
  Hasher h(seed);
  h.Update(bytes.data(), bytes.size());
  return h.Finish();
}

uint64_t ModelIdentity(const gguf::File& file) {
  const std::span<const uint8_t> b = file.bytes();
  const size_t head = std::min<size_t>(std::min<uint64_t>(file.data_offset(), b.size()), 16u << 20);
  const size_t data = b.size() - std::min<size_t>(file.data_offset(), b.size());
  const size_t edge = std::min<size_t>(data, 64u << 10);
  uint64_t h = Hash64(b.subspan(0, head), b.size());
  h = Hash64(b.subspan(b.size() - data, edge), h);
  h = Hash64(b.subspan(b.size() - edge, edge), h);
  return h;
}

uint64_t PrefixCacheKey(uint64_t model_id, const PrefixGeometry& g, const std::string& kernels,
                        std::span<const int32_t> tokens) {
  Out o;
  o.Put(kPrefixCacheVersion);
  o.Put(model_id);
  o.Put(g.layers);
  o.Put(g.kv_dim);
  o.Put(g.local_rows);
  o.PutArray(kernels.data(), kernels.size());
  o.Put(static_cast<uint64_t>(tokens.size()));
  o.PutArray(tokens.data(), tokens.size());
  return Hash64(o.bytes());
}

std::string PrefixCachePath(const std::string& dir, uint64_t key) {
  char name[64];
  std::snprintf(name, sizeof(name), "prefix-%016llx.fgkv", static_cast<unsigned long long>(key));
  return dir + "/" + name;
}

Status SavePrefix(const std::string& path, uint64_t key, const PrefixGeometry& g,
                  std::span<const int32_t> tokens, const runtime::Session& session) {
  if (session.model().config().n_layers != g.layers ||
      session.position() != static_cast<int64_t>(tokens.size())) {
    return InternalError("prefix cache: session does not match its prefix");
  }
  // Atomic replace: a unique temporary name in the same folder, then rename. The caches are
  // written layer by layer straight from the session, hashing as they go (no copy of the file).
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  // Removed on any failure, an exception or SIGINT/SIGTERM (src/base/temp_files.h).
  TempPath tmp_path(tmp);
  ScopedFd owned(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (owned.get() < 0) return IoError("prefix cache: cannot create '" + tmp + "': " + Errno());
  FileOut o(owned.get());
  bool ok = o.Write(kMagic, 8) && o.Put(kPrefixCacheVersion) && o.Put(uint32_t{0}) &&
            o.Put(key) && o.Put(g.layers) && o.Put(g.kv_dim) && o.Put(g.local_rows) &&
            o.Put(static_cast<int64_t>(tokens.size())) &&
            o.Write(tokens.data(), tokens.size_bytes());
  for (int64_t l = 0; ok && l < g.layers; ++l) {
    const std::span<const float> k = session.cached_k(l);
    const std::span<const float> v = session.cached_v(l);
    const uint64_t rows = k.size() / std::max<int64_t>(1, g.kv_dim);
    ok = o.Put(rows) && o.Write(k.data(), k.size_bytes()) && o.Write(v.data(), v.size_bytes());
  }
  if (ok) {
    const uint64_t sum = o.hash();
    ok = o.Put(sum);
  }
  if (!ok) return IoError("prefix cache: cannot write '" + tmp + "': " + Errno());
  if (::close(owned.Release()) != 0) {
    return IoError("prefix cache: cannot write '" + tmp + "': " + Errno());
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return IoError("prefix cache: cannot rename to '" + path + "': " + Errno());
  }
  tmp_path.Keep();
  return OkStatus();
}

Status LoadPrefix(const std::string& path, uint64_t key, const PrefixGeometry& g,
                  std::span<const int32_t> tokens, runtime::Session* session) {
  auto corrupt = [&](const std::string& what) {
    return DataLossError("prefix cache '" + path + "' is corrupt: " + what);
  };
  auto stale = [&](const std::string& what) {
    return FailedPreconditionError("prefix cache '" + path + "' is stale: " + what);
  };
  // Read into memory, not mapped: another process truncating the file while it is mapped
  // would raise SIGBUS. The largest file this prefix can have bounds the read.
  const uint64_t header = 8 + 4 + 4 + 8 + 4 * 8;
  const uint64_t max_rows = tokens.size();
  const uint64_t max_bytes = header + 4 * max_rows +
                             static_cast<uint64_t>(std::max<int64_t>(g.layers, 0)) *
                                 (8 + max_rows * static_cast<uint64_t>(std::max<int64_t>(g.kv_dim, 0)) * 8) +
                             8;
  auto read = ReadFileToString(path, max_bytes);
  if (!read.ok()) {
    if (read.status().code() == StatusCode::kResourceExhausted) return corrupt("too large");
    return read.status().WithContext("prefix cache");
  }
  const std::string& data = *read;
  // The K/V floats are viewed in place below: every field before them is a multiple of 4 bytes
  // and the buffer is allocated with (at least) float alignment.
  FG_CHECK(reinterpret_cast<uintptr_t>(data.data()) % alignof(float) == 0);
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(data.data()), data.size());
  if (bytes.size() < 8 + 8 + 8) return corrupt("too short");
  char magic[8];
  std::memcpy(magic, bytes.data(), 8);
  if (std::memcmp(magic, kMagic, 8) != 0) return corrupt("bad magic");
  uint64_t stored_sum;
  std::memcpy(&stored_sum, bytes.data() + bytes.size() - 8, 8);
  if (Hash64(bytes.subspan(0, bytes.size() - 8)) != stored_sum) {
    return corrupt("checksum mismatch");
  }
  In in(bytes.subspan(8, bytes.size() - 16));
  uint32_t version = 0, reserved = 0;
  uint64_t file_key = 0;
  int64_t layers = 0, kv_dim = 0, local_rows = 0, n_tokens = 0;
  if (!in.Get(&version) || !in.Get(&reserved)) return corrupt("truncated header");
  if (version != kPrefixCacheVersion) {
    return stale("version " + std::to_string(version) + ", expected " +
                 std::to_string(kPrefixCacheVersion));
  }
  if (!in.Get(&file_key) || !in.Get(&layers) || !in.Get(&kv_dim) || !in.Get(&local_rows) ||
      !in.Get(&n_tokens)) {
    return corrupt("truncated header");
  }
  if (file_key != key) return stale("another model, kernel set or prefix");
  if (layers != g.layers || kv_dim != g.kv_dim || local_rows != g.local_rows) {
    return stale("another cache geometry");
  }
  if (n_tokens != static_cast<int64_t>(tokens.size())) return stale("another prefix length");
  std::vector<int32_t> file_tokens(tokens.size());
  if (!in.GetArray(file_tokens.data(), file_tokens.size())) return corrupt("truncated tokens");
  if (!std::equal(file_tokens.begin(), file_tokens.end(), tokens.begin())) {
    return stale("another prefix");
  }
  // The layers, viewed in place.
  std::vector<std::span<const float>> k(layers), v(layers);
  size_t at = bytes.size() - 8 - in.left();
  for (int64_t l = 0; l < layers; ++l) {
    uint64_t rows = 0;
    if (!in.Get(&rows)) return corrupt("truncated layer " + std::to_string(l));
    at += 8;
    if (rows > static_cast<uint64_t>(n_tokens) ||
        rows * static_cast<uint64_t>(kv_dim) * 8 > in.left()) {
      return corrupt("layer " + std::to_string(l) + " has an impossible size");
    }
    const size_t n = rows * kv_dim;
    k[l] = {reinterpret_cast<const float*>(bytes.data() + at), n};
    v[l] = {reinterpret_cast<const float*>(bytes.data() + at + n * 4), n};
    // A model never writes NaN or infinity into its caches; such a file was tampered with
    // (its checksum recomputed) or damaged in a way the checksum missed.
    if (!AllFinite(k[l]) || !AllFinite(v[l])) {
      return corrupt("layer " + std::to_string(l) + " holds non-finite K/V values");
    }
    if (!in.Skip(n * 8)) return corrupt("truncated layer " + std::to_string(l));
    at += n * 8;
  }
  if (in.left() != 0) return corrupt("trailing bytes");
  return session->Restore(n_tokens, k, v);
}

Status PrepareCacheDir(const std::string& dir) {
  if (dir.empty()) return InvalidArgumentError("cache dir: empty path");
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return IoError("cache dir '" + dir + "': " + Errno());
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return IoError("cache dir '" + dir + "': cannot create it: " + Errno());
    }
    if (::stat(dir.c_str(), &st) != 0) return IoError("cache dir '" + dir + "': " + Errno());
  }
  if (!S_ISDIR(st.st_mode)) return IoError("cache dir '" + dir + "' is not a directory");
  if (::access(dir.c_str(), R_OK | W_OK | X_OK) != 0) {
    return IoError("cache dir '" + dir + "' is not readable and writable: " + Errno());
  }
  return OkStatus();
}

}  // namespace fg::call
