// The LoRA flags every model-running command shares, spelled as llama.cpp spells them:
// --lora FILE (repeatable, scale 1; or FILE,FILE) and --lora-scaled FILE S (repeatable; or
// llama.cpp's FILE:S,FILE:S).
#ifndef FGEMMA_TOOLS_LORA_FLAGS_H_
#define FGEMMA_TOOLS_LORA_FLAGS_H_

#include <string>
#include <utility>
#include <vector>

#include "fgemma/status.h"
#include "src/runtime/model.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {

struct LoraFlags {
  std::vector<std::string> files;
  std::vector<std::pair<std::string, std::string>> scaled;

  void Register(FlagParser& p);
  // The adapters in flag order (--lora ones first); InvalidArgument for a scale that is not a
  // finite number (a usage error).
  StatusOr<std::vector<runtime::LoraSpec>> Specs() const;
};

}  // namespace fg::cli

#endif  // FGEMMA_TOOLS_LORA_FLAGS_H_
