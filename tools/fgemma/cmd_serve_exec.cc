// `fgemma serve`: runs fgemma-serve, the server's own executable, from the directory of this one
// (an install puts both in bin/). Only the server links the HTTP library and the TLS, zlib and
// brotli libraries under it: every other command starts without them (about 4.5 MiB of
// resident memory less for `fgemma call`).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "tools/fgemma/commands.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {

int CmdServe(int argc, char** argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    return ReportError("serve", InternalError("cannot find this executable (/proc/self/exe): " +
                                              ec.message()));
  }
  const std::string server = (self.parent_path() / "fgemma-serve").string();
  if (::access(server.c_str(), X_OK) != 0) {
    return ReportError(
        "serve", UnimplementedError(server + " is missing: this build has no server (it needs "
                                             "the HTTP library, Debian's libcpp-httplib-dev)"));
  }
  std::vector<char*> args;
  args.push_back(const_cast<char*>(server.c_str()));
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execv(server.c_str(), args.data());
  return ReportError("serve", InternalError("cannot run " + server + ": " + std::strerror(errno)));
}

}  // namespace fg::cli
