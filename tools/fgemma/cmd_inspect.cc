#include <cstdio>

#include "tools/fgemma/commands.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {

// Placeholder until the GGUF reader lands (issue 2): says so plainly.
int CmdInspect(int, char**) {
  std::fprintf(stderr, "fgemma inspect: not implemented yet\n");
  return kExitRuntime;
}

}  // namespace fg::cli
