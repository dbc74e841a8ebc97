#include <cstdio>

#include "tools/fgemma/commands.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {

// Placeholder until the tokenizer lands (issue 3, item 6): says so plainly.
int CmdTokenize(int, char**) {
  std::fprintf(stderr, "fgemma tokenize: not implemented yet\n");
  return kExitRuntime;
}

}  // namespace fg::cli
