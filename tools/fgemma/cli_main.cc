#include <cstdio>
#include <cstring>
#include <string>

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
               "\nRun 'fgemma <command> --help' for the options of a command.\n"
               "Exit codes: 0 success, 1 runtime error, 2 usage error.\n");
}

}  // namespace

int Main(int argc, char** argv) {
  if (argc < 2) {
    PrintHelp(stderr);
    return kExitUsage;
  }
  std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    PrintHelp(stdout);
    return kExitOk;
  }
  if (cmd == "--version") {
    std::printf("fgemma 0.1.0\n");
    return kExitOk;
  }
  for (const auto& c : kCommands) {
    if (cmd == c.name) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "fgemma: unknown command '%s'\n\n", cmd.c_str());
  PrintHelp(stderr);
  return kExitUsage;
}

}  // namespace fg::cli
