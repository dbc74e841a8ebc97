// Test helpers for the call grammar (unit tests and tests/model): small vocabularies, token
// lists by text, random arguments, random walks over Allowed(). Header-only, tests only.
#ifndef FGEMMA_TEXT_GRAMMAR_TEST_UTIL_H_
#define FGEMMA_TEXT_GRAMMAR_TEST_UTIL_H_

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/text/call_grammar.h"
#include "src/text/tokenizer.h"
#include "src/text/tool_catalog.h"

namespace fg::text::grammar_test {

// Every schema shape, all required: integer, number and nested arrays (one with maxItems),
// strings, enums (one non-ASCII), booleans, untyped arrays, free objects, nested objects with
// required keys and arrays of objects.
inline constexpr char kEveryShapeCatalog[] = R"([
  {"name":"put_numbers","parameters":{"type":"object","properties":{
     "ids":{"type":"array","items":{"type":"integer"}},
     "weights":{"type":"array","items":{"type":"number"},"maxItems":3},
     "grid":{"type":"array","items":{"type":"array","items":{"type":"integer"}}},
     "n":{"type":"number"},"i":{"type":"integer"}},
     "required":["ids","weights","grid","n","i"]}},
  {"name":"put_things","parameters":{"type":"object","properties":{
     "name":{"type":"string"},"kind":{"type":"string","enum":["a","bb","\u00e9t\u00e9"]},
     "flag":{"type":"boolean"},"any":{"type":"array"},"free":{"type":"object"},
     "spec":{"type":"object","properties":{"x":{"type":"integer"},
              "tags":{"type":"array","items":{"type":"string"}},
              "deep":{"type":"object","properties":{"y":{"type":"number"}},"required":["y"]}},
             "required":["x","deep"]},
     "rows":{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"},
              "v":{"type":"integer"}},"required":["k","v"]}}},
     "required":["name","kind","flag","spec","rows","any","free"]}}])";

inline std::string SpaceToPiece(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == ' ') {
      out += "\xE2\x96\x81";
    } else {
      out += c;
    }
  }
  return out;
}

// Controls at fixed low ids, the FunctionGemma controls (unless !function_tokens), <tool_N> and
// <end> as user-defined tokens, all 256 byte tokens, printable ASCII, and each word with all its
// prefixes (so BPE can build it), longer ones scoring higher.
inline std::unique_ptr<Tokenizer> SmallTokenizer(const std::vector<std::string>& words,
                                                 int compact_tools, bool function_tokens = true) {
  Vocab v;
  v.add_space_prefix = false;
  v.add_bos = false;
  std::set<std::string> have;
  auto add = [&](const std::string& t, TokenType type, float score) {
    if (!have.insert(t).second) return;
    v.tokens.push_back(t);
    v.types.push_back(static_cast<int32_t>(type));
    v.scores.push_back(score);
  };
  add("<pad>", TokenType::kControl, 0);
  add("<eos>", TokenType::kControl, 0);
  add("<bos>", TokenType::kControl, 0);
  add("<unk>", TokenType::kUnknown, 0);
  v.pad = 0;
  v.eos = 1;
  v.bos = 2;
  v.unk = 3;
  add("<start_of_turn>", TokenType::kControl, 0);
  add("<end_of_turn>", TokenType::kControl, 0);
  add("<mask>", TokenType::kControl, 0);
  add("<unused0>", TokenType::kUnused, 0);
  if (function_tokens) {
    for (const char* t : {"<start_function_declaration>", "<end_function_declaration>",
                          "<start_function_call>", "<end_function_call>",
                          "<start_function_response>", "<end_function_response>", "<escape>"}) {
      add(t, TokenType::kControl, 0);
    }
  }
  for (int n = 0; n < compact_tools; ++n) {
    add("<tool_" + std::to_string(n) + ">", TokenType::kUserDefined, 0);
  }
  if (compact_tools > 0) add("<end>", TokenType::kUserDefined, 0);
  add("\n", TokenType::kUserDefined, 0);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    add(buf, TokenType::kByte, 0);
  }
  for (int c = 0x20; c < 0x7F; ++c) add(SpaceToPiece(std::string(1, static_cast<char>(c))),
                                        TokenType::kNormal, 0);
  for (const std::string& w : words) {
    const std::string p = SpaceToPiece(w);
    for (size_t i = 1; i <= p.size(); ++i) {
      if (i < p.size() && (static_cast<unsigned char>(p[i]) & 0xC0) == 0x80) continue;
      add(p.substr(0, i), TokenType::kNormal, static_cast<float>(i));
    }
  }
  StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(std::move(v));
  if (!t.ok()) {
    std::fprintf(stderr, "SmallTokenizer: %s\n", t.status().ToString().c_str());
    std::abort();
  }
  return *std::move(t);
}

// A token by its text (spaces as U+2581 for normal tokens); aborts the test binary when absent.
inline int32_t Id(const Tokenizer& tok, std::string_view text) {
  std::optional<int32_t> id = tok.Find(text);
  if (!id) id = tok.Find(SpaceToPiece(text));
  if (!id) {
    std::fprintf(stderr, "no token \"%s\"\n", std::string(text).c_str());
    std::abort();
  }
  return *id;
}

inline std::vector<int32_t> Ids(const Tokenizer& tok, const std::vector<std::string>& texts) {
  std::vector<int32_t> out;
  for (const std::string& t : texts) out.push_back(Id(tok, t));
  return out;
}

// Advances through `ids`: the index of the first token Advance refuses (its Status in *why when
// given), or -1 when all are accepted.
inline int RejectedAt(const CallGrammar& g, CallGrammar::State* s, const std::vector<int32_t>& ids,
                      Status* why = nullptr) {
  for (size_t i = 0; i < ids.size(); ++i) {
    Status st = g.Advance(s, ids[i]);
    if (!st.ok()) {
      if (why != nullptr) *why = std::move(st);
      return static_cast<int>(i);
    }
  }
  return -1;
}

// RejectedAt as a Status: OK when every token is accepted, else the refusal.
inline Status Walk(const CallGrammar& g, CallGrammar::State* s, const std::vector<int32_t>& ids) {
  Status why;
  (void)RejectedAt(g, s, ids, &why);
  return why;
}

// Per token id, 1 when its piece is made only of closing characters (} ] ) "), else 0. Built
// once per tokenizer by the caller (fixture or suite setup) and passed to PickToken/RandomWalk.
inline std::vector<char> ClosingPieces(const Tokenizer& tok) {
  std::vector<char> flags(tok.size(), 0);
  for (int32_t t = 0; t < tok.size(); ++t) {
    const std::string piece = tok.TokenToPiece(t);
    bool closing = !piece.empty();
    for (char c : piece) closing &= c == '}' || c == ']' || c == ')' || c == '"';
    flags[t] = closing;
  }
  return flags;
}

// Uniform over `allowed`, except that 1 step in 5 picks among the allowed control tokens
// (<escape>, call markers, stops) and 1 in 5 among pieces made only of closing characters
// (`closing`, from ClosingPieces(tok)), so that walks end in a few hundred steps even on a
// 262k vocabulary.
inline int32_t PickToken(const Tokenizer& tok, const std::vector<char>& closing,
                         std::span<const int32_t> allowed, std::mt19937& rng) {
  const uint32_t r = rng() % 5;
  if (r < 2) {
    std::vector<int32_t> pick;
    for (int32_t id : allowed) {
      const std::string_view text = tok.text(id);
      const bool control = tok.IsControl(id) || text == "<end>" || text.starts_with("<tool_");
      if (r == 0 && control) pick.push_back(id);
      if (r == 1 && !control && closing[id] != 0) pick.push_back(id);
    }
    if (!pick.empty()) return pick[rng() % pick.size()];
  }
  return allowed[rng() % allowed.size()];
}

// Samples until Done or a stop token; false when it did not end within max_steps. With a
// budget (> 0) the walk is a decode loop's with `-n budget`: each step picks from
// Allowed(s, tokens left), `budget` tokens at most (stop tokens counted), and true means the
// output is complete when the walk ends (CanStop).
inline bool RandomWalk(const CallGrammar& g, const Tokenizer& tok,
                       const std::vector<char>& closing, std::mt19937& rng,
                       std::vector<int32_t>* ids, int max_steps = 4000, int64_t budget = 0) {
  ids->clear();
  CallGrammar::State s = g.Start();
  const int64_t steps = budget > 0 ? budget : max_steps;
  for (int64_t step = 0; step < steps; ++step) {
    if (g.Done(s)) return true;
    std::span<const int32_t> allowed = budget > 0 ? g.Allowed(s, budget - step) : g.Allowed(s);
    if (allowed.empty()) return false;
    const int32_t id = PickToken(tok, closing, allowed, rng);
    if (!g.Advance(&s, id).ok()) return false;
    ids->push_back(id);
  }
  return budget > 0 ? g.CanStop(s) : g.Done(s);
}

inline nlohmann::json RandomString(std::mt19937& rng) {
  static const char* kStrings[] = {"Tokyo",      "hello world", "a,b:{c}[d]", "\xC3\xA9\xE6\x97\xA5",
                                   "",           "x<y",         "\"q\"",       "back\\slash",
                                   "new\nline",  "on",          "12",          "true"};
  return kStrings[rng() % (sizeof(kStrings) / sizeof(kStrings[0]))];
}

inline nlohmann::json RandomScalar(std::mt19937& rng) {
  switch (rng() % 4) {
    case 0:
      return RandomString(rng);
    case 1:
      return static_cast<int64_t>(rng() % 2001) - 1000;
    case 2:
      return (static_cast<double>(rng() % 8001) - 4000.0) / 4.0;
    default:
      return rng() % 2 == 0;
  }
}

inline nlohmann::json RandomValue(const Schema& s, std::mt19937& rng, int depth);

inline nlohmann::json RandomArguments(const Schema& s, std::mt19937& rng, int depth = 1) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, child] : s.properties) {
    const bool required =
        std::find(s.required.begin(), s.required.end(), key) != s.required.end();
    if (required || rng() % 2 == 0) out[key] = RandomValue(child, rng, depth + 1);
  }
  return out;
}

inline nlohmann::json RandomValue(const Schema& s, std::mt19937& rng, int depth) {
  if (!s.enum_values.empty()) return s.enum_values[rng() % s.enum_values.size()];
  if (s.type == "STRING") return RandomString(rng);
  if (s.type == "INTEGER") return static_cast<int64_t>(rng() % 200001) - 100000;
  if (s.type == "NUMBER") return (static_cast<double>(rng() % 8001) - 4000.0) / 4.0;
  if (s.type == "BOOLEAN") return rng() % 2 == 0;
  if (s.type == "ARRAY") {
    nlohmann::json a = nlohmann::json::array();
    const int n = static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      a.push_back(s.items != nullptr ? RandomValue(*s.items, rng, depth + 1) : RandomScalar(rng));
    }
    return a;
  }
  if (s.properties.empty()) {  // a free object: at most one [A-Za-z0-9_] key
    nlohmann::json o = nlohmann::json::object();
    if (rng() % 2 == 0) o["k" + std::to_string(rng() % 10)] = RandomScalar(rng);
    return o;
  }
  return RandomArguments(s, rng, depth);
}

inline std::string RenderCompactValue(const nlohmann::json& v) {
  if (v.is_string()) {
    std::string out = "\"";
    for (char c : v.get_ref<const std::string&>()) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out + "\"";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + RenderCompactValue(v[i]);
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, item] : v.items()) {
      out += (first ? "" : ", ") + k + "=" + RenderCompactValue(item);
      first = false;
    }
    return out + "}";
  }
  return v.dump();
}

// <tool_N>(k=v, ...)<end>
inline std::string RenderCompact(int n, const nlohmann::json& args) {
  std::string obj = RenderCompactValue(args);  // {k=v, ...}
  return "<tool_" + std::to_string(n) + ">(" + obj.substr(1, obj.size() - 2) + ")<end>";
}

}  // namespace fg::text::grammar_test

#endif  // FGEMMA_TEXT_GRAMMAR_TEST_UTIL_H_
