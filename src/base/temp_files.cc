#include "src/base/temp_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

namespace fg {

namespace {

// The table the signal handler reads: fixed storage, no allocation. A slot is kFree, kBusy
// (being filled or emptied: the handler skips it) or kActive.
constexpr int kSlots = 32;
constexpr size_t kMaxPath = 4096;
enum SlotState : int { kFree = 0, kBusy = 1, kActive = 2 };
struct Slot {
  std::atomic<int> state{kFree};
  bool folder = false;
  char path[kMaxPath] = {};
};
Slot g_slots[kSlots];

int Register(const std::string& path, bool folder) {
  if (path.empty() || path.size() >= kMaxPath) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kBusy)) continue;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].folder = folder;
    g_slots[i].state.store(kActive);
    return i;
  }
  return -1;  // table full: the path is still removed on failure, just not on a signal
}

void Unregister(int slot) {
  if (slot >= 0) g_slots[slot].state.store(kFree);
}

// Async-signal-safe removal of a folder's entries (one level) and the folder: raw getdents64,
// unlinkat and rmdir only.
struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];
};

void RemoveFolderFromHandler(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    alignas(8) char buf[4096];
    for (;;) {
      const long n = ::syscall(SYS_getdents64, fd, buf, sizeof(buf));
      if (n <= 0) break;
      for (long at = 0; at < n;) {
        const auto* d = reinterpret_cast<const LinuxDirent64*>(buf + at);
        const char* name = d->d_name;
        if (!(name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')))) {
          ::unlinkat(fd, name, 0);
        }
        at += d->d_reclen;
      }
    }
    ::close(fd);
  }
  ::rmdir(path);
}

void OnSignal(int sig) {
  const int saved = errno;
  for (Slot& s : g_slots) {
    if (s.state.load() != kActive) continue;
    if (s.folder) {
      RemoveFolderFromHandler(s.path);
    } else {
      ::unlink(s.path);
    }
  }
  errno = saved;
  // Die of the signal as if there were no handler (the shell sees the usual status).
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void RemovePath(const std::string& path, TempPath::Kind kind) {
  std::error_code ec;
  if (kind == TempPath::Kind::kFolder) {
    std::filesystem::remove_all(path, ec);
  } else {
    std::filesystem::remove(path, ec);
  }
}

}  // namespace

TempPath::TempPath(std::string path, Kind kind)
    : path_(std::move(path)), kind_(kind), slot_(Register(path_, kind == Kind::kFolder)) {}

TempPath::~TempPath() { Remove(); }

TempPath::TempPath(TempPath&& o) noexcept
    : path_(std::exchange(o.path_, std::string())), kind_(o.kind_), slot_(std::exchange(o.slot_, -1)) {}

TempPath& TempPath::operator=(TempPath&& o) noexcept {
  if (this != &o) {
    Remove();
    path_ = std::exchange(o.path_, std::string());
    kind_ = o.kind_;
    slot_ = std::exchange(o.slot_, -1);
  }
  return *this;
}

void TempPath::Keep() {
  Unregister(slot_);
  slot_ = -1;
  path_.clear();
}

void TempPath::Remove() {
  if (path_.empty()) return;
  RemovePath(path_, kind_);
  Keep();
}

void InstallTempCleanupHandlers() {
  static const bool installed = [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
      struct sigaction sa {};
      sa.sa_handler = OnSignal;
      sigemptyset(&sa.sa_mask);
      // Block the other cleanup signals while one runs: the table is walked once.
      sigaddset(&sa.sa_mask, SIGINT);
      sigaddset(&sa.sa_mask, SIGTERM);
      sigaddset(&sa.sa_mask, SIGHUP);
      sa.sa_flags = SA_RESTART;
      ::sigaction(sig, &sa, nullptr);
    }
    return true;
  }();
  (void)installed;
}

}  // namespace fg
