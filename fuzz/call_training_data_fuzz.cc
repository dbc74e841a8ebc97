// libFuzzer target for `fgemma tune`'s training data: arbitrary bytes as a JSONL file, with a
// small catalog for its short-form lines ({"request", "calls"}) and with none. A crash,
// sanitizer report, exception or failed invariant (FG_FUZZ_CHECK) is a bug; a non-OK Status is
// the expected answer to garbage. Invariants: an error is InvalidArgument naming the file and a
// line; every parsed example has a catalog, a request and calls that validate against their
// tools; the value-swap augmentation and the tool prior's examples keep them valid.
//   make fuzz-input FUZZ_SECONDS=60
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "src/call/training_data.h"
#include "src/text/call_parser.h"
#include "src/text/tool_catalog.h"

namespace {

constexpr std::string_view kCatalog = R"({"tools": [
 {"type": "function", "function": {"name": "set_light", "description": "Turns a light on or off.",
  "parameters": {"type": "object", "properties": {
   "room": {"type": "string", "enum": ["kitchen", "hall"]}, "on": {"type": "boolean"},
   "level": {"type": "integer"}}, "required": ["room", "on"]}}},
 {"type": "function", "function": {"name": "start_timer", "description": "Starts a timer.",
  "parameters": {"type": "object", "properties": {"minutes": {"type": "number"},
   "label": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
   "required": ["minutes"]}}}]})";

void CheckExamples(const std::vector<fg::call::TrainingExample>& examples) {
  for (const fg::call::TrainingExample& e : examples) {
    FG_FUZZ_CHECK(e.catalog != nullptr);
    FG_FUZZ_CHECK(!e.calls.empty() || e.channel);
    for (const auto& [name, arguments] : e.calls) {
      const fg::text::Tool* tool = e.catalog->Find(name);
      FG_FUZZ_CHECK(tool != nullptr);
      FG_FUZZ_CHECK(fg::text::ValidateCall(*tool, arguments).ok());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<const fg::text::ToolCatalog> catalog = [] {
    auto c = fg::text::ParseToolCatalog(kCatalog);
    FG_FUZZ_CHECK(c.ok());
    return std::make_shared<const fg::text::ToolCatalog>(*std::move(c));
  }();
  const std::string_view jsonl(reinterpret_cast<const char*>(data), size);
  for (const auto& with : {catalog, std::shared_ptr<const fg::text::ToolCatalog>()}) {
    auto examples = fg::call::ParseTrainingData(jsonl, "fuzz.jsonl", with);
    if (!examples.ok()) {
      FG_FUZZ_CHECK(examples.status().code() == fg::StatusCode::kInvalidArgument);
      FG_FUZZ_CHECK(examples.status().message().rfind("fuzz.jsonl", 0) == 0);
      continue;
    }
    CheckExamples(*examples);
    CheckExamples(fg::call::AugmentSwappingValues(*examples, 3, 7));
    CheckExamples(fg::call::ChannelExamples(*examples, 2, 7));
  }
  return 0;
}
