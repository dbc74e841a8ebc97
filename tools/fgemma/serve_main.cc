// fgemma-serve: `fgemma serve` as its own executable (cmd_serve.cc), so that the HTTP library
// and what it links (TLS, zlib, brotli) are loaded by the server only. `fgemma serve ARGS` runs
// `fgemma-serve ARGS` from the same directory; running it directly is the same.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tools/fgemma/commands.h"

int main(int argc, char** argv) {
  static const fg::cli::Command kServe = {
      "serve", "Serve function calling over HTTP (OpenAI's chat API, many clients)",
      fg::cli::CmdServeMain};
  char name[] = "serve";
  argv[0] = name;  // the subcommand's argv[0], as `fgemma serve` passes it
  int rc = fg::cli::RunSubcommand(kServe, argc, argv);
  if (std::fclose(stdout) != 0 && errno != EBADF && rc == 0) {
    std::fprintf(stderr, "fgemma serve: cannot write to stdout: %s\n", std::strerror(errno));
    rc = 1;
  }
  return rc;
}
