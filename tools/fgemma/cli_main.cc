#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "src/base/temp_files.h"

#include "tools/fgemma/commands.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {

namespace {

void PrintHelp(std::FILE* out) {
  std::fprintf(out,
               "Usage: fgemma <command> [options]\n\n"
               "fgemma: FunctionGemma / Gemma 3 on small CPUs: a request in, a validated function "
               "call out.\n\nCommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out,
               "\nRun 'fgemma <command> --help' (or 'fgemma help <command>') for the options of a "
               "command.\n"
               "Exit codes: 0 success, 1 runtime error, 2 usage error.\n");
}

// Runs one subcommand. No exception escapes (an uncaught one would abort with a core dump and
// skip the removal of temporary files): it is reported and exits 1.
int RunCommand(const Command& c, int argc, char** argv) {
  try {
    return c.run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "fgemma %s: out of memory\n", c.name);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fgemma %s: internal error: %s\n", c.name, e.what());
  } catch (...) {
    std::fprintf(stderr, "fgemma %s: internal error: unknown exception\n", c.name);
  }
  return kExitRuntime;
}

// The errno of the first failed FlushStdout (0: none), for FinishStdout's message.
int g_stdout_errno = 0;

}  // namespace

void FlushStdout() {
  errno = 0;
  if (std::fflush(stdout) != 0 && g_stdout_errno == 0) g_stdout_errno = errno != 0 ? errno : EIO;
}

int FinishStdout(const char* command, int rc) {
  // A write that failed earlier leaves the error flag; a buffered one fails now (a full disk,
  // a closed pipe). Either way the output is lost: say so and exit 1.
  FlushStdout();
  const int e = g_stdout_errno;
  g_stdout_errno = 0;
  if (e == 0 && !std::ferror(stdout)) return rc;
  std::clearerr(stdout);
  std::fprintf(stderr, "fgemma %s: cannot write to stdout: %s\n", command,
               e != 0 ? std::strerror(e) : "write error");
  return rc == kExitOk ? kExitRuntime : rc;
}

int RunSubcommand(const Command& c, int argc, char** argv) {
  InstallTempCleanupHandlers();
  return FinishStdout(c.name, RunCommand(c, argc, argv));
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    PrintHelp(stderr);
    return kExitUsage;
  }
  std::string cmd = argv[1];
  if (cmd == "help" && argc >= 3) {  // fgemma help CMD: CMD's own help
    for (const auto& c : kCommands) {
      if (argv[2] == std::string(c.name)) {
        char help_flag[] = "--help";
        char* args[] = {argv[2], help_flag, nullptr};
        return FinishStdout(c.name, RunCommand(c, 2, args));
      }
    }
    std::fprintf(stderr, "fgemma help: unknown command '%s'\n\n", argv[2]);
    PrintHelp(stderr);
    return kExitUsage;
  }
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    PrintHelp(stdout);
    return FinishStdout("help", kExitOk);
  }
  if (cmd == "--version") {
    std::printf("fgemma 0.1.0\n");
    return FinishStdout("--version", kExitOk);
  }
  for (const auto& c : kCommands) {
    if (cmd == c.name) return RunSubcommand(c, argc - 1, argv + 1);
  }
  std::fprintf(stderr, "fgemma: unknown command '%s'\n\n", cmd.c_str());
  PrintHelp(stderr);
  return kExitUsage;
}

}  // namespace fg::cli
