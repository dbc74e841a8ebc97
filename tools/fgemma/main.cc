#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tools/fgemma/commands.h"

int main(int argc, char** argv) {
  int rc = fg::cli::Main(argc, argv);
  // Closing stdout reports what a flush may not (a file system that fails on close). EBADF:
  // stdout was closed by the caller and nothing was written (a write would have failed above).
  if (std::fclose(stdout) != 0 && errno != EBADF && rc == 0) {
    std::fprintf(stderr, "fgemma: cannot write to stdout: %s\n", std::strerror(errno));
    rc = 1;
  }
  return rc;
}
