#include "src/base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "src/base/temp_files.h"

namespace fg {

namespace {

std::string ErrnoText(int e) { return std::strerror(e); }

std::string Mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// The folder holding `path` ("." for a bare name).
std::string ParentOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status WriteAll(int fd, std::string_view bytes, const std::string& name) {
  const char* p = bytes.data();
  size_t n = bytes.size();
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return IoError("cannot write '" + name + "': " + ErrnoText(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
  return OkStatus();
}

}  // namespace

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

ScopedFd& ScopedFd::operator=(ScopedFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.Release();
  }
  return *this;
}

StatusOr<OpenedFile> OpenRegularFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. It has no
  // effect on the regular files accepted below.
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) {
    const int e = errno;
    const std::string msg = "cannot open '" + path + "': " + ErrnoText(e);
    return e == ENOENT ? NotFoundError(msg) : IoError(msg);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return IoError("cannot stat '" + path + "': " + ErrnoText(errno));
  if (!S_ISREG(st.st_mode)) {
    const char* what = S_ISDIR(st.st_mode)    ? "a folder"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                    : "not a plain file";
    return InvalidArgumentError("'" + path + "' is not a regular file (" + what + ")");
  }
  OpenedFile f;
  f.fd = std::move(fd);
  f.size = static_cast<uint64_t>(st.st_size);
  return f;
}

StatusOr<std::string> ReadFileToString(const std::string& path, uint64_t max_bytes) {
  FG_ASSIGN_OR_RETURN(OpenedFile f, OpenRegularFile(path));
  if (f.size > max_bytes) {
    return ResourceExhaustedError("'" + path + "' is " + std::to_string(f.size) +
                                  " bytes, more than the limit of " +
                                  (max_bytes >= (1u << 20) ? Mib(max_bytes)
                                                           : std::to_string(max_bytes) + " bytes"));
  }
  if (f.size > SIZE_MAX / 2) return ResourceExhaustedError("'" + path + "' is too large");
  std::string out(static_cast<size_t>(f.size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t r = ::pread(f.fd.get(), out.data() + got, out.size() - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return IoError("cannot read '" + path + "': " + ErrnoText(errno));
    if (r == 0) return DataLossError("'" + path + "' shrank while it was read");
    got += static_cast<size_t>(r);
  }
  return out;
}

StatusOr<std::string> ReadFdToString(int fd, uint64_t max_bytes, const std::string& name) {
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return IoError("cannot read " + name + ": " + ErrnoText(errno));
    if (r == 0) return out;
    if (out.size() + static_cast<size_t>(r) > max_bytes) {
      return ResourceExhaustedError(name + " is longer than the limit of " + Mib(max_bytes));
    }
    out.append(buf, static_cast<size_t>(r));
  }
}

Status CheckWritableFile(const std::string& path) {
  if (path.empty()) return InvalidArgumentError("empty output path");
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      return InvalidArgumentError("'" + path + "' exists and is not a regular file");
    }
    if (::access(path.c_str(), W_OK) != 0) {
      return IoError("cannot write '" + path + "': " + ErrnoText(errno));
    }
  } else if (errno != ENOENT) {
    return IoError("cannot write '" + path + "': " + ErrnoText(errno));
  }
  // The file is replaced by a rename from a temporary name beside it: its folder must exist
  // and be writable either way.
  const std::string parent = ParentOf(path);
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return NotFoundError("cannot write '" + path + "': folder '" + parent + "' does not exist");
  }
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    return IoError("cannot write '" + path + "': folder '" + parent + "': " + ErrnoText(errno));
  }
  return OkStatus();
}

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  static std::atomic<uint64_t> counter{0};
  TempPath tmp(path + ".tmp." + std::to_string(::getpid()) + "." +
               std::to_string(counter.fetch_add(1)));
  ScopedFd fd(::open(tmp.path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) return IoError("cannot create '" + tmp.path() + "': " + ErrnoText(errno));
  FG_RETURN_IF_ERROR(WriteAll(fd.get(), bytes, path));
  if (::close(fd.Release()) != 0) return IoError("cannot write '" + path + "': " + ErrnoText(errno));
  if (::rename(tmp.path().c_str(), path.c_str()) != 0) {
    return IoError("cannot rename to '" + path + "': " + ErrnoText(errno));
  }
  tmp.Keep();
  return OkStatus();
}

}  // namespace fg
