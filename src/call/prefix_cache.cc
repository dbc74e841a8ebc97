#include "src/call/prefix_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "src/base/mapped_file.h"

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
  size_t left() const { return b_.size() - at_; }

 private:
  std::span<const uint8_t> b_;
  size_t at_ = 0;
};

std::string Errno() { return std::strerror(errno); }

}  // namespace

uint64_t Hash64(std::span<const uint8_t> bytes, uint64_t seed) {
  uint64_t h = kFnvOffset ^ (seed * 0x9e3779b97f4a7c15ull);
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = (h ^ w) * kFnvPrime;
    h ^= h >> 29;
  }
  for (; i < bytes.size(); ++i) h = (h ^ bytes[i]) * kFnvPrime;
  h ^= static_cast<uint64_t>(bytes.size());
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
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
                  std::span<const int32_t> tokens, const runtime::Session::Snapshot& snap) {
  if (static_cast<int64_t>(snap.k.size()) != g.layers || snap.v.size() != snap.k.size() ||
      snap.position != static_cast<int64_t>(tokens.size())) {
    return InternalError("prefix cache: snapshot does not match its prefix");
  }
  Out o;
  o.PutArray(kMagic, 8);
  o.Put(kPrefixCacheVersion);
  o.Put(uint32_t{0});
  o.Put(key);
  o.Put(g.layers);
  o.Put(g.kv_dim);
  o.Put(g.local_rows);
  o.Put(static_cast<int64_t>(tokens.size()));
  o.PutArray(tokens.data(), tokens.size());
  for (int64_t l = 0; l < g.layers; ++l) {
    const uint64_t rows = snap.k[l].size() / std::max<int64_t>(1, g.kv_dim);
    o.Put(rows);
    o.PutArray(snap.k[l].data(), snap.k[l].size());
    o.PutArray(snap.v[l].data(), snap.v[l].size());
  }
  o.Put(Hash64(o.bytes()));

  // Atomic replace: a unique temporary name in the same folder, then rename.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("prefix cache: cannot create '" + tmp + "': " + Errno());
  const std::vector<uint8_t>& b = o.bytes();
  size_t done = 0;
  while (done < b.size()) {
    const ssize_t n = ::write(fd, b.data() + done, b.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string err = Errno();
      ::close(fd);
      ::unlink(tmp.c_str());
      return IoError("prefix cache: cannot write '" + tmp + "': " + err);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return IoError("prefix cache: cannot write '" + tmp + "': " + Errno());
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = Errno();
    ::unlink(tmp.c_str());
    return IoError("prefix cache: cannot rename to '" + path + "': " + err);
  }
  return OkStatus();
}

StatusOr<runtime::Session::Snapshot> LoadPrefix(const std::string& path, uint64_t key,
                                                const PrefixGeometry& g,
                                                std::span<const int32_t> tokens) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return NotFoundError("prefix cache: no file '" + path + "'");
    return IoError("prefix cache: '" + path + "': " + Errno());
  }
  FG_ASSIGN_OR_RETURN(std::string data, ReadFileToString(path));
  auto corrupt = [&](const std::string& what) {
    return DataLossError("prefix cache '" + path + "' is corrupt: " + what);
  };
  auto stale = [&](const std::string& what) {
    return FailedPreconditionError("prefix cache '" + path + "' is stale: " + what);
  };
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(data.data()), data.size());
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
  runtime::Session::Snapshot s;
  s.position = n_tokens;
  s.k.resize(layers);
  s.v.resize(layers);
  for (int64_t l = 0; l < layers; ++l) {
    uint64_t rows = 0;
    if (!in.Get(&rows)) return corrupt("truncated layer " + std::to_string(l));
    if (rows > static_cast<uint64_t>(n_tokens) ||
        rows * static_cast<uint64_t>(kv_dim) * 8 > in.left()) {
      return corrupt("layer " + std::to_string(l) + " has an impossible size");
    }
    s.k[l].resize(rows * kv_dim);
    s.v[l].resize(rows * kv_dim);
    if (!in.GetArray(s.k[l].data(), s.k[l].size()) || !in.GetArray(s.v[l].data(), s.v[l].size())) {
      return corrupt("truncated layer " + std::to_string(l));
    }
  }
  if (in.left() != 0) return corrupt("trailing bytes");
  return s;
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
