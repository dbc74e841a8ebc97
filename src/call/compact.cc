#include "src/call/compact.h"

#include <cctype>

#include "src/text/function_prompt.h"

namespace fg::call {

namespace {

Status Bad(size_t at, const std::string& what) {
  return InvalidArgumentError("compact: offset " + std::to_string(at) + ": " + what);
}

void SkipSpaces(std::string_view t, size_t* i) {
  while (*i < t.size() && (t[*i] == ' ' || t[*i] == '\t' || t[*i] == '\n')) ++*i;
}

}  // namespace

StatusOr<text::ParsedOutput> ParseCompactOutput(std::string_view t,
                                                const std::vector<std::string>& tool_map,
                                                const text::ToolCatalog& catalog) {
  // Rewrites every <tool_N>(...) into <start_function_call>call:NAME{...}<end_function_call>.
  std::string official;
  size_t i = 0;
  while (i < t.size()) {
    const size_t open = t.find("<tool_", i);
    if (open == std::string_view::npos) {
      official.append(t.substr(i));
      break;
    }
    official.append(t.substr(i, open - i));
    size_t j = open + 6;
    size_t n = 0;
    const size_t digits = j;
    while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j])) && j - digits < 6) {
      n = n * 10 + static_cast<size_t>(t[j] - '0');
      ++j;
    }
    if (j == digits || j >= t.size() || t[j] != '>') return Bad(open, "malformed <tool_N> token");
    if (n >= tool_map.size() || tool_map[n].empty()) {
      return Bad(open, "<tool_" + std::to_string(n) + "> is not in the tool map");
    }
    ++j;
    SkipSpaces(t, &j);
    if (j >= t.size() || t[j] != '(') return Bad(j, "expected '(' after <tool_N>");
    ++j;
    official += text::kStartCall;
    official += "call:" + tool_map[n] + "{";
    bool first = true;
    for (;;) {
      SkipSpaces(t, &j);
      if (j < t.size() && t[j] == ')') {
        ++j;
        break;
      }
      if (!first) {
        if (j >= t.size() || t[j] != ',') return Bad(j, "expected ',' or ')'");
        ++j;
        SkipSpaces(t, &j);
      }
      first = false;
      const size_t key0 = j;
      while (j < t.size() && (std::isalnum(static_cast<unsigned char>(t[j])) || t[j] == '_' ||
                              t[j] == '-' || t[j] == '.')) {
        ++j;
      }
      if (j == key0) return Bad(j, "expected an argument name");
      const std::string_view key = t.substr(key0, j - key0);
      SkipSpaces(t, &j);
      if (j >= t.size() || t[j] != '=') return Bad(j, "expected '=' after '" + std::string(key) + "'");
      ++j;
      SkipSpaces(t, &j);
      if (!official.empty() && official.back() != '{') official += ',';
      official.append(key);
      official += ':';
      if (j < t.size() && t[j] == '"') {
        ++j;
        std::string value;
        while (j < t.size() && t[j] != '"') {
          if (t[j] == '\\' && j + 1 < t.size()) ++j;
          value += t[j++];
        }
        if (j >= t.size()) return Bad(j, "unterminated string");
        ++j;
        if (value.find(text::kEscape) != std::string::npos) return Bad(j, "<escape> in a string");
        official += text::kEscape;
        official += value;
        official += text::kEscape;
      } else {
        const size_t v0 = j;
        while (j < t.size() && t[j] != ',' && t[j] != ')' && t[j] != '<') ++j;
        std::string_view v = t.substr(v0, j - v0);
        while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
        if (v.empty()) return Bad(v0, "expected a value");
        official.append(v);
      }
    }
    official += "}";
    official += text::kEndCall;
    SkipSpaces(t, &j);
    if (t.substr(j, 5) == "<end>") j += 5;
    i = j;
  }
  return text::ParseModelOutput(official, &catalog);
}

}  // namespace fg::call
