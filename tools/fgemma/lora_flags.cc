#include "tools/fgemma/lora_flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace fg::cli {

void LoraFlags::Register(FlagParser& p) {
  p.AddStringList("--lora", &files, "FILE",
                  "Apply a LoRA adapter (llama.cpp's GGUF format) at scale 1; repeatable, or "
                  "FILE,FILE");
  p.AddStringPairList("--lora-scaled", &scaled, "FILE S",
                      "Apply a LoRA adapter at scale S (0: off); repeatable, or llama.cpp's "
                      "FILE:S,FILE:S");
}

namespace {

Status AddScaled(const std::string& file, const std::string& scale,
                 std::vector<runtime::LoraSpec>* out) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(scale.c_str(), &end);
  if (file.empty() || scale.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) ||
      !std::isfinite(static_cast<float>(v))) {
    return InvalidArgumentError("--lora-scaled " + file + ": the scale must be a number, got '" +
                                scale + "'");
  }
  out->push_back({file, static_cast<float>(v)});
  return OkStatus();
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t c; (c = s.find(',', start)) != std::string::npos; start = c + 1) {
    out.push_back(s.substr(start, c - start));
  }
  out.push_back(s.substr(start));
  return out;
}

}  // namespace

StatusOr<std::vector<runtime::LoraSpec>> LoraFlags::Specs() const {
  std::vector<runtime::LoraSpec> out;
  for (const std::string& f : files) {
    for (const std::string& one : SplitCommas(f)) {
      if (one.empty()) return InvalidArgumentError("--lora: empty file name in '" + f + "'");
      out.push_back({one, 1.0f});
    }
  }
  for (const auto& [f, s] : scaled) {
    if (!s.empty()) {
      FG_RETURN_IF_ERROR(AddScaled(f, s, &out));
      continue;
    }
    for (const std::string& one : SplitCommas(f)) {  // llama.cpp's FILE:S,FILE:S
      const size_t colon = one.rfind(':');
      FG_RETURN_IF_ERROR(AddScaled(one.substr(0, colon),
                                   colon == std::string::npos ? "" : one.substr(colon + 1), &out));
    }
  }
  return out;
}

}  // namespace fg::cli
