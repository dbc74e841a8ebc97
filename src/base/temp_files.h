// Temporary files and folders that must not outlive a failed or interrupted run.
//
// A TempPath registers a path while fgemma writes it (before the final rename): it is removed
// when the TempPath is destroyed without Keep() (an error return, an exception), and, once
// InstallTempCleanupHandlers() has run (the CLI does at start), when the process gets SIGINT,
// SIGTERM or SIGHUP: the handler removes every registered path (a folder with the files in it,
// one level: what fgemma writes into its temporary folders) and re-raises the signal.
#ifndef FGEMMA_BASE_TEMP_FILES_H_
#define FGEMMA_BASE_TEMP_FILES_H_

#include <string>

namespace fg {

class TempPath {
 public:
  enum class Kind { kFile, kFolder };

  TempPath() = default;
  // Registers `path` (which the caller is about to create, or has just created).
  explicit TempPath(std::string path, Kind kind = Kind::kFile);
  ~TempPath();  // removes the path unless kept
  TempPath(TempPath&& o) noexcept;
  TempPath& operator=(TempPath&& o) noexcept;
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;

  const std::string& path() const { return path_; }
  // The path was renamed into place (or is otherwise no longer temporary): forget it.
  void Keep();
  // Removes the path now (a folder with its files) and forgets it.
  void Remove();

 private:
  std::string path_;
  Kind kind_ = Kind::kFile;
  int slot_ = -1;  // in the signal handler's table; -1 when it did not fit (or is empty)
};

// Installs the SIGINT/SIGTERM/SIGHUP handler that removes registered paths, then re-raises.
// Idempotent. Signals whose disposition is SIG_IGN (a background job's SIGINT) stay ignored.
void InstallTempCleanupHandlers();

}  // namespace fg

#endif  // FGEMMA_BASE_TEMP_FILES_H_
