#include "src/train/prefix_store.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <unistd.h>

namespace fg::train {

namespace {

// pwrite / pread of the whole range, through short transfers and EINTR.
bool WriteAll(int fd, const void* data, size_t n, uint64_t offset) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n, uint64_t offset) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

}  // namespace

StatusOr<std::unique_ptr<PrefixStore>> PrefixStore::Create(uint64_t max_bytes, const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path base =
      dir.empty() ? std::filesystem::temp_directory_path(ec) : std::filesystem::path(dir);
  if (ec) return InternalError("tune: no temporary folder for the prefix store: " + ec.message());
  std::string tmpl = (base / "fgemma-tune-prefixes-XXXXXX").string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) {
    return InternalError("tune: cannot create the prefix store in '" + base.string() +
                         "': " + std::strerror(errno));
  }
  ::unlink(tmpl.c_str());  // the open descriptor keeps it; nothing outlives the process
  return std::unique_ptr<PrefixStore>(new PrefixStore(fd, max_bytes));
}

PrefixStore::~PrefixStore() {
  if (fd_ >= 0) ::close(fd_);
}

bool PrefixStore::Put(const std::string& key, int64_t rows, int64_t row_floats,
                      const std::vector<std::vector<float>>& k,
                      const std::vector<std::vector<float>>& v) {
  if (full_ || rows <= 0 || k.size() != v.size()) return false;
  if (index_.count({key, rows}) != 0) return true;
  const size_t part = static_cast<size_t>(rows * row_floats) * sizeof(float);
  const uint64_t need = 2 * part * k.size();
  if (end_ + need > max_bytes_) {
    full_ = true;
    return false;
  }
  uint64_t off = end_;
  for (size_t l = 0; l < k.size(); ++l) {
    if (k[l].size() * sizeof(float) < part || v[l].size() * sizeof(float) < part ||
        !WriteAll(fd_, k[l].data(), part, off) || !WriteAll(fd_, v[l].data(), part, off + part)) {
      full_ = true;  // a full disk: keep what is stored, take nothing more
      return false;
    }
    off += 2 * part;
  }
  index_.emplace(std::make_pair(key, rows), Entry{end_, k.size()});
  end_ += need;
  return true;
}

StatusOr<bool> PrefixStore::Get(const std::string& key, int64_t rows, int64_t row_floats,
                                std::vector<std::vector<float>>& k,
                                std::vector<std::vector<float>>& v) const {
  auto it = index_.find({key, rows});
  if (it == index_.end()) return false;
  const size_t part = static_cast<size_t>(rows * row_floats) * sizeof(float);
  uint64_t off = it->second.offset;
  if (k.size() != it->second.layers || v.size() != it->second.layers) {
    return InternalError("tune: prefix store: another number of layers than stored");
  }
  for (size_t l = 0; l < k.size(); ++l) {
    if (k[l].size() * sizeof(float) < part || v[l].size() * sizeof(float) < part) {
      return InternalError("tune: prefix store: caches smaller than a stored prefix");
    }
    if (!ReadAll(fd_, k[l].data(), part, off) || !ReadAll(fd_, v[l].data(), part, off + part)) {
      return InternalError(std::string("tune: prefix store: read failed: ") + std::strerror(errno));
    }
    off += 2 * part;
  }
  return true;
}

}  // namespace fg::train
