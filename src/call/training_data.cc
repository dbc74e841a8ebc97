#include "src/call/training_data.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "src/base/splitmix.h"
#include "src/call/logit_processors.h"
#include "src/call/prompt.h"
#include "src/call/tool_channel.h"
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

// The text a value has in a request: strings as they are, integers as digits; other values
// (booleans, fractions, arrays, objects) are not swapped.
bool ValueText(const nlohmann::json& v, std::string* text) {
  if (v.is_string()) {
    *text = v.get<std::string>();
  } else if (v.is_number_integer()) {
    *text = v.dump();
  } else if (v.is_number_float()) {
    // A whole number within int64's range (a wider one would not convert).
    const double d = v.get<double>();
    if (!(std::abs(d) < 9.0e18) || d != std::trunc(d)) return false;
    *text = std::to_string(static_cast<int64_t>(d));
  } else {
    return false;
  }
  return !text->empty();
}

bool WordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// Where `needle` occurs in `hay` (both lower case) on word boundaries: the offset if exactly
// once, else npos.
size_t OnlyOccurrence(const std::string& hay, const std::string& needle) {
  size_t found = std::string::npos;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) {
    const bool left = at == 0 || !WordChar(hay[at - 1]);
    const size_t end = at + needle.size();
    const bool right = end == hay.size() || !WordChar(hay[end]);
    if (!left || !right) continue;
    if (found != std::string::npos) return std::string::npos;
    found = at;
  }
  return found;
}

}  // namespace

std::vector<TrainingExample> AugmentSwappingValues(const std::vector<TrainingExample>& examples,
                                                   int variants, uint64_t seed) {
  std::vector<TrainingExample> out = examples;
  if (variants <= 0) return out;
  // A swappable argument of an example: the call and argument, and where its text is.
  struct Slot {
    size_t call;
    std::string arg;
    size_t at, len;
  };
  using PoolKey = std::tuple<std::string, std::string, std::string>;  // catalog, tool, argument
  std::map<PoolKey, std::vector<nlohmann::json>> pools;
  std::vector<std::vector<Slot>> slots(examples.size());
  std::set<std::pair<std::string, std::string>> seen;  // (catalog_key, request)
  for (size_t i = 0; i < examples.size(); ++i) {
    const TrainingExample& e = examples[i];
    seen.insert({e.catalog_key, e.request});
    const std::string hay = LowerCase(e.request);
    std::vector<Slot> found;
    for (size_t c = 0; c < e.calls.size(); ++c) {
      for (const auto& [arg, v] : e.calls[c].second.items()) {
        std::string text;
        if (!ValueText(v, &text)) continue;
        const size_t at = OnlyOccurrence(hay, LowerCase(text));
        if (at == std::string::npos) continue;
        found.push_back({c, arg, at, text.size()});
        auto& pool = pools[{e.catalog_key, e.calls[c].first, arg}];
        if (std::find(pool.begin(), pool.end(), v) == pool.end()) pool.push_back(v);
      }
    }
    // Overlapping spans ("5" inside "5 pm" and "5") are ambiguous: keep neither.
    std::sort(found.begin(), found.end(), [](const Slot& a, const Slot& b) { return a.at < b.at; });
    std::vector<bool> drop(found.size(), false);
    for (size_t k = 1; k < found.size(); ++k) {
      if (found[k].at < found[k - 1].at + found[k - 1].len) drop[k] = drop[k - 1] = true;
    }
    for (size_t k = 0; k < found.size(); ++k) {
      if (!drop[k]) slots[i].push_back(found[k]);
    }
  }
  uint64_t state = seed;
  auto next = [&state] { return SplitMix64(state); };
  for (size_t i = 0; i < examples.size(); ++i) {
    const TrainingExample& e = examples[i];
    std::vector<const Slot*> swappable;
    for (const Slot& s : slots[i]) {
      if (pools[{e.catalog_key, e.calls[s.call].first, s.arg}].size() > 1) swappable.push_back(&s);
    }
    if (swappable.empty()) continue;
    // A few more tries than variants: some draws repeat a request or fail to validate.
    for (int tries = 0, made = 0; made < variants && tries < 4 * variants; ++tries) {
      TrainingExample v = e;
      std::string request = e.request;
      // Each slot swapped with probability 1/2, at least one; right to left so the earlier
      // offsets stay valid.
      std::vector<bool> pick(swappable.size());
      bool any = false;
      for (size_t k = 0; k < swappable.size(); ++k) any |= (pick[k] = next() & 1);
      if (!any) pick[next() % swappable.size()] = true;
      bool ok = true;
      for (size_t k = swappable.size(); k-- > 0;) {
        if (!pick[k]) continue;
        const Slot& s = *swappable[k];
        const auto& pool = pools[{e.catalog_key, e.calls[s.call].first, s.arg}];
        const nlohmann::json& old = e.calls[s.call].second[s.arg];
        nlohmann::json repl = pool[next() % pool.size()];
        if (repl == old) repl = pool[(std::find(pool.begin(), pool.end(), old) - pool.begin() + 1) % pool.size()];
        std::string text;
        ok = ok && ValueText(repl, &text);
        request.replace(s.at, s.len, text);
        v.calls[s.call].second[s.arg] = repl;
      }
      if (!ok) continue;
      for (const auto& [name, args] : v.calls) {
        const text::Tool* tool = v.catalog->Find(name);
        ok = ok && tool != nullptr && text::ValidateCall(*tool, args).ok();
      }
      if (!ok || CheckRequest(request).ok() == false) continue;
      if (!seen.insert({e.catalog_key, request}).second) continue;
      v.request = std::move(request);
      out.push_back(std::move(v));
      ++made;
    }
  }
  return out;
}

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
        if (!m.is_object()) return fail("a message that is not an object");
        if (!m.contains("role") || !m["role"].is_string()) {
          return fail("a message without a \"role\" string");
        }
        const std::string role = m["role"].get<std::string>();
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

namespace {

// A tool as the tool prior's example for `request` sees it: without `request` among its
// examples (text::Tool::examples), so that no request is trained after itself.
text::Tool ChannelToolFor(const text::Tool& tool, const std::string& request) {
  text::Tool t = tool;
  std::erase(t.examples, request);
  return t;
}

// The prefix key of a tool's channel prompt: its text and its examples.
std::string ChannelKey(const text::Tool& tool) {
  std::string key = "channel\n" + ChannelToolText(tool);
  for (const std::string& x : tool.examples) key += "\n" + x;
  return key;
}

}  // namespace

std::string GivenArguments(const std::vector<TrainingExample>& examples) {
  const TrainingExample* first = nullptr;
  for (const TrainingExample& e : examples) {
    if (e.channel) continue;
    if (first == nullptr) first = &e;
    if (e.catalog == nullptr || e.catalog_key != first->catalog_key) return "";
  }
  if (first == nullptr) return "";
  std::map<std::string, std::set<std::string>> given;
  for (const text::Tool& t : first->catalog->tools) given[t.name];
  if (given.empty()) return "";
  for (const TrainingExample& e : examples) {
    if (e.channel) continue;
    for (const auto& [name, arguments] : e.calls) {
      auto it = given.find(name);
      if (it == given.end()) continue;
      for (const auto& [key, value] : arguments.items()) it->second.insert(key);
    }
  }
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, keys] : given) out[name] = keys;
  return out.dump();
}

std::vector<TrainingExample> ChannelExamples(const std::vector<TrainingExample>& examples,
                                             int negatives, uint64_t seed) {
  std::vector<TrainingExample> out;
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 0x5DEECE66Dull;
  std::set<std::pair<std::string, std::string>> seen;
  for (const TrainingExample& e : examples) {
    if (e.channel || e.calls.size() != 1) continue;
    const text::Tool* tool = e.catalog->Find(e.calls[0].first);
    if (tool == nullptr) continue;
    TrainingExample c = e;
    c.channel = true;
    c.catalog_key = ChannelKey(ChannelToolFor(*tool, e.request));
    if (!seen.insert({c.catalog_key, e.request}).second) continue;
    c.channel_negatives.clear();
    if (negatives > 0) {
      std::vector<std::string> others;
      for (const text::Tool& t : e.catalog->tools) {
        if (t.name != tool->name) others.push_back(t.name);
      }
      // A partial Fisher-Yates shuffle: the first `negatives` of the others.
      const size_t k = std::min(others.size(), static_cast<size_t>(negatives));
      for (size_t i = 0; i < k; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const size_t j = i + static_cast<size_t>((state >> 33) % (others.size() - i));
        std::swap(others[i], others[j]);
      }
      c.channel_negatives.assign(others.begin(), others.begin() + static_cast<std::ptrdiff_t>(k));
    }
    out.push_back(std::move(c));
  }
  return out;
}

TrainingExample ChannelNegative(const TrainingExample& e, const std::string& tool) {
  TrainingExample n = e;
  n.channel_negatives.clear();
  n.calls = {{tool, nlohmann::json::object()}};
  n.catalog_key = ChannelKey(ChannelToolFor(*e.catalog->Find(tool), e.request));
  return n;
}

std::vector<LeaveOut> LeaveOuts(std::string_view calls, const text::ToolCatalog& catalog) {
  constexpr std::string_view kCall = "call:", kEscape = "<escape>";
  std::vector<LeaveOut> out;
  // The optional properties of `tool` that sort strictly between `after` (none: "") and
  // `before` (none: past every key); a LeaveOut at `offset` when there are some.
  auto leave_out = [&](const text::Tool* tool, size_t offset, const std::string& after,
                       const std::string* before) {
    if (tool == nullptr) return;
    LeaveOut l{offset, tool->name, {}};
    const auto& props = tool->parameters.properties;
    const auto& required = tool->parameters.required;
    for (auto it = props.upper_bound(after); it != props.end(); ++it) {
      if (before != nullptr && it->first >= *before) break;
      if (std::find(required.begin(), required.end(), it->first) == required.end()) {
        l.keys.push_back(it->first);
      }
    }
    if (!l.keys.empty()) out.push_back(std::move(l));
  };
  size_t pos = 0;
  while ((pos = calls.find(kCall, pos)) != std::string_view::npos) {
    pos += kCall.size();
    const size_t open = calls.find('{', pos);
    if (open == std::string_view::npos) break;
    const text::Tool* tool = catalog.Find(calls.substr(pos, open - pos));
    std::string last_key;  // "" before the first key
    int depth = 1;
    bool in_string = false, key_next = true;
    size_t i = open + 1;
    while (i < calls.size() && depth > 0) {
      if (calls.substr(i, kEscape.size()) == kEscape) {
        in_string = !in_string;
        i += kEscape.size();
        continue;
      }
      const char c = calls[i];
      if (in_string) {
        ++i;
        continue;
      }
      if (depth == 1 && key_next && c != '}') {
        const size_t colon = calls.find(':', i);
        if (colon == std::string_view::npos) break;
        const std::string key(calls.substr(i, colon - i));
        leave_out(tool, i, last_key, &key);
        last_key = key;
        key_next = false;
        i = colon + 1;
        continue;
      }
      if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) leave_out(tool, i, last_key, nullptr);
      } else if (c == ',' && depth == 1) {
        key_next = true;
      }
      ++i;
    }
    pos = i;
  }
  return out;
}

StatusOr<TrainingTokens> RenderTrainingExample(const text::Tokenizer& tk,
                                               const TrainingExample& e) {
  TrainingTokens t;
  if (e.channel) {
    // As ToolChannel::Score runs it: the prompt but its last token is the prefix (the base
    // model's K/V); that token's row predicts the request's first token.
    const text::Tool* tool = e.calls.size() == 1 ? e.catalog->Find(e.calls[0].first) : nullptr;
    if (tool == nullptr)
      return InvalidArgumentError("a tool prior example needs one call of its tools");
    t.tokens = ChannelPromptTokens(tk, ChannelToolFor(*tool, e.request));
    t.prefix_len = static_cast<int64_t>(t.tokens.size()) - 1;
    t.target_start = static_cast<int64_t>(t.tokens.size());
    FG_ASSIGN_OR_RETURN(std::vector<int32_t> request, ChannelRequestTokens(tk, e.request));
    t.tokens.insert(t.tokens.end(), request.begin(), request.end());
    return t;
  }
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
  // The token that holds each leave-out character of the text the tokens spell: token j spans
  // [ends[j - 1], ends[j]).
  std::string spelled;
  std::vector<size_t> ends;
  for (int32_t id : ids) {
    spelled += tk.TokenToPiece(id, /*special=*/true);
    ends.push_back(spelled.size());
  }
  size_t j = 0;
  for (LeaveOut& l : LeaveOuts(spelled, *e.catalog)) {
    while (ends[j] <= l.offset) ++j;
    const int64_t index = t.target_start + static_cast<int64_t>(j);
    if (t.leave_out.empty() || t.leave_out.back().index != index) {
      t.leave_out.push_back({index, std::move(l.tool), std::move(l.keys)});
    } else {
      auto& keys = t.leave_out.back().keys;
      keys.insert(keys.end(), l.keys.begin(), l.keys.end());
    }
  }
  return t;
}

}  // namespace fg::call
