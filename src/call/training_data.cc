#include "src/call/training_data.h"

#include <map>
#include <utility>

#include "src/call/prompt.h"
#include "src/text/call_parser.h"

namespace fg::call {
namespace {

// One call {"name", "arguments"} (arguments an object or a JSON string holding one).
StatusOr<std::pair<std::string, nlohmann::json>> ReadCall(const nlohmann::json& c) {
  if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) {
    return InvalidArgumentError("a call without a \"name\" string");
  }
  nlohmann::json args = c.contains("arguments") ? c["arguments"] : nlohmann::json::object();
  if (args.is_string()) {
    args = nlohmann::json::parse(args.get<std::string>(), nullptr, false);
    if (args.is_discarded()) return InvalidArgumentError("call arguments are not JSON");
  }
  if (!args.is_object()) return InvalidArgumentError("call arguments are not an object");
  return std::make_pair(c["name"].get<std::string>(), std::move(args));
}

}  // namespace

StatusOr<std::vector<TrainingExample>> ParseTrainingData(
    std::string_view jsonl, std::string_view source,
    std::shared_ptr<const text::ToolCatalog> catalog) {
  std::vector<TrainingExample> out;
  // Catalogs of TRL lines by their tools' JSON text: one parse and one prefix per catalog.
  std::map<std::string, std::shared_ptr<const text::ToolCatalog>> catalogs;
  const std::string default_key = catalog ? "--tools" : "";
  int n = 0;
  size_t pos = 0;
  while (pos < jsonl.size()) {
    size_t end = jsonl.find('\n', pos);
    if (end == std::string_view::npos) end = jsonl.size();
    const std::string_view line = jsonl.substr(pos, end - pos);
    pos = end + 1;
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto fail = [&](const std::string& why) {
      return InvalidArgumentError(std::string(source) + " line " + std::to_string(n) + ": " + why);
    };
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return fail("not a JSON object");
    TrainingExample e;
    e.line = n;
    nlohmann::json calls;
    if (j.contains("messages")) {
      if (!j.contains("tools") || !j["tools"].is_array()) return fail("no \"tools\" array");
      if (!j["messages"].is_array()) return fail("\"messages\" is not an array");
      const std::string key = j["tools"].dump();
      auto& c = catalogs[key];
      if (!c) {
        auto parsed = text::ParseToolCatalogJson(j["tools"]);
        if (!parsed.ok()) return fail(parsed.status().message());
        c = std::make_shared<const text::ToolCatalog>(std::move(*parsed));
      }
      e.catalog = c;
      e.catalog_key = key;
      int users = 0;
      for (const nlohmann::json& m : j["messages"]) {
        const std::string role = m.value("role", "");
        const bool has_text = m.contains("content") && m["content"].is_string();
        if (role == "developer" || role == "system") {
          if (!has_text) return fail("a " + role + " message without text content");
          e.prompt.developer_message = m["content"];
        } else if (role == "user") {
          if (!has_text) return fail("a user message without text content");
          e.request = m["content"];
          ++users;
        } else if (role == "assistant") {
          if (!m.contains("tool_calls") || !m["tool_calls"].is_array()) {
            return fail("the assistant message has no \"tool_calls\"");
          }
          calls = nlohmann::json::array();
          for (const nlohmann::json& tc : m["tool_calls"]) {
            if (!tc.is_object() || !tc.contains("function")) return fail("a tool call without \"function\"");
            calls.push_back(tc["function"]);
          }
        } else {
          return fail("unsupported message role '" + role + "' (developer, system, user, assistant)");
        }
      }
      if (users != 1) return fail("expected one user message, found " + std::to_string(users));
      e.catalog_key += "\n" + e.prompt.developer_message;
    } else {
      if (!catalog) return fail("a {\"request\", \"calls\"} line needs a catalog (--tools)");
      if (!j.contains("request") || !j["request"].is_string()) return fail("no \"request\" string");
      e.catalog = catalog;
      e.catalog_key = default_key + "\n" + e.prompt.developer_message;
      e.request = j["request"];
      calls = j.contains("calls") ? j["calls"] : nlohmann::json();
    }
    if (!calls.is_array() || calls.empty()) return fail("no call to learn (\"calls\" / \"tool_calls\")");
    if (Status s = CheckRequest(e.request); !s.ok()) return fail(s.message());
    for (const nlohmann::json& c : calls) {
      auto call = ReadCall(c);
      if (!call.ok()) return fail(call.status().message());
      const text::Tool* tool = e.catalog->Find(call->first);
      if (tool == nullptr) return fail("call to '" + call->first + "', which is not among its tools");
      if (Status s = text::ValidateCall(*tool, call->second); !s.ok()) {
        return fail("call to '" + call->first + "' does not validate: " + s.message());
      }
      e.calls.push_back(std::move(*call));
    }
    out.push_back(std::move(e));
  }
  if (out.empty()) return InvalidArgumentError(std::string(source) + ": no example");
  return out;
}

StatusOr<TrainingTokens> RenderTrainingExample(const text::Tokenizer& tk,
                                               const TrainingExample& e) {
  TrainingTokens t;
  t.tokens = PrefixTokens(tk, text::Dialect::kOfficial, *e.catalog, e.prompt);
  t.prefix_len = static_cast<int64_t>(t.tokens.size());
  FG_ASSIGN_OR_RETURN(std::vector<int32_t> request, RequestTokens(tk, e.request));
  t.tokens.insert(t.tokens.end(), request.begin(), request.end());
  t.target_start = static_cast<int64_t>(t.tokens.size());
  std::string target;
  for (const auto& [name, args] : e.calls) target += text::RenderCall(name, args);
  // The target is model output: its control-token text is special (one token each).
  const std::vector<int32_t> ids = tk.Encode(target, /*add_special=*/false, /*parse_special=*/true);
  t.tokens.insert(t.tokens.end(), ids.begin(), ids.end());
  return t;
}

}  // namespace fg::call
