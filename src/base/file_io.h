// Reading the files fgemma is given (models, catalogs, tool maps, cache files, tensors, text)
// and writing its outputs, safely against hostile or careless input:
// - every file is opened without blocking and must be a regular file, so a FIFO, a device
//   (/dev/zero) or a folder is a clear error instead of a hang or an endless read;
// - a whole-file read has a size limit, checked before reading (kMaxInputFileBytes by default);
// - outputs are checked before any is written, and written to a temporary name beside them that
//   is renamed into place (src/base/temp_files.h removes it on failure or on a signal).
#ifndef FGEMMA_BASE_FILE_IO_H_
#define FGEMMA_BASE_FILE_IO_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "fgemma/status.h"

namespace fg {

// The default limit of a whole-file read: catalogs, tool maps, requests, tokenize --file.
inline constexpr uint64_t kMaxInputFileBytes = uint64_t{16} << 20;

// An owned file descriptor (closed on destruction).
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd();
  ScopedFd(ScopedFd&& o) noexcept : fd_(o.Release()) {}
  ScopedFd& operator=(ScopedFd&& o) noexcept;
  int get() const { return fd_; }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

struct OpenedFile {
  ScopedFd fd;
  uint64_t size = 0;
};

// Opens `path` read-only (O_NONBLOCK, so opening a FIFO cannot hang) and requires a regular
// file. NotFound for a missing file, InvalidArgument for anything not a regular file ("is not
// a regular file": a folder, a FIFO, a device), Io for other refusals; each names the path.
StatusOr<OpenedFile> OpenRegularFile(const std::string& path);

// Reads all of a regular file. Larger than `max_bytes` (checked before reading) is
// ResourceExhausted; a file that shrinks while read is DataLoss.
StatusOr<std::string> ReadFileToString(const std::string& path,
                                       uint64_t max_bytes = kMaxInputFileBytes);

// Reads `fd` (a pipe, a terminal: stdin) to its end, at most `max_bytes`; more is
// ResourceExhausted naming `name`.
StatusOr<std::string> ReadFdToString(int fd, uint64_t max_bytes, const std::string& name);

// Whether `path` can be written as an output file: an existing regular file we may write, or a
// new name in an existing folder we may write. Checked for every output before any is written.
Status CheckWritableFile(const std::string& path);

// Writes `bytes` to `path` through a temporary file beside it (registered with
// temp_files.h, removed on failure) renamed into place: `path` is whole or untouched.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);

}  // namespace fg

#endif  // FGEMMA_BASE_FILE_IO_H_
