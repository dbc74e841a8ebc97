// libFuzzer target for tool-catalog parsing and declaration rendering: arbitrary bytes as catalog
// JSON. A crash, sanitizer report, exception or failed invariant (FG_FUZZ_CHECK) is a bug; a
// non-OK Status is the expected answer to garbage. Invariants: errors are InvalidArgument; a
// parsed catalog renders a prompt holding one declaration per tool.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "src/text/function_prompt.h"
#include "src/text/tool_catalog.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto catalog = fg::text::ParseToolCatalog(text);
  if (!catalog.ok()) {
    FG_FUZZ_CHECK(catalog.status().code() == fg::StatusCode::kInvalidArgument);
    return 0;
  }
  FG_FUZZ_CHECK(!catalog->tools.empty());
  const std::string prompt = fg::text::RenderPrompt(*catalog, "hi");
  size_t declarations = 0;
  for (size_t at = 0; (at = prompt.find(fg::text::kStartDeclaration, at)) != std::string::npos;
       ++at) {
    ++declarations;
  }
  FG_FUZZ_CHECK(declarations == catalog->tools.size());
  return 0;
}
