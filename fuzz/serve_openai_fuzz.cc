// libFuzzer target for `fgemma serve`'s request bodies: arbitrary bytes as a /v1/chat/completions
// and a /v1/completions body, under small limits. A crash, sanitizer report, exception or failed
// invariant (FG_FUZZ_CHECK) is a bug; an ApiError is the expected answer to garbage.
// Invariants: an error is a 4xx with a message; an accepted request keeps within the limits
// (messages, tools, stop strings, max_tokens) and its catalog parses.
//   make fuzz-input FUZZ_SECONDS=60
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "src/serve/openai.h"
#include "src/text/tool_catalog.h"

namespace {

void CheckError(const fg::serve::ApiError& e) {
  FG_FUZZ_CHECK(e.http_status >= 400 && e.http_status < 500);
  FG_FUZZ_CHECK(!e.message.empty());
  const nlohmann::json j = e.ToJson();
  FG_FUZZ_CHECK(j.contains("error"));
  (void)j.dump();  // the message must be valid UTF-8 (dump throws otherwise)
}

// Sampling settings an accepted request hands the caller: in their ranges, max_tokens set.
void CheckControl(const fg::CallControl& c, const fg::serve::Limits& limits) {
  FG_FUZZ_CHECK(c.max_tokens.has_value());
  FG_FUZZ_CHECK(*c.max_tokens >= 1 && *c.max_tokens <= limits.max_tokens);
  if (c.temperature) FG_FUZZ_CHECK(*c.temperature >= 0 && *c.temperature <= 2);
  if (c.top_p) FG_FUZZ_CHECK(*c.top_p > 0 && *c.top_p <= 1);
  if (c.top_k) FG_FUZZ_CHECK(*c.top_k >= 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  fg::serve::Limits limits;
  limits.max_messages = 8;
  limits.max_tools = 8;
  limits.max_tokens = 64;
  limits.default_max_tokens = 16;
  limits.max_calls = 2;

  fg::serve::ChatRequest chat;
  if (auto e = fg::serve::ParseChatRequest(body, limits, &chat)) {
    CheckError(*e);
  } else {
    FG_FUZZ_CHECK(!chat.turns.empty() && chat.turns.size() <= limits.max_messages);
    FG_FUZZ_CHECK(chat.stop.size() <= limits.max_stop);
    CheckControl(chat.control, limits);
    FG_FUZZ_CHECK(chat.max_calls >= 1 && chat.max_calls <= limits.max_calls);
    auto catalog = fg::text::ParseToolCatalog(chat.catalog_json);
    FG_FUZZ_CHECK(catalog.ok());
    FG_FUZZ_CHECK(!catalog->tools.empty() && catalog->tools.size() <= limits.max_tools);
  }

  fg::serve::CompletionRequest completion;
  if (auto e = fg::serve::ParseCompletionRequest(body, limits, &completion)) {
    CheckError(*e);
  } else {
    FG_FUZZ_CHECK(completion.stop.size() <= limits.max_stop);
    CheckControl(completion.control, limits);
  }
  return 0;
}
