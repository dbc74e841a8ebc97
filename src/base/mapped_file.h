// Read-only memory map of a whole file (the GGUF weights are used in place from here).
#ifndef FGEMMA_BASE_MAPPED_FILE_H_
#define FGEMMA_BASE_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "fgemma/status.h"
#include "src/base/file_io.h"  // ReadFileToString and the other whole-file reads

namespace fg {

class MappedFile {
 public:
  // Maps `path` read-only (a regular file only: OpenRegularFile). An empty file maps to an
  // empty span.
  static StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Lets the kernel drop the resident pages wholly inside `range` (a part of bytes()); the bytes
  // stay readable and unchanged (the mapping is read-only and private, never written: a later
  // read pages them in again from the file). For data read once and kept in another form (an
  // adapter's B, transposed to f32). Ranges outside the mapping, and a failed madvise, do
  // nothing: it saves memory, it never changes a result.
  void Release(std::span<const uint8_t> range) const;

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace fg

#endif  // FGEMMA_BASE_MAPPED_FILE_H_
