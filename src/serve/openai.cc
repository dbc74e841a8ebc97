#include "src/serve/openai.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>

#include "src/text/call_parser.h"
#include "src/text/function_prompt.h"
#include "src/text/tokenizer.h"
#include "src/text/tool_catalog.h"

namespace fg::serve {

using json = nlohmann::json;

namespace {

// JSON deeper than this is refused before it is parsed: nlohmann's dump and destruction recurse
// per level, so a 1 MiB body of '[' would otherwise exhaust the stack.
constexpr int kMaxJsonDepth = 64;

bool TooDeep(std::string_view body) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

std::optional<ApiError> ParseObject(std::string_view body, json* out) {
  if (TooDeep(body)) {
    return BadRequest("the JSON body nests deeper than " + std::to_string(kMaxJsonDepth) +
                      " levels");
  }
  *out = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return BadRequest("the body is not valid JSON");
  if (!out->is_object()) return BadRequest("the body must be a JSON object");
  return std::nullopt;
}

// Message content: a string, null, or an array of {"type": "text", "text": ...} parts (joined).
std::optional<ApiError> ContentText(const json& m, const std::string& param, std::string* out) {
  out->clear();
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    *out = it->get<std::string>();
    return std::nullopt;
  }
  if (!it->is_array()) return BadRequest("content must be a string or an array of parts", param);
  for (const json& part : *it) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
        !part.contains("text") || !part["text"].is_string()) {
      return BadRequest("only text content parts are supported", param);
    }
    *out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> ParseStop(const json& doc, const Limits& limits,
                                  std::vector<std::string>* stop) {
  auto it = doc.find("stop");
  if (it == doc.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    stop->push_back(it->get<std::string>());
  } else if (it->is_array()) {
    for (const json& s : *it) {
      if (!s.is_string()) return BadRequest("stop must be a string or an array of strings", "stop");
      stop->push_back(s.get<std::string>());
    }
  } else {
    return BadRequest("stop must be a string or an array of strings", "stop");
  }
  if (stop->size() > limits.max_stop) {
    return BadRequest("at most " + std::to_string(limits.max_stop) + " stop strings", "stop");
  }
  for (const std::string& s : *stop) {
    if (s.empty()) return BadRequest("a stop string is empty", "stop");
  }
  return std::nullopt;
}

// max_tokens / max_completion_tokens, temperature, top_p, top_k, seed, stream, stream_options.
std::optional<ApiError> ParseCommon(const json& doc, const Limits& limits, CallControl* c,
                                    bool* stream, bool* include_usage) {
  c->max_tokens = limits.default_max_tokens;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    auto it = doc.find(key);
    if (it == doc.end() || it->is_null()) continue;
    if (!it->is_number_integer()) return BadRequest(std::string(key) + " must be an integer", key);
    const int64_t v = it->get<int64_t>();
    if (v < 1 || v > limits.max_tokens) {
      return BadRequest(std::string(key) + " must be in [1, " + std::to_string(limits.max_tokens) +
                            "] (the server's --max-tokens)",
                        key);
    }
    c->max_tokens = v;
  }
  // Greedy unless asked: the answer `fgemma call` gives.
  c->temperature = 0.0;
  if (auto it = doc.find("temperature"); it != doc.end() && !it->is_null()) {
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0 ||
        it->get<double>() > 2) {
      return BadRequest("temperature must be a number in [0, 2]", "temperature");
    }
    c->temperature = it->get<double>();
  }
  if (auto it = doc.find("top_p"); it != doc.end() && !it->is_null()) {
    if (!it->is_number() || !(it->get<double>() > 0) || it->get<double>() > 1) {
      return BadRequest("top_p must be a number in (0, 1]", "top_p");
    }
    c->top_p = it->get<double>();
  }
  if (auto it = doc.find("top_k"); it != doc.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > (1 << 20)) {
      return BadRequest("top_k must be an integer >= 0", "top_k");
    }
    c->top_k = it->get<int64_t>();
  }
  if (auto it = doc.find("seed"); it != doc.end() && !it->is_null()) {
    if (!it->is_number_integer()) return BadRequest("seed must be an integer", "seed");
    c->seed = it->is_number_unsigned() ? it->get<uint64_t>()
                                       : static_cast<uint64_t>(it->get<int64_t>());
  }
  if (auto it = doc.find("n"); it != doc.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() != 1) {
      return BadRequest("only n = 1 is supported", "n");
    }
  }
  if (auto it = doc.find("stream"); it != doc.end() && !it->is_null()) {
    if (!it->is_boolean()) return BadRequest("stream must be a boolean", "stream");
    *stream = it->get<bool>();
  }
  if (auto it = doc.find("stream_options"); it != doc.end() && !it->is_null()) {
    if (!it->is_object()) return BadRequest("stream_options must be an object", "stream_options");
    if (auto u = it->find("include_usage"); u != it->end() && !u->is_null()) {
      if (!u->is_boolean()) {
        return BadRequest("include_usage must be a boolean", "stream_options.include_usage");
      }
      *include_usage = u->get<bool>();
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ParseModel(const json& doc, std::string* model) {
  if (auto it = doc.find("model"); it != doc.end() && !it->is_null()) {
    if (!it->is_string()) return BadRequest("model must be a string", "model");
    *model = it->get<std::string>();
  }
  return std::nullopt;
}

}  // namespace

json ApiError::ToJson() const {
  json e = {{"message", text::ToValidUtf8(message)},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}};
  return json{{"error", e}};
}

ApiError BadRequest(std::string message, std::string param) {
  ApiError e;
  e.http_status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

std::optional<ApiError> ParseChatRequest(std::string_view body, const Limits& limits,
                                         ChatRequest* out) {
  try {
    *out = ChatRequest{};
    json doc;
    if (auto e = ParseObject(body, &doc)) return e;
    if (auto e = ParseModel(doc, &out->model)) return e;

    // tools: the catalog.
    auto tools = doc.find("tools");
    if (tools == doc.end() || tools->is_null() || (tools->is_array() && tools->empty())) {
      return BadRequest("tools: fgemma serve answers with function calls; give at least one tool",
                        "tools");
    }
    if (!tools->is_array()) return BadRequest("tools must be an array", "tools");
    if (tools->size() > limits.max_tools) {
      return BadRequest("at most " + std::to_string(limits.max_tools) +
                            " tools per request (the server's --max-tools)",
                        "tools");
    }
    json catalog = {{"tools", *tools}};
    auto parsed = text::ParseToolCatalogJson(catalog);
    if (!parsed.ok()) return BadRequest(parsed.status().message(), "tools");
    if (parsed->tools.empty()) return BadRequest("tools: no tools", "tools");

    // tool_choice.
    out->tool_choice = ToolChoice::kAuto;
    if (auto it = doc.find("tool_choice"); it != doc.end() && !it->is_null()) {
      if (it->is_string()) {
        const std::string v = it->get<std::string>();
        if (v == "auto") {
          out->tool_choice = ToolChoice::kAuto;
        } else if (v == "none") {
          out->tool_choice = ToolChoice::kNone;
        } else if (v == "required") {
          out->tool_choice = ToolChoice::kRequired;
        } else {
          return BadRequest("tool_choice must be auto, none, required or a function",
                            "tool_choice");
        }
      } else if (it->is_object() && it->contains("function") && (*it)["function"].is_object() &&
                 (*it)["function"].contains("name") && (*it)["function"]["name"].is_string()) {
        out->tool_choice = ToolChoice::kNamed;
        out->named_tool = (*it)["function"]["name"].get<std::string>();
        const text::Tool* tool = parsed->Find(out->named_tool);
        if (tool == nullptr) {
          return BadRequest("tool_choice names '" + out->named_tool + "', which tools lacks",
                            "tool_choice");
        }
        // The prompt declares every tool, as the client sent them; the grammar admits calls of
        // the named one only (FunctionCallerOptions::grammar_tools).
      } else {
        return BadRequest(
            "tool_choice must be auto, none, required or {\"type\": \"function\", \"function\": "
            "{\"name\": ...}}",
            "tool_choice");
      }
    }
    switch (out->tool_choice) {
      case ToolChoice::kAuto: out->constrain = ConstrainMode::kAuto; break;
      case ToolChoice::kNone: out->constrain = ConstrainMode::kOff; break;
      case ToolChoice::kRequired:
      case ToolChoice::kNamed: out->constrain = ConstrainMode::kCall; break;
    }
    out->catalog_json = catalog.dump(-1, ' ', false, json::error_handler_t::replace);
    out->max_calls = limits.max_calls;
    if (auto it = doc.find("parallel_tool_calls"); it != doc.end() && !it->is_null()) {
      if (!it->is_boolean()) {
        return BadRequest("parallel_tool_calls must be a boolean", "parallel_tool_calls");
      }
      if (!it->get<bool>()) out->max_calls = 1;
    }

    // messages.
    auto msgs = doc.find("messages");
    if (msgs == doc.end() || !msgs->is_array() || msgs->empty()) {
      return BadRequest("messages must be a non-empty array", "messages");
    }
    if (msgs->size() > limits.max_messages) {
      return BadRequest("at most " + std::to_string(limits.max_messages) +
                            " messages per request (the server's --max-messages)",
                        "messages");
    }
    // tool_call_id -> (turn, exchange) of the calls not answered yet.
    std::map<std::string, std::pair<size_t, size_t>> open_calls;
    for (size_t i = 0; i < msgs->size(); ++i) {
      const json& m = (*msgs)[i];
      const std::string param = "messages[" + std::to_string(i) + "]";
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
        return BadRequest("each message needs a string role", param);
      }
      const std::string role = m["role"].get<std::string>();
      std::string content;
      if (auto e = ContentText(m, param + ".content", &content)) return e;
      if (role == "system" || role == "developer") {
        if (!out->developer_message.empty()) out->developer_message += "\n";
        out->developer_message += content;
      } else if (role == "user") {
        ChatTurn t;
        t.role = ChatTurn::Role::kUser;
        t.text = std::move(content);
        if (t.text.find_first_not_of(" \t\r\n") == std::string::npos) {
          return BadRequest("a user message is empty", param + ".content");
        }
        out->turns.push_back(std::move(t));
        open_calls.clear();
      } else if (role == "assistant") {
        ChatTurn t;
        t.role = ChatTurn::Role::kModel;
        t.text = std::move(content);
        open_calls.clear();
        if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
          if (!tc->is_array()) return BadRequest("tool_calls must be an array", param);
          for (size_t k = 0; k < tc->size(); ++k) {
            const json& c = (*tc)[k];
            const std::string cp = param + ".tool_calls[" + std::to_string(k) + "]";
            if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
                !c["function"].contains("name") || !c["function"]["name"].is_string()) {
              return BadRequest("a tool call needs function.name", cp);
            }
            ChatTurn::Exchange x;
            x.name = c["function"]["name"].get<std::string>();
            if (!text::IsValidToolName(x.name)) return BadRequest("bad function name", cp);
            const json& args = c["function"].value("arguments", json("{}"));
            if (args.is_string()) {
              const std::string& a = args.get_ref<const std::string&>();
              if (TooDeep(a)) return BadRequest("arguments nest too deep", cp);
              x.arguments = json::parse(a.empty() ? std::string("{}") : a, nullptr, false);
            } else {
              x.arguments = args;
            }
            if (!x.arguments.is_object()) {
              return BadRequest("function.arguments must be a JSON object (as a string)", cp);
            }
            if (c.contains("id") && c["id"].is_string()) {
              open_calls[c["id"].get<std::string>()] = {out->turns.size(), t.exchanges.size()};
            }
            t.exchanges.push_back(std::move(x));
          }
        }
        out->turns.push_back(std::move(t));
      } else if (role == "tool") {
        if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string()) {
          return BadRequest("a tool message needs tool_call_id", param);
        }
        auto at = open_calls.find(m["tool_call_id"].get<std::string>());
        if (at == open_calls.end()) {
          return BadRequest("tool_call_id matches no call of the assistant message before it",
                            param + ".tool_call_id");
        }
        ChatTurn::Exchange& x = out->turns[at->second.first].exchanges[at->second.second];
        if (TooDeep(content)) return BadRequest("tool content nests too deep", param);
        json r = json::parse(content, nullptr, false);
        x.response = r.is_discarded() ? json(content) : r;
        open_calls.erase(at);
      } else {
        return BadRequest("unsupported role '" + text::ToValidUtf8(role) + "'", param + ".role");
      }
    }
    if (out->turns.empty() || out->turns[0].role != ChatTurn::Role::kUser) {
      return BadRequest("the first message after system/developer ones must be a user message",
                        "messages");
    }

    if (auto e = ParseCommon(doc, limits, &out->control, &out->stream, &out->include_usage)) {
      return e;
    }
    if (auto e = ParseStop(doc, limits, &out->stop)) return e;
    return std::nullopt;
  } catch (const std::exception& e) {
    // nlohmann's type errors on shapes the checks above missed: still the client's fault.
    return BadRequest(std::string("malformed request: ") + e.what());
  }
}

std::optional<ApiError> ParseCompletionRequest(std::string_view body, const Limits& limits,
                                               CompletionRequest* out) {
  try {
    *out = CompletionRequest{};
    json doc;
    if (auto e = ParseObject(body, &doc)) return e;
    if (auto e = ParseModel(doc, &out->model)) return e;
    auto p = doc.find("prompt");
    if (p != doc.end() && p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
      out->prompt = (*p)[0].get<std::string>();
    } else if (p != doc.end() && p->is_string()) {
      out->prompt = p->get<std::string>();
    } else {
      return BadRequest("prompt must be a string (or an array of one string)", "prompt");
    }
    if (out->prompt.empty()) return BadRequest("prompt is empty", "prompt");
    if (!text::IsValidUtf8(out->prompt)) return BadRequest("prompt is not valid UTF-8", "prompt");
    if (auto e = ParseCommon(doc, limits, &out->control, &out->stream, &out->include_usage)) {
      return e;
    }
    if (auto e = ParseStop(doc, limits, &out->stop)) return e;
    return std::nullopt;
  } catch (const std::exception& e) {
    return BadRequest(std::string("malformed request: ") + e.what());
  }
}

bool CutAtStop(std::string* text, const std::vector<std::string>& stop) {
  size_t cut = std::string::npos;
  for (const std::string& s : stop) cut = std::min(cut, text->find(s));
  if (cut == std::string::npos) return false;
  text->resize(cut);
  return true;
}

ChatAnswer MakeChatAnswer(const CallResult& r, const ChatRequest& request, std::string_view id) {
  ChatAnswer a;
  a.prompt_tokens = r.stats.prompt_tokens;
  a.completion_tokens = r.stats.generated_tokens;
  const bool length =
      r.stop_reason == StopReason::kMaxTokens || r.stop_reason == StopReason::kContextFull;
  if (request.tool_choice != ToolChoice::kNone && r.validity.ok() && !r.calls.empty()) {
    for (size_t i = 0; i < r.calls.size(); ++i) {
      a.tool_calls.push_back({"call_" + std::string(id) + "_" + std::to_string(i),
                              r.calls[i].name,
                              r.calls[i].arguments.dump(-1, ' ', false,
                                                        json::error_handler_t::replace)});
    }
    a.content = text::ToValidUtf8(r.content);
    a.finish_reason = "tool_calls";
    return a;
  }
  // Text: what the model wrote outside calls (all of it, when the output was not valid).
  std::string t = r.validity.ok() && request.tool_choice != ToolChoice::kNone ? r.content : r.text;
  if (request.tool_choice == ToolChoice::kNone) {
    const size_t call = t.find(text::kStartCall);
    if (call != std::string::npos) t.resize(call);
  }
  a.content = text::ToValidUtf8(t);
  const bool stopped = CutAtStop(&a.content, request.stop);
  a.finish_reason = length && !stopped ? "length" : "stop";
  return a;
}

namespace {

json Usage(int64_t prompt, int64_t completion) {
  return json{{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"total_tokens", prompt + completion}};
}

json ChunkBase(std::string_view id, int64_t created, std::string_view model, const char* object) {
  return json{{"id", id}, {"object", object}, {"created", created}, {"model", model}};
}

}  // namespace

json ChatCompletionJson(const ChatAnswer& a, std::string_view id, int64_t created,
                        std::string_view model) {
  json msg = {{"role", "assistant"}};
  msg["content"] = a.content.empty() && !a.tool_calls.empty() ? json(nullptr) : json(a.content);
  if (!a.tool_calls.empty()) {
    json calls = json::array();
    for (const ChatAnswer::ToolCall& c : a.tool_calls) {
      calls.push_back({{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    msg["tool_calls"] = calls;
  }
  json j = ChunkBase(id, created, model, "chat.completion");
  j["choices"] = json::array(
      {{{"index", 0}, {"message", msg}, {"logprobs", nullptr}, {"finish_reason", a.finish_reason}}});
  j["usage"] = Usage(a.prompt_tokens, a.completion_tokens);
  return j;
}

std::string SseEvent(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::vector<std::string> Fragments(std::string_view s, size_t n) {
  std::vector<std::string> out;
  if (n == 0) n = 1;
  size_t i = 0;
  while (i < s.size()) {
    auto continuation = [&](size_t k) {
      return k < s.size() && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80;
    };
    // Never split a UTF-8 character: back up to its start, or, when the character is longer
    // than `n`, take it whole.
    size_t end = std::min(s.size(), i + n);
    while (end > i && continuation(end)) --end;
    if (end == i) {
      end = std::min(s.size(), i + n);
      while (continuation(end)) ++end;
    }
    out.emplace_back(s.substr(i, end - i));
    i = end;
  }
  return out;
}

std::string SettledPrefix(std::string_view text, const std::vector<std::string>& stop,
                          const std::vector<std::string_view>& holds) {
  std::string t(text);
  if (CutAtStop(&t, stop)) return t;
  // The longest tail that is a proper prefix of a stop string or a hold.
  size_t keep = t.size();
  auto hold_back = [&](std::string_view h) {
    for (size_t n = std::min(h.size() - 1, t.size()); n > 0; --n) {
      if (std::string_view(t).substr(t.size() - n) == h.substr(0, n)) {
        keep = std::min(keep, t.size() - n);
        break;
      }
    }
  };
  for (const std::string& h : stop) {
    if (!h.empty()) hold_back(h);
  }
  for (std::string_view h : holds) {
    if (!h.empty()) hold_back(h);
  }
  // Not inside a UTF-8 character: back up over a lead byte whose sequence is not complete.
  for (size_t back = 1; back <= 3 && back <= keep; ++back) {
    const auto c = static_cast<unsigned char>(t[keep - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len > back) keep -= back;
    break;
  }
  t.resize(keep);
  return t;
}

namespace {

// ---- A call's arguments as they are written (the streamed tool calls) ----
//
// A tolerant mirror of text::ParseModelOutput's official-dialect reader (src/text/call_parser.cc)
// that reads a call whose text may stop anywhere: each value is complete, still being written
// (kMore), or already not what the parser takes (kBad: the output can no longer be a valid call).
// Values are typed by the schema as the parser types them, and rendered as the answer's JSON
// (nlohmann's dump of the parsed arguments: object keys sorted) only as far as settled.

enum class Scan { kDone, kMore, kBad };

struct Partial {
  enum class Kind { kNone, kObject, kArray, kString, kBare };
  Kind kind = Kind::kNone;  // kNone: not begun
  const text::Schema* schema = nullptr;  // the schema the parser types the value with (or null)
  bool done = false;
  std::string raw;  // kString: the content settled so far (all of it once done); kBare: the token
  std::vector<std::string> keys;  // kObject: the keys written, in order
  std::vector<Partial> values;    // kObject: their values; kArray: the items
};

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

class CallReader {
 public:
  CallReader(std::string_view text, size_t pos) : text_(text), pos_(pos) {}
  size_t pos() const { return pos_; }

  // After <start_function_call>: "call:NAME", NAME snapped to the catalog (*tool once known).
  Scan Header(const text::ToolCatalog& catalog, const text::Tool** tool) {
    SkipSpaces();
    const int call = PeekIs("call:");
    if (call < 0) return Scan::kMore;
    if (call == 0) return Scan::kBad;
    pos_ += 5;
    const size_t name_at = pos_;
    while (!AtEnd() && text_[pos_] != '{') {
      const char c = text_[pos_];
      if (c == '<' || c == '}' || c == ',' || c == '\n') return Scan::kBad;
      if (pos_ - name_at >= 256) return Scan::kBad;  // the parser's kMaxNameBytes
      ++pos_;
    }
    if (AtEnd()) return Scan::kMore;
    std::string_view name = text_.substr(name_at, pos_ - name_at);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (name.empty() || !text::IsValidUtf8(name)) return Scan::kBad;
    StatusOr<const text::Tool*> t = text::SnapToolName(catalog, name);
    if (!t.ok()) return Scan::kBad;
    *tool = *t;
    return Scan::kDone;
  }

  // The arguments object (at its '{').
  Scan Arguments(const text::Tool& tool, Partial* out) {
    return Object(&tool.parameters, 1, out);
  }

  // After the arguments: <end_function_call>, or the end of the text.
  Scan End() {
    SkipSpaces();
    const int end = PeekIs(text::kEndCall);
    if (end == 1) {
      pos_ += text::kEndCall.size();
      return Scan::kDone;
    }
    return end < 0 ? Scan::kMore : Scan::kBad;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  void SkipSpaces() {
    while (!AtEnd() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' ||
                        text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  // 1: the text at pos_ starts with s; 0: it does not; -1: it ends in a proper prefix of s.
  int PeekIs(std::string_view s) const {
    const std::string_view rest = text_.substr(pos_);
    if (rest.substr(0, s.size()) == s) return 1;
    return rest.size() < s.size() && s.substr(0, rest.size()) == rest ? -1 : 0;
  }
  Scan Expect(char c) {
    SkipSpaces();
    if (AtEnd()) return Scan::kMore;
    if (text_[pos_] != c) return Scan::kBad;
    ++pos_;
    return Scan::kDone;
  }

  Scan Object(const text::Schema* schema, int depth, Partial* out) {
    out->kind = Partial::Kind::kObject;
    out->schema = schema;
    if (depth > text::kMaxValueDepth) return Scan::kBad;
    if (Scan s = Expect('{'); s != Scan::kDone) return s;
    SkipSpaces();
    if (AtEnd()) return Scan::kMore;
    if (text_[pos_] == '}') {
      ++pos_;
      out->done = true;
      return Scan::kDone;
    }
    while (true) {
      std::string key;
      if (Scan s = Key(&key); s != Scan::kDone) return s;
      if (std::find(out->keys.begin(), out->keys.end(), key) != out->keys.end()) return Scan::kBad;
      const text::Schema* sub = nullptr;
      if (schema != nullptr) {
        auto it = schema->properties.find(key);
        if (it != schema->properties.end()) sub = &it->second;
      }
      out->keys.push_back(std::move(key));
      out->values.emplace_back();
      if (Scan s = Value(sub, depth + 1, &out->values.back()); s != Scan::kDone) return s;
      SkipSpaces();
      if (AtEnd()) return Scan::kMore;
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] != '}') return Scan::kBad;
      ++pos_;
      out->done = true;
      return Scan::kDone;
    }
  }

  Scan Key(std::string* key) {
    SkipSpaces();
    if (AtEnd()) return Scan::kMore;
    const size_t at = pos_;
    std::string_view k;
    const int escaped = PeekIs(text::kEscape);
    if (escaped < 0) return Scan::kMore;
    if (escaped == 1) {
      pos_ += text::kEscape.size();
      const size_t end = text_.find(text::kEscape, pos_);
      if (end == std::string_view::npos) return Scan::kMore;
      k = text_.substr(pos_, end - pos_);
      pos_ = end + text::kEscape.size();
    } else {
      while (!AtEnd() && text_[pos_] != ':') {
        const char c = text_[pos_];
        if (c == ',' || c == '{' || c == '}' || c == '[' || c == ']' || c == '<') return Scan::kBad;
        ++pos_;
      }
      if (AtEnd()) return Scan::kMore;
      k = text_.substr(at, pos_ - at);
      while (!k.empty() && k.back() == ' ') k.remove_suffix(1);
    }
    if (k.empty() || !text::IsValidUtf8(k)) return Scan::kBad;
    *key = std::string(k);
    return Expect(':');
  }

  Scan Array(const text::Schema* schema, int depth, Partial* out) {
    out->kind = Partial::Kind::kArray;
    out->schema = schema;
    if (depth > text::kMaxValueDepth) return Scan::kBad;
    if (Scan s = Expect('['); s != Scan::kDone) return s;
    const text::Schema* items = schema != nullptr ? schema->items.get() : nullptr;
    SkipSpaces();
    if (AtEnd()) return Scan::kMore;
    if (text_[pos_] == ']') {
      ++pos_;
      out->done = true;
      return Scan::kDone;
    }
    while (true) {
      out->values.emplace_back();
      if (Scan s = Value(items, depth + 1, &out->values.back()); s != Scan::kDone) return s;
      SkipSpaces();
      if (AtEnd()) return Scan::kMore;
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] != ']') return Scan::kBad;
      ++pos_;
      out->done = true;
      return Scan::kDone;
    }
  }

  Scan Value(const text::Schema* schema, int depth, Partial* out) {
    if (depth > text::kMaxValueDepth) return Scan::kBad;
    SkipSpaces();
    if (AtEnd()) return Scan::kMore;
    const int escaped = PeekIs(text::kEscape);
    if (escaped < 0) return Scan::kMore;
    if (escaped == 1) {
      out->kind = Partial::Kind::kString;
      out->schema = schema;
      pos_ += text::kEscape.size();
      const size_t end = text_.find(text::kEscape, pos_);
      std::string_view s = text_.substr(pos_, end == std::string_view::npos ? end : end - pos_);
      if (end == std::string_view::npos) {
        // Still open: hold back a tail that may be the closing <escape> or the start of a
        // character.
        for (size_t n = std::min(s.size(), text::kEscape.size() - 1); n > 0; --n) {
          if (s.substr(s.size() - n) == text::kEscape.substr(0, n)) {
            s.remove_suffix(n);
            break;
          }
        }
        s = s.substr(0, text::CompleteUtf8Prefix(s));
        pos_ = text_.size();
      } else {
        pos_ = end + text::kEscape.size();
        out->done = true;
      }
      if (!text::IsValidUtf8(s)) return Scan::kBad;
      out->raw = std::string(s);
      return out->done ? Scan::kDone : Scan::kMore;
    }
    const char c = text_[pos_];
    if (c == '{') {
      return Object(schema != nullptr && schema->type != "OBJECT" ? nullptr : schema, depth, out);
    }
    if (c == '[') {
      return Array(schema != nullptr && schema->type != "ARRAY" ? nullptr : schema, depth, out);
    }
    // A bare token (number, boolean, null, word): complete once a delimiter follows.
    out->kind = Partial::Kind::kBare;
    out->schema = schema;
    const size_t at = pos_;
    while (!AtEnd() && text_[pos_] != ',' && text_[pos_] != '}' && text_[pos_] != ']' &&
           text_[pos_] != '<') {
      ++pos_;
    }
    if (AtEnd()) return Scan::kMore;
    std::string_view tok = text_.substr(at, pos_ - at);
    while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\n')) tok.remove_suffix(1);
    if (tok.empty() || !text::IsValidUtf8(tok)) return Scan::kBad;
    out->raw = std::string(tok);
    out->done = true;
    return Scan::kDone;
  }

  std::string_view text_;
  size_t pos_;
};

// Appends the settled part of `v`'s JSON text, as nlohmann dumps the parsed value; true when it
// is the whole of it.
bool Render(const Partial& v, std::string* out) {
  switch (v.kind) {
    case Partial::Kind::kNone:
      return false;
    case Partial::Kind::kString:
      if (v.done) {
        *out += Dump(text::CoerceScalar(v.schema, v.raw, json(v.raw), /*was_escaped=*/true));
        return true;
      }
      // Only a string typed STRING (or untyped) stays a string whatever its content; a number
      // or boolean written as a string is sent once it is closed.
      if (v.schema == nullptr || v.schema->type == "STRING") {
        std::string s = Dump(json(v.raw));
        s.pop_back();  // the closing quote
        *out += s;
      }
      return false;
    case Partial::Kind::kBare: {
      if (!v.done) return false;
      json natural;
      if (!text::ParseJsonNumber(v.raw, &natural)) {
        if (v.raw == "true") {
          natural = true;
        } else if (v.raw == "false") {
          natural = false;
        } else if (v.raw == "null") {
          natural = nullptr;
        } else {
          natural = v.raw;
        }
      }
      *out += Dump(text::CoerceScalar(v.schema, v.raw, std::move(natural), /*was_escaped=*/false));
      return true;
    }
    case Partial::Kind::kArray:
      *out += '[';
      for (size_t i = 0; i < v.values.size(); ++i) {
        if (i > 0) *out += ',';
        if (!Render(v.values[i], out)) return false;
      }
      if (!v.done) return false;
      *out += ']';
      return true;
    case Partial::Kind::kObject: {
      *out += '{';
      // The answer's object lists its keys sorted. With declared properties, a valid call has
      // no other keys, so a key is settled once every property sorting before it is written;
      // without, any key may still come, so nothing is until the object closes.
      const bool typed = v.schema != nullptr && v.schema->type == "OBJECT" &&
                         !v.schema->properties.empty();
      if (!typed && !v.done) return false;
      std::vector<std::string> order = v.keys;
      if (typed && !v.done) {
        for (const auto& [key, unused] : v.schema->properties) order.push_back(key);
      }
      std::sort(order.begin(), order.end());
      order.erase(std::unique(order.begin(), order.end()), order.end());
      bool first = true;
      for (const std::string& key : order) {
        const auto at = std::find(v.keys.begin(), v.keys.end(), key);
        if (at == v.keys.end()) {
          if (v.done) continue;
          return false;  // may still be written
        }
        if (!first) *out += ',';
        first = false;
        *out += Dump(json(key));
        *out += ':';
        if (!Render(v.values[static_cast<size_t>(at - v.keys.begin())], out)) return false;
      }
      if (!v.done) return false;
      *out += '}';
      return true;
    }
  }
  return false;
}

// The fewest bytes of a value the call grammar accepts for `s` (an upper bound of its fewest
// tokens: every byte is a token of its own at worst, <escape> one token).
int64_t ShortestValueBytes(const text::Schema& s, int depth = 0) {
  if (!s.enum_values.empty()) {
    int64_t best = -1;
    for (const json& m : s.enum_values) {
      const int64_t n = m.is_string() ? 2 + static_cast<int64_t>(m.get<std::string>().size())
                                      : static_cast<int64_t>(Dump(m).size());
      if (best < 0 || n < best) best = n;
    }
    return best;
  }
  if (s.type == "STRING") return 2;
  if (s.type == "NUMBER" || s.type == "INTEGER") return 1;
  if (s.type == "BOOLEAN") return 5;
  if (s.type == "ARRAY") return 2;
  if (s.type == "OBJECT" && depth <= text::kMaxValueDepth) {
    int64_t n = 2;
    for (const std::string& key : s.required) {
      auto it = s.properties.find(key);
      n += static_cast<int64_t>(key.size()) + 2 +
           (it == s.properties.end() ? 8 : ShortestValueBytes(it->second, depth + 1));
    }
    return n;
  }
  return 16;
}

// An upper bound of the tokens the shortest call of `tools` takes (the grammar's
// MinTokensToFinish of its start, in "required" mode), with room to spare.
int64_t ShortestCallBound(const std::vector<const text::Tool*>& tools) {
  int64_t best = -1;
  for (const text::Tool* t : tools) {
    // <start_function_call> call: NAME {...} <end_function_call>
    const int64_t n =
        1 + 5 + static_cast<int64_t>(t->name.size()) + ShortestValueBytes(t->parameters) + 1;
    if (best < 0 || n < best) best = n;
  }
  return best < 0 ? -1 : 2 * best + 16;
}

}  // namespace

ChatStream::ChatStream(const ChatRequest& request, std::string id, int64_t created,
                       std::string model, int64_t budget)
    : stop_(request.stop),
      none_(request.tool_choice == ToolChoice::kNone),
      include_usage_(request.include_usage),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(created) {
  if (none_ || request.catalog_json.empty()) return;
  auto catalog = text::ParseToolCatalog(request.catalog_json);
  if (!catalog.ok()) return;
  bool certain = request.constrain == ConstrainMode::kAuto;
  if (request.constrain == ConstrainMode::kCall && budget > 0) {
    std::vector<const text::Tool*> admitted;
    for (const text::Tool& t : catalog->tools) {
      if (request.tool_choice != ToolChoice::kNamed || t.name == request.named_tool) {
        admitted.push_back(&t);
      }
    }
    const int64_t bound = ShortestCallBound(admitted);
    certain = bound >= 0 && budget >= bound;
  }
  if (certain) catalog_ = std::make_unique<const text::ToolCatalog>(std::move(*catalog));
}

ChatStream::~ChatStream() = default;

json ChatStream::Chunk(json delta, json finish) const {
  json j = ChunkBase(id_, created_, model_, "chat.completion.chunk");
  j["choices"] = json::array({{{"index", 0},
                               {"delta", std::move(delta)},
                               {"logprobs", nullptr},
                               {"finish_reason", std::move(finish)}}});
  return j;
}

void ChatStream::Role(bool tool_calls, std::vector<std::string>* ev) {
  if (role_sent_) return;
  role_sent_ = true;
  ev->push_back(SseEvent(
      Chunk({{"role", "assistant"}, {"content", tool_calls ? json(nullptr) : json("")}}, nullptr)));
}

std::string ChatStream::CallId(size_t index) const {
  // MakeChatAnswer's ids: "call_<n>_<i>" for the answer "chatcmpl-<n>".
  std::string_view n = id_;
  if (n.substr(0, 9) == "chatcmpl-") n.remove_prefix(9);
  return "call_" + std::string(n) + "_" + std::to_string(index);
}

std::string ChatStream::CallHeader(size_t index, const std::string& id,
                                   const std::string& name) const {
  return SseEvent(Chunk({{"tool_calls", json::array({{{"index", index},
                                                      {"id", id},
                                                      {"type", "function"},
                                                      {"function", {{"name", name},
                                                                    {"arguments", ""}}}}})}},
                        nullptr));
}

std::string ChatStream::CallArguments(size_t index, std::string_view piece) const {
  return SseEvent(Chunk(
      {{"tool_calls", json::array({{{"index", index}, {"function", {{"arguments", piece}}}}})}},
      nullptr));
}

std::vector<std::string> ChatStream::Update(std::string_view output) {
  std::vector<std::string> ev;
  // Every answer's content starts with the text before the first call (MakeChatAnswer): the
  // output's, or, with tools, the parser's, which drops the turn markers.
  const size_t call = output.find(text::kStartCall);
  std::string t(output.substr(0, call));
  std::vector<std::string_view> holds;
  if (call == std::string_view::npos) holds.push_back(text::kStartCall);
  if (!none_) {
    for (std::string_view m : {text::kEndOfTurn, text::kStartResponse, std::string_view("<eos>")}) {
      for (size_t at; (at = t.find(m)) != std::string::npos;) t.erase(at, m.size());
      // Held back after a call too: text after the call joins this text in the content, and
      // the parser drops the markers from the joined text.
      holds.push_back(m);
    }
  }
  const std::string settled = text::ToValidUtf8(SettledPrefix(t, stop_, holds));
  if (settled.size() > sent_.size() && settled.compare(0, sent_.size(), sent_) == 0) {
    Role(false, &ev);
    ev.push_back(SseEvent(Chunk({{"content", settled.substr(sent_.size())}}, nullptr)));
    sent_ = settled;
  }
  if (catalog_ != nullptr && !calls_stopped_) UpdateCalls(output, &ev);
  return ev;
}

void ChatStream::UpdateCalls(std::string_view output, std::vector<std::string>* ev) {
  size_t pos = 0;
  for (size_t index = 0;; ++index) {
    const size_t start = output.find(text::kStartCall, pos);
    if (start == std::string_view::npos) return;
    CallReader reader(output, start + text::kStartCall.size());
    const text::Tool* tool = nullptr;
    Scan s = reader.Header(*catalog_, &tool);
    Partial args;
    if (s == Scan::kDone) s = reader.Arguments(*tool, &args);
    if (s == Scan::kBad) {
      calls_stopped_ = true;  // not a valid call: the answer will say what it is
      return;
    }
    if (tool != nullptr) {
      if (index == calls_.size()) {
        Role(true, ev);
        calls_.push_back({CallId(index), tool->name, ""});
        ev->push_back(CallHeader(index, calls_.back().id, tool->name));
      }
      std::string text;
      Render(args, &text);
      SentCall& sent = calls_[index];
      if (sent.name != tool->name || text.compare(0, sent.arguments.size(), sent.arguments) != 0) {
        calls_stopped_ = true;  // cannot happen: what was settled changed
        return;
      }
      if (text.size() > sent.arguments.size()) {
        ev->push_back(CallArguments(index, std::string_view(text).substr(sent.arguments.size())));
        sent.arguments = std::move(text);
      }
    }
    if (s == Scan::kDone) s = reader.End();
    if (s == Scan::kBad) calls_stopped_ = true;
    if (s != Scan::kDone) return;
    pos = reader.pos();
  }
}

std::vector<std::string> ChatStream::Finish(const ChatAnswer& a) {
  std::vector<std::string> ev;
  // The calls sent while decoding must be the answer's first calls, their arguments the start
  // of the answer's: the call grammar holds this (see openai.h); if not, say so.
  bool agree = calls_.size() <= a.tool_calls.size();
  for (size_t i = 0; agree && i < calls_.size(); ++i) {
    const ChatAnswer::ToolCall& c = a.tool_calls[i];
    agree = c.id == calls_[i].id && c.name == calls_[i].name &&
            c.arguments.compare(0, calls_[i].arguments.size(), calls_[i].arguments) == 0;
  }
  if (!agree) {
    ApiError e;
    e.http_status = 500;
    e.type = "server_error";
    e.message = "the answer differs from the tool calls already streamed";
    ev.push_back(SseEvent(e.ToJson()));
    return ev;
  }
  Role(!a.tool_calls.empty(), &ev);
  // What the answer's content holds beyond the part sent (which it starts with).
  if (a.content.size() > sent_.size() && a.content.compare(0, sent_.size(), sent_) == 0) {
    for (const std::string& piece : Fragments(std::string_view(a.content).substr(sent_.size()), 16)) {
      ev.push_back(SseEvent(Chunk({{"content", piece}}, nullptr)));
    }
  }
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    const ChatAnswer::ToolCall& c = a.tool_calls[i];
    size_t sent = 0;
    if (i < calls_.size()) {
      sent = calls_[i].arguments.size();
    } else {
      ev.push_back(CallHeader(i, c.id, c.name));
    }
    for (const std::string& piece : Fragments(std::string_view(c.arguments).substr(sent), 16)) {
      ev.push_back(CallArguments(i, piece));
    }
  }
  ev.push_back(SseEvent(Chunk(json::object(), a.finish_reason)));
  if (include_usage_) {
    json j = ChunkBase(id_, created_, model_, "chat.completion.chunk");
    j["choices"] = json::array();
    j["usage"] = Usage(a.prompt_tokens, a.completion_tokens);
    ev.push_back(SseEvent(j));
  }
  ev.push_back("data: [DONE]\n\n");
  return ev;
}

std::vector<std::string> ChatCompletionEvents(const ChatAnswer& a, std::string_view id,
                                              int64_t created, std::string_view model,
                                              bool include_usage) {
  ChatRequest r;
  r.include_usage = include_usage;
  return ChatStream(r, std::string(id), created, std::string(model)).Finish(a);
}

json CompletionJson(const TextAnswer& a, std::string_view id, int64_t created,
                    std::string_view model) {
  json j = ChunkBase(id, created, model, "text_completion");
  j["choices"] = json::array({{{"index", 0},
                               {"text", text::ToValidUtf8(a.text)},
                               {"logprobs", nullptr},
                               {"finish_reason", a.finish_reason}}});
  j["usage"] = Usage(a.prompt_tokens, a.completion_tokens);
  return j;
}

TextStream::TextStream(std::vector<std::string> stop, bool include_usage, std::string id,
                       int64_t created, std::string model)
    : stop_(std::move(stop)),
      include_usage_(include_usage),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(created) {}

std::string TextStream::Event(std::string_view text, json finish) const {
  json j = ChunkBase(id_, created_, model_, "text_completion");
  j["choices"] = json::array({{{"index", 0},
                               {"text", text},
                               {"logprobs", nullptr},
                               {"finish_reason", std::move(finish)}}});
  return SseEvent(j);
}

std::vector<std::string> TextStream::Update(std::string_view text) {
  std::vector<std::string> ev;
  const std::string settled = text::ToValidUtf8(SettledPrefix(text, stop_, {}));
  if (settled.size() > sent_.size() && settled.compare(0, sent_.size(), sent_) == 0) {
    ev.push_back(Event(std::string_view(settled).substr(sent_.size()), nullptr));
    sent_ = settled;
  }
  return ev;
}

std::vector<std::string> TextStream::Finish(const TextAnswer& a) {
  std::vector<std::string> ev;
  const std::string all = text::ToValidUtf8(a.text);
  if (all.size() > sent_.size() && all.compare(0, sent_.size(), sent_) == 0) {
    for (const std::string& piece : Fragments(std::string_view(all).substr(sent_.size()), 16)) {
      ev.push_back(Event(piece, nullptr));
    }
  }
  ev.push_back(Event("", a.finish_reason));
  if (include_usage_) {
    json j = ChunkBase(id_, created_, model_, "text_completion");
    j["choices"] = json::array();
    j["usage"] = Usage(a.prompt_tokens, a.completion_tokens);
    ev.push_back(SseEvent(j));
  }
  ev.push_back("data: [DONE]\n\n");
  return ev;
}

std::vector<std::string> CompletionEvents(const TextAnswer& a, std::string_view id,
                                          int64_t created, std::string_view model,
                                          bool include_usage) {
  return TextStream({}, include_usage, std::string(id), created, std::string(model)).Finish(a);
}

}  // namespace fg::serve
