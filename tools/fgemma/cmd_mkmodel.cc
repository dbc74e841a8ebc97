#include <cstdio>

#include "tools/fgemma/commands.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {

// Placeholder until the GGUF writer lands (issue 2): says so plainly.
int CmdMkmodel(int, char**) {
  std::fprintf(stderr, "fgemma mkmodel: not implemented yet\n");
  return kExitRuntime;
}

}  // namespace fg::cli
