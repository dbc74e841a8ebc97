#include "src/text/call_parser.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>

#include "src/text/function_prompt.h"

namespace fg::text {
namespace {

using nlohmann::json;

constexpr size_t kMaxNameBytes = 256;

// Length of the valid UTF-8 sequence at s[i], or 0 when it is invalid (overlong forms,
// surrogates and code points above U+10FFFF are invalid, as nlohmann's dump() would throw).
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

// Offset of the first invalid byte, or npos.
size_t FindInvalidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

void AppendSanitized(std::string& out, std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
}

std::string Normalize(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

// A strict JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, finite.
bool ParseJsonNumber(std::string_view tok, json* out) {
  size_t i = 0;
  const auto digits = [&] {
    const size_t start = i;
    while (i < tok.size() && std::isdigit(static_cast<unsigned char>(tok[i]))) ++i;
    return i - start;
  };
  if (i < tok.size() && tok[i] == '-') ++i;
  const size_t int_start = i;
  const size_t int_digits = digits();
  if (int_digits == 0 || (int_digits > 1 && tok[int_start] == '0')) return false;
  bool integral = true;
  if (i < tok.size() && tok[i] == '.') {
    ++i;
    if (digits() == 0) return false;
    integral = false;
  }
  if (i < tok.size() && (tok[i] == 'e' || tok[i] == 'E')) {
    ++i;
    if (i < tok.size() && (tok[i] == '+' || tok[i] == '-')) ++i;
    if (digits() == 0) return false;
    integral = false;
  }
  if (i != tok.size()) return false;
  const std::string s(tok);
  if (integral) {
    errno = 0;
    const long long v = std::strtoll(s.c_str(), nullptr, 10);
    if (errno == 0) {
      *out = static_cast<int64_t>(v);
      return true;
    }
  }
  const double d = std::strtod(s.c_str(), nullptr);
  if (!std::isfinite(d)) return false;
  *out = d;
  return true;
}

// Typed view of a parsed scalar: `raw` is the text as written, `value` its natural reading.
json CoerceScalar(const Schema* schema, std::string_view raw, json value, bool was_escaped) {
  if (schema == nullptr) return value;
  const std::string& t = schema->type;
  if (t == "STRING") return json(std::string(raw));
  if (t == "NUMBER" || t == "INTEGER") {
    json n;
    if (was_escaped) {
      std::string_view trimmed = raw;
      while (!trimmed.empty() && trimmed.front() == ' ') trimmed.remove_prefix(1);
      while (!trimmed.empty() && trimmed.back() == ' ') trimmed.remove_suffix(1);
      if (ParseJsonNumber(trimmed, &n)) value = n;
    }
    if (t == "INTEGER" && value.is_number_float()) {
      const double d = value.get<double>();
      if (d == std::floor(d) && std::fabs(d) < 9.0e18) value = static_cast<int64_t>(d);
    }
    return value;
  }
  if (t == "BOOLEAN" && value.is_string()) {
    std::string lower;
    for (char c : raw) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "true") return json(true);
    if (lower == "false") return json(false);
  }
  return value;
}

namespace {

// One parser for both dialects (docs/model.md). `tool_map` null: the official dialect,
// <start_function_call>call:NAME{key:<escape>v<escape>,...}<end_function_call>. Non-null: the
// compact one, <tool_N>(key="v",...)<end>. They differ only in the call header, the end marker,
// the delimiters of the top-level object, keys (':' vs '=', <escape>d keys only in official),
// strings (<escape> vs '"' with \" \\) and ')' also ending a bare token in compact.
class Parser {
 public:
  Parser(std::string_view text, const ToolCatalog* catalog,
         const std::vector<std::string>* tool_map = nullptr)
      : text_(text), catalog_(catalog), tool_map_(tool_map) {}

  StatusOr<ParsedOutput> Run() {
    static constexpr std::string_view kToolPrefix = "<tool_";
    static constexpr std::string_view kCompactEnd = "<end>";
    const std::string_view header = compact() ? kToolPrefix : kStartCall;
    const std::string_view end_marker = compact() ? kCompactEnd : kEndCall;
    ParsedOutput out;
    std::string content;
    while (true) {
      const size_t start = text_.find(header, pos_);
      if (start == std::string_view::npos) {
        content.append(text_.substr(pos_));
        break;
      }
      content.append(text_.substr(pos_, start - pos_));
      pos_ = start + header.size();
      Call call;
      const Schema* schema = nullptr;
      if (compact()) {
        FG_RETURN_IF_ERROR(ParseToolToken(start, &call, &schema));
        FG_ASSIGN_OR_RETURN(call.arguments, ParseObject(schema, 1, '(', ')'));
      } else {
        FG_RETURN_IF_ERROR(ParseCallName(&call, &schema));
        FG_ASSIGN_OR_RETURN(call.arguments, ParseObject(schema, 1, '{', '}'));
      }
      SkipSpaces();
      if (Peek(end_marker)) {
        pos_ += end_marker.size();
      } else if (!AtEnd()) {
        return Error("expected " + std::string(end_marker));
      }
      out.calls.push_back(std::move(call));
    }
    for (std::string_view marker : {kEndOfTurn, kStartResponse, std::string_view("<eos>")}) {
      for (size_t at; (at = content.find(marker)) != std::string::npos;) {
        content.erase(at, marker.size());
      }
    }
    AppendSanitized(out.content, content);
    return out;
  }

 private:
  bool compact() const { return tool_map_ != nullptr; }
  Status Error(const std::string& what) const { return ErrorAt(pos_, what); }
  Status ErrorAt(size_t at, const std::string& what) const {
    return InvalidArgumentError("offset " + std::to_string(at) + ": " + what);
  }
  bool Peek(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }
  bool AtEnd() const { return pos_ >= text_.size(); }
  void SkipSpaces() {
    while (!AtEnd() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' ||
                        text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  Status Expect(char c) {
    SkipSpaces();
    if (AtEnd()) return Error(std::string("unexpected end of text, expected '") + c + "'");
    if (text_[pos_] != c) return Error(std::string("expected '") + c + "'");
    ++pos_;
    return OkStatus();
  }

  // Official header after <start_function_call>: "call:NAME", NAME snapped to the catalog.
  Status ParseCallName(Call* call, const Schema** schema) {
    SkipSpaces();
    if (!Peek("call:")) return Error("expected \"call:\"");
    pos_ += 5;
    const size_t name_at = pos_;
    while (!AtEnd() && text_[pos_] != '{') {
      const char c = text_[pos_];
      if (c == '<' || c == '}' || c == ',' || c == '\n') return Error("expected '{' after name");
      if (pos_ - name_at >= kMaxNameBytes) return ErrorAt(name_at, "function name too long");
      ++pos_;
    }
    if (AtEnd()) return Error("unexpected end of text, expected '{' after name");
    std::string_view name = text_.substr(name_at, pos_ - name_at);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (name.empty()) return ErrorAt(name_at, "empty function name");
    if (FindInvalidUtf8(name) != std::string_view::npos) {
      return ErrorAt(name_at, "function name is not valid UTF-8");
    }
    if (catalog_ != nullptr) {
      StatusOr<const Tool*> tool = SnapToolName(*catalog_, name);
      if (!tool.ok()) return ErrorAt(name_at, tool.status().message());
      call->name = (*tool)->name;
      *schema = &(*tool)->parameters;
    } else {
      call->name = std::string(name);
    }
    return OkStatus();
  }

  // Compact header after "<tool_" (found at `start`): "N>", N indexing the tool map.
  Status ParseToolToken(size_t start, Call* call, const Schema** schema) {
    const size_t digits_at = pos_;
    size_t n = 0;
    while (!AtEnd() && std::isdigit(static_cast<unsigned char>(text_[pos_])) &&
           pos_ - digits_at < 6) {
      n = n * 10 + static_cast<size_t>(text_[pos_] - '0');
      ++pos_;
    }
    if (pos_ == digits_at || AtEnd() || text_[pos_] != '>') {
      return ErrorAt(start, "malformed <tool_N> token");
    }
    ++pos_;
    if (n >= tool_map_->size()) {
      return ErrorAt(start, "<tool_" + std::to_string(n) + "> is not in the tool map");
    }
    call->name = (*tool_map_)[n];
    if (catalog_ != nullptr) {
      const Tool* tool = catalog_->Find(call->name);
      if (tool == nullptr) {
        return ErrorAt(start, "tool map names \"" + call->name + "\", which is not in the catalog");
      }
      *schema = &tool->parameters;
    }
    return OkStatus();
  }

  // A key and its separator (official "key:" or "<escape>key<escape>:", compact "key=").
  // `*dup_at` is where a duplicate of this key is reported: official keeps the offset it is
  // given (before any spaces), compact moves it to the key itself.
  StatusOr<std::string> ParseKey(size_t* dup_at) {
    SkipSpaces();
    const size_t at = pos_;
    std::string_view key;
    bool delimited = false;  // an <escape>d key: its content is taken verbatim
    if (compact()) {
      *dup_at = at;
      while (!AtEnd() && text_[pos_] != '=') {
        const char c = text_[pos_];
        if (c == ',' || c == '(' || c == ')' || c == '{' || c == '}' || c == '[' || c == ']' ||
            c == '"' || c == '<') {
          return Error("expected '=' after key");
        }
        ++pos_;
      }
      if (AtEnd()) return Error("unexpected end of text, expected '='");
    } else if (Peek(kEscape)) {
      pos_ += kEscape.size();
      const size_t end = text_.find(kEscape, pos_);
      if (end == std::string_view::npos) return ErrorAt(at, "unterminated <escape> key");
      key = text_.substr(pos_, end - pos_);
      pos_ = end + kEscape.size();
      delimited = true;
    } else {
      while (!AtEnd() && text_[pos_] != ':') {
        const char c = text_[pos_];
        if (c == ',' || c == '{' || c == '}' || c == '[' || c == ']' || c == '<') {
          return Error("expected ':' after key");
        }
        ++pos_;
      }
    }
    if (!delimited) {
      key = text_.substr(at, pos_ - at);
      while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
    }
    if (key.empty()) return ErrorAt(at, "empty key");
    if (FindInvalidUtf8(key) != std::string_view::npos) return ErrorAt(at, "key is not valid UTF-8");
    FG_RETURN_IF_ERROR(Expect(compact() ? '=' : ':'));
    return std::string(key);
  }

  // The string at pos_ (official <escape>...<escape> verbatim, compact "..." with \" and \\).
  StatusOr<std::string> ParseString() {
    const size_t at = pos_;
    if (!compact()) {
      pos_ += kEscape.size();
      const size_t end = text_.find(kEscape, pos_);
      if (end == std::string_view::npos) return ErrorAt(at, "unterminated <escape> string");
      const std::string_view s = text_.substr(pos_, end - pos_);
      pos_ = end + kEscape.size();
      const size_t bad = FindInvalidUtf8(s);
      if (bad != std::string_view::npos) {
        return ErrorAt(at + kEscape.size() + bad, "string is not valid UTF-8");
      }
      return std::string(s);
    }
    ++pos_;
    std::string s;
    while (true) {
      if (AtEnd()) return ErrorAt(at, "unterminated string");
      const char d = text_[pos_++];
      if (d == '"') break;
      if (d == '\\') {
        if (AtEnd()) return ErrorAt(at, "unterminated string");
        const char e = text_[pos_++];
        if (e != '"' && e != '\\') return ErrorAt(pos_ - 2, "unknown escape in string");
        s += e;
      } else {
        s += d;
      }
    }
    if (FindInvalidUtf8(s) != std::string_view::npos) {
      return ErrorAt(at + 1, "string is not valid UTF-8");
    }
    return s;
  }

  // `open`/`close`: the call's own arguments use the dialect's delimiters, nested objects {}.
  StatusOr<json> ParseObject(const Schema* schema, int depth, char open, char close) {
    if (depth > kMaxValueDepth) return Error("values nested too deeply");
    FG_RETURN_IF_ERROR(Expect(open));
    json obj = json::object();
    SkipSpaces();
    if (!AtEnd() && text_[pos_] == close) {
      ++pos_;
      return obj;
    }
    while (true) {
      size_t key_at = pos_;
      FG_ASSIGN_OR_RETURN(std::string key, ParseKey(&key_at));
      if (obj.contains(key)) return ErrorAt(key_at, "duplicate key \"" + key + "\"");
      const Schema* sub = nullptr;
      if (schema != nullptr) {
        auto it = schema->properties.find(key);
        if (it != schema->properties.end()) sub = &it->second;
      }
      FG_ASSIGN_OR_RETURN(json value, ParseValue(sub, depth + 1));
      obj[key] = std::move(value);
      SkipSpaces();
      if (AtEnd()) {
        return Error(std::string("unexpected end of text, expected ',' or '") + close + "'");
      }
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == close) {
        ++pos_;
        return obj;
      }
      return Error(std::string("expected ',' or '") + close + "'");
    }
  }

  StatusOr<json> ParseArray(const Schema* schema, int depth) {
    if (depth > kMaxValueDepth) return Error("values nested too deeply");
    FG_RETURN_IF_ERROR(Expect('['));
    const Schema* items = schema != nullptr ? schema->items.get() : nullptr;
    json arr = json::array();
    SkipSpaces();
    if (!AtEnd() && text_[pos_] == ']') {
      ++pos_;
      return arr;
    }
    while (true) {
      FG_ASSIGN_OR_RETURN(json value, ParseValue(items, depth + 1));
      arr.push_back(std::move(value));
      SkipSpaces();
      if (AtEnd()) return Error("unexpected end of text, expected ',' or ']'");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == ']') {
        ++pos_;
        return arr;
      }
      return Error("expected ',' or ']'");
    }
  }

  StatusOr<json> ParseValue(const Schema* schema, int depth) {
    if (depth > kMaxValueDepth) return Error("values nested too deeply");
    SkipSpaces();
    if (AtEnd()) return Error("unexpected end of text, expected a value");
    const size_t at = pos_;
    if (compact() ? text_[pos_] == '"' : Peek(kEscape)) {
      FG_ASSIGN_OR_RETURN(std::string s, ParseString());
      json natural(s);
      return CoerceScalar(schema, s, std::move(natural), /*was_escaped=*/true);
    }
    const char c = text_[pos_];
    const Schema* same_kind = schema;
    if (c == '{') {
      if (schema != nullptr && schema->type != "OBJECT") same_kind = nullptr;
      return ParseObject(same_kind, depth, '{', '}');
    }
    if (c == '[') {
      if (schema != nullptr && schema->type != "ARRAY") same_kind = nullptr;
      return ParseArray(same_kind, depth);
    }
    // A bare token: number, boolean, null, or (leniently) an unescaped word.
    while (!AtEnd() && text_[pos_] != ',' && text_[pos_] != '}' && text_[pos_] != ']' &&
           text_[pos_] != '<' && !(compact() && text_[pos_] == ')')) {
      ++pos_;
    }
    std::string_view tok = text_.substr(at, pos_ - at);
    while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\n')) tok.remove_suffix(1);
    if (tok.empty()) return ErrorAt(at, "expected a value");
    const size_t bad = FindInvalidUtf8(tok);
    if (bad != std::string_view::npos) return ErrorAt(at + bad, "value is not valid UTF-8");
    json natural;
    if (!ParseJsonNumber(tok, &natural)) {
      if (tok == "true") {
        natural = true;
      } else if (tok == "false") {
        natural = false;
      } else if (tok == "null") {
        natural = nullptr;
      } else {
        natural = std::string(tok);
      }
    }
    return CoerceScalar(schema, tok, std::move(natural), /*was_escaped=*/false);
  }

  std::string_view text_;
  const ToolCatalog* catalog_;
  const std::vector<std::string>* tool_map_;  // null: the official dialect
  size_t pos_ = 0;
};

std::string TypeOf(const json& v) {
  if (v.is_string()) return "STRING";
  if (v.is_number_integer()) return "INTEGER";
  if (v.is_number()) return "NUMBER";
  if (v.is_boolean()) return "BOOLEAN";
  if (v.is_array()) return "ARRAY";
  if (v.is_object()) return "OBJECT";
  return "NULL";
}

Status ValidateValue(const Schema& s, const json& v, const std::string& path);

Status ValidateObject(const Schema& s, const json& v, const std::string& path) {
  for (const std::string& key : s.required) {
    if (!v.contains(key)) return InvalidArgumentError(path + ": missing required key \"" + key + "\"");
  }
  for (const auto& [key, item] : v.items()) {
    const auto it = s.properties.find(key);
    const std::string sub = path.empty() ? key : path + "." + key;
    if (it == s.properties.end()) return InvalidArgumentError(sub + ": unknown key");
    FG_RETURN_IF_ERROR(ValidateValue(it->second, item, sub));
  }
  return OkStatus();
}

Status ValidateValue(const Schema& s, const json& v, const std::string& path) {
  const std::string t = TypeOf(v);
  const bool fits = t == s.type || (s.type == "NUMBER" && t == "INTEGER");
  if (!fits) return InvalidArgumentError(path + ": expected " + s.type + ", got " + t);
  if (!s.enum_values.empty() &&
      std::find(s.enum_values.begin(), s.enum_values.end(), v) == s.enum_values.end()) {
    return InvalidArgumentError(path + ": " + v.dump() + " is not one of the enum members");
  }
  if (s.type == "ARRAY" && s.items != nullptr) {
    for (size_t i = 0; i < v.size(); ++i) {
      FG_RETURN_IF_ERROR(ValidateValue(*s.items, v[i], path + "[" + std::to_string(i) + "]"));
    }
  }
  if (s.type == "OBJECT" && !s.properties.empty()) return ValidateObject(s, v, path);
  return OkStatus();
}

}  // namespace

json Call::ToJson() const { return json{{"name", name}, {"arguments", arguments}}; }

json ParsedOutput::ToJson() const {
  if (calls.size() == 1) return calls[0].ToJson();
  json arr = json::array();
  for (const Call& c : calls) arr.push_back(c.ToJson());
  return arr;
}

StatusOr<ParsedOutput> ParseModelOutput(std::string_view text, const ToolCatalog* catalog) {
  return Parser(text, catalog).Run();
}

StatusOr<ParsedOutput> ParseCompactOutput(std::string_view text, const ToolCatalog* catalog,
                                          const std::vector<std::string>& tool_map) {
  return Parser(text, catalog, &tool_map).Run();
}

StatusOr<const Tool*> SnapToolName(const ToolCatalog& catalog, std::string_view name) {
  if (const Tool* exact = catalog.Find(name)) return exact;
  const std::string norm = Normalize(name);
  const Tool* found = nullptr;
  for (const Tool& t : catalog.tools) {
    if (Normalize(t.name) == norm && !norm.empty()) {
      if (found != nullptr) {
        return NotFoundError("function name \"" + std::string(name) + "\" is ambiguous");
      }
      found = &t;
    }
  }
  if (found != nullptr) return found;
  if (!norm.empty() && norm.size() <= 2 * 64) {
    size_t best = 3;
    int best_count = 0;
    for (const Tool& t : catalog.tools) {
      const size_t d = EditDistance(norm, Normalize(t.name));
      if (d < best) {
        best = d;
        best_count = 1;
        found = &t;
      } else if (d == best) {
        ++best_count;
      }
    }
    if (found != nullptr && best_count == 1) return found;
    if (found != nullptr) {
      return NotFoundError("function name \"" + std::string(name) + "\" is ambiguous");
    }
  }
  return NotFoundError("unknown function \"" + std::string(name) + "\"");
}

Status ValidateCall(const Tool& tool, const json& arguments) {
  if (!arguments.is_object()) return InvalidArgumentError(tool.name + ": arguments must be an object");
  return ValidateObject(tool.parameters, arguments, tool.name);
}

}  // namespace fg::text
