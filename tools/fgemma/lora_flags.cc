#include "tools/fgemma/lora_flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace fg::cli {

void LoraFlags::Register(FlagParser& p) {
  p.AddStringList("--lora", &files, "FILE",
                  "Apply a LoRA adapter (llama.cpp's GGUF format) at scale 1; repeatable");
  p.AddStringPairList("--lora-scaled", &scaled, "FILE S",
                      "Apply a LoRA adapter at scale S (0: off); repeatable");
}

StatusOr<std::vector<runtime::LoraSpec>> LoraFlags::Specs() const {
  std::vector<runtime::LoraSpec> out;
  for (const std::string& f : files) out.push_back({f, 1.0f});
  for (const auto& [f, s] : scaled) {
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) ||
        !std::isfinite(static_cast<float>(v))) {
      return InvalidArgumentError("--lora-scaled " + f + ": the scale must be a number, got '" +
                                  s + "'");
    }
    out.push_back({f, static_cast<float>(v)});
  }
  return out;
}

}  // namespace fg::cli
