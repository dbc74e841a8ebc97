#include "src/base/mapped_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace fg {

StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  FG_ASSIGN_OR_RETURN(OpenedFile f, OpenRegularFile(path));
  if (f.size > SIZE_MAX) return ResourceExhaustedError("'" + path + "' is too large to map in this process");
  const size_t size = static_cast<size_t>(f.size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, f.fd.get(), 0);
    if (p == MAP_FAILED) return IoError("cannot mmap '" + path + "': " + std::strerror(errno));
    data = static_cast<const uint8_t*>(p);
  }
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

void MappedFile::Release(std::span<const uint8_t> range) const {
  if (data_ == nullptr || range.empty() || range.data() < data_ ||
      range.data() + range.size() > data_ + size_) {
    return;
  }
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(range.data());
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + range.size()) / page * page;
  if (last <= first) return;
  ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace fg
