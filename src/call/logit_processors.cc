#include "src/call/logit_processors.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "src/base/check.h"

namespace fg::call {
namespace {

// Lower-case words of letters and digits; '_' and every other character separate them, except
// a '.' between digits when `decimals` ("1.5").
std::vector<std::string> LowerWords(std::string_view s, bool decimals = false) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::vector<std::string> out;
  std::string w;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (std::isalnum(static_cast<unsigned char>(c)) != 0 ||
        (decimals && c == '.' && !w.empty() && digit(w.back()) && i + 1 < s.size() &&
         digit(s[i + 1]))) {
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!w.empty()) {
      out.push_back(std::move(w));
      w.clear();
    }
  }
  if (!w.empty()) out.push_back(std::move(w));
  return out;
}

// True when `phrase`'s words (LowerWords) come in a row in `said`.
bool SaysPhrase(std::span<const std::string> said, std::string_view phrase) {
  const std::vector<std::string> p = LowerWords(phrase);
  return !p.empty() && std::search(said.begin(), said.end(), p.begin(), p.end()) != said.end();
}

// True when `said` has a word "un" + X, X of 4 letters at least, where X names `key`
// (WordNamesKey: "unmute" for `mute`, "unlock" for `locked`) or is a word of `description`
// ("unfreeze" for `frozen`, "True to freeze").
bool SaysUndo(std::span<const std::string> said, std::string_view key,
              std::string_view description) {
  std::vector<std::string> described;
  for (const std::string& w : said) {
    if (w.size() < 6 || !w.starts_with("un")) continue;
    const std::string_view x = std::string_view(w).substr(2);
    if (WordNamesKey(x, key)) return true;
    if (described.empty()) described = LowerWords(description);
    if (std::find(described.begin(), described.end(), x) != described.end()) return true;
  }
  return false;
}

// SaidEnumMember over the request's LowerWords.
int SaidMember(std::span<const std::string> said, const text::Schema& schema) {
  int found = -1;
  for (size_t m = 0; m < schema.enum_values.size(); ++m) {
    if (!schema.enum_values[m].is_string()) continue;
    if (!SaysPhrase(said, schema.enum_values[m].get<std::string>())) continue;
    if (found >= 0) return -1;  // two members said: no choice made
    found = static_cast<int>(m);
  }
  return found;
}

// Sets the candidates whose token `drop` rules out to -inf, unless that would leave none.
template <class Drop>
void RuleOut(std::span<const int32_t> allowed, std::span<float> cand, Drop drop) {
  if (std::all_of(allowed.begin(), allowed.end(), drop)) return;
  for (size_t j = 0; j < allowed.size(); ++j) {
    if (drop(allowed[j])) cand[j] = -INFINITY;
  }
}

class StringGuard : public LogitProcessor {
 public:
  StringGuard(int budget, const std::vector<bool>* structural, int32_t escape)
      : budget_(budget), structural_(structural), escape_(escape) {}

  // The string's first token may not be structure or <escape> (unless that leaves none: the
  // budget can leave only <escape>).
  void Restrict(const SampleStep& step, std::span<float> cand) override {
    if (string_tokens_ == 0 && step.grammar.InFreeString(step.state)) {
      RuleOut(step.allowed, cand, [&](int32_t t) { return (*structural_)[t] || t == escape_; });
    }
  }
  // <escape> where the pick closes the string (a structure token after the first, or one past
  // the budget).
  int32_t Replace(const SampleStep& step, int32_t tok, CallStats* stats) override {
    if (tok == escape_ || !step.grammar.InFreeString(step.state)) {
      string_tokens_ = 0;
      return tok;
    }
    if ((string_tokens_ > 0 && (*structural_)[tok]) || ++string_tokens_ > budget_) {
      string_tokens_ = 0;
      ++stats->guarded_strings;
      return escape_;
    }
    return tok;
  }
  // The budget can force a string's <escape>: it ends the string.
  void Forced(int32_t tok) override {
    if (tok == escape_) string_tokens_ = 0;
  }

 private:
  const int budget_;
  const std::vector<bool>* const structural_;
  const int32_t escape_;
  int string_tokens_ = 0;  // tokens of the free string so far
};

class DigitGuard : public LogitProcessor {
 public:
  explicit DigitGuard(const std::vector<bool>* digits) : digits_(digits) {}

  // Past 12 digits in a row outside a string, no digit (unless only digits are allowed).
  void Restrict(const SampleStep& step, std::span<float> cand) override {
    if (digit_run_ >= 12 && !step.grammar.InFreeString(step.state)) {
      RuleOut(step.allowed, cand, [&](int32_t t) { return static_cast<bool>((*digits_)[t]); });
    }
  }
  void Written(int32_t tok) override { digit_run_ = (*digits_)[tok] ? digit_run_ + 1 : 0; }

 private:
  const std::vector<bool>* const digits_;
  int digit_run_ = 0;  // digit tokens written in a row
};

// RequestNumbersWithWords' numbers, then RequestConversions' and RequestAmounts', each once.
std::vector<SaidNumber> SaidNumbers(std::string_view request) {
  std::vector<SaidNumber> out = RequestNumbersWithWords(request);
  for (auto more : {RequestConversions, RequestAmounts}) {
    for (SaidNumber& n : more(request)) {
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
    }
  }
  return out;
}

// True when a number said as `n` is the value of parameter `key`: said in the key's unit ("5
// minutes" for `minutes`: WordNamesKey), or said as money and `key` is `money`, its tool's
// money parameter (MoneyKey; "" when none).
bool NumberNamesKey(const SaidNumber& n, std::string_view key, std::string_view money) {
  if (n.next_word == kMoneyWord) return !key.empty() && key == money;
  return WordNamesKey(n.next_word, key);
}

// MoneyKey(tool) when `numbers` has a sum of money (RequestAmounts), else "" (not worth
// reading the tool's descriptions).
std::string MoneyKeyIfSaid(std::span<const SaidNumber> numbers, const text::Tool* tool) {
  const bool money = std::any_of(numbers.begin(), numbers.end(),
                                 [](const SaidNumber& n) { return n.next_word == kMoneyWord; });
  return money && tool != nullptr ? MoneyKey(*tool) : "";
}

// SaidArguments with the request's SaidNumbers given.
std::vector<SaidArgument> SaidArgumentsOf(std::string_view request,
                                          std::span<const SaidNumber> numbers,
                                          const text::Tool& tool) {
  std::vector<SaidArgument> out;
  const std::vector<std::string> said = LowerWords(request);
  const std::string money = MoneyKeyIfSaid(numbers, &tool);
  for (const auto& [key, schema] : tool.parameters.properties) {
    if (schema.type == "BOOLEAN") {
      // The key said as words ("mute the tv" for `mute`), not its value; or its negation, "un"
      // and a word of the key or of its description ("unmute" for `mute`, "unfreeze" for
      // `frozen`, "True to freeze"), with the value false.
      if (SaysPhrase(said, key)) {
        out.push_back({key, nullptr});
      } else if (SaysUndo(said, key, schema.description)) {
        out.push_back({key, false});
      }
      continue;
    }
    if (schema.type == "STRING") {
      if (const int m = SaidMember(said, schema); m >= 0) {
        out.push_back({key, schema.enum_values[static_cast<size_t>(m)]});
      }
      continue;
    }
    if (schema.type != "INTEGER" && schema.type != "NUMBER") continue;
    for (const SaidNumber& n : numbers) {
      if (!NumberNamesKey(n, key, money)) continue;
      SaidArgument a{key, nlohmann::json::parse(n.text, nullptr, /*allow_exceptions=*/false)};
      if (a.value.is_number() && std::find(out.begin(), out.end(), a) == out.end()) {
        out.push_back(std::move(a));
      }
    }
  }
  return out;
}

class CopyPrior : public LogitProcessor {
 public:
  CopyPrior(std::string request, double bias, const text::Tokenizer* tk,
            const text::ToolCatalog* catalog)
      : request_(std::move(request)),
        request_lower_(LowerCase(request_)),
        numbers_(SaidNumbers(request_)),
        bias_(static_cast<float>(bias)),
        tk_(tk),
        catalog_(catalog) {
    for (size_t b = 0; b < request_.size();) {
      size_t e = b;
      while (e < request_.size() && WordByte(request_[e])) ++e;
      if (e > b) request_words_.push_back(request_.substr(b, e - b));
      b = e + 1;
    }
    if (catalog == nullptr) return;
    for (const text::Tool& t : catalog->tools) {
      for (SaidArgument& a : SaidArgumentsOf(request_, numbers_, t)) {
        std::vector<SaidKey>& keys = said_keys_[t.name];
        if (std::any_of(keys.begin(), keys.end(), [&](const SaidKey& k) { return k.key == a.key; }))
          continue;
        std::string value;  // the said value as the call spells it ("" for none)
        if (a.value.is_string()) value = "<escape>" + a.value.get<std::string>() + "<escape>";
        if (a.value.is_boolean()) value = a.value.dump();
        keys.push_back({std::move(a.key), std::move(value)});
      }
    }
  }

  void Restrict(const SampleStep& step, std::span<float> cand) override {
    in_number_ = step.grammar.InNumber(step.state);
    if (in_number_) {
      NumberBias(step, cand);
      // After a number that does not go on to spell a said one (`level: 0` where the request
      // says "mute"): on to a key the request names, as after any other value.
      if (!number_.empty() &&
          std::none_of(numbers_.begin(), numbers_.end(), [&](const SaidNumber& n) {
            return n.text.size() > number_.size() && n.text.starts_with(number_);
          })) {
        KeyBias(step, cand);
      }
    } else {
      number_.clear();
    }
    in_string_ = step.grammar.InFreeString(step.state);
    if (!in_string_) {
      text_.clear();
      if (!in_number_) {
        KeyBias(step, cand);
        ListGuard(step, cand);
      }
      return;
    }
    // The tokens whose text is request[at, at + len) where request[i, at) is the string so far.
    std::vector<int32_t> copy;
    for (size_t i = 0; i + text_.size() <= request_.size(); ++i) {
      if (text_.empty() && i > 0 && request_[i - 1] != ' ') continue;  // a word's start
      if (request_.compare(i, text_.size(), text_) != 0) continue;
      const size_t at = i + text_.size();
      for (size_t len = 1; len <= kMaxPiece && at + len <= request_.size(); ++len) {
        std::string key;  // the vocabulary spells a space as U+2581
        for (char c : std::string_view(request_).substr(at, len)) {
          key += c == ' ' ? std::string_view("\xe2\x96\x81") : std::string_view(&c, 1);
        }
        if (auto id = tk_->Find(key)) copy.push_back(*id);
      }
    }
    std::sort(copy.begin(), copy.end());
    copy.erase(std::unique(copy.begin(), copy.end()), copy.end());
    std::vector<bool> copying(cand.size(), false);
    bool any_copying = false;
    for (int32_t id : copy) {  // `allowed` is sorted
      const auto it = std::lower_bound(step.allowed.begin(), step.allowed.end(), id);
      if (it == step.allowed.end() || *it != id) continue;
      const size_t j = static_cast<size_t>(it - step.allowed.begin());
      cand[j] += bias_;
      copying[j] = true;
      any_copying = any_copying || std::isfinite(cand[j]);
    }
    // The word-end guard: a copy stopped inside a word of the request goes on to its end.
    if (any_copying && CopyEndsInsideAWord()) {
      for (size_t j = 0; j < cand.size(); ++j) {
        if (!copying[j]) cand[j] = -INFINITY;
      }
    }
    WordGuard(step, cand);
  }
  void Written(int32_t tok) override {
    const std::string piece = tk_->TokenToPiece(tok, /*special=*/true);
    output_ += piece;  // where the current key is read from
    if (in_string_) text_ += piece;
    if (in_number_) {
      if (std::all_of(piece.begin(), piece.end(), NumberChar)) {
        number_ += piece;
      } else {
        number_.clear();  // the number ended (an array's next number starts afresh)
      }
    }
  }

 private:
  static bool WordByte(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) != 0 ||
           static_cast<unsigned char>(c) >= 0x80;
  }
  // True when the string so far is a copy of the request from a word's start (every place it
  // is) that ends inside a word of the request, its space-separated run: "maria" of
  // "maria.g@example.net", "orch" of "orchard", "7" of "7:20". Not inside: a run's end but for
  // closing punctuation ("invoice" of "invoice."), or but for a plural's or a possessive's
  // ending ("sprinkler" of "sprinklers", "Milo" of "Milo's"): values the labels write so. The
  // adapter tuned on an app's few requests closes such copies early ("maria" for the e-mail
  // address), since most copies of its labels end before a period.
  bool CopyEndsInsideAWord() const {
    if (text_.empty()) return false;
    bool found = false;
    for (size_t i = request_.find(text_); i != std::string::npos; i = request_.find(text_, i + 1)) {
      if (i > 0 && request_[i - 1] != ' ') continue;  // a word's start
      found = true;
      const size_t at = i + text_.size();
      if (at >= request_.size() || request_[at - 1] == ' ' || request_[at] == ' ') return false;
      std::string_view rest(request_);
      rest = rest.substr(at, std::min(request_.find(' ', at), request_.size()) - at);
      while (!rest.empty() &&
             std::string_view(".,!?;:\"')").find(rest.back()) != std::string_view::npos) {
        rest.remove_suffix(1);
      }
      const std::string lower = LowerCase(rest);
      if (lower.empty() || lower == "s" || lower == "es" || lower == "'s" ||
          lower == "\xe2\x80\x99s") {
        return false;
      }
    }
    return found;
  }
  // True when `text` (the string so far and a token's text) has a word, ending past `from`
  // (the token's part), that begins as a word of the request does (its first kWordStem bytes,
  // case-sensitive) but is no start of any of them: "Milano" or "Millo" for "Milo",
  // "raininference" for "raining".
  bool Garbles(std::string_view text, size_t from) const {
    // Words that end before `from` are not the token's: start at the word `from` is in.
    size_t start = from;
    while (start > 0 && WordByte(text[start - 1])) --start;
    for (size_t b = start; b < text.size();) {
      size_t e = b;
      while (e < text.size() && WordByte(text[e])) ++e;
      if (e > from && e - b >= kWordStem) {
        const std::string_view w = text.substr(b, e - b);
        bool stem = false, prefix = false;
        for (const std::string& r : request_words_) {
          if (r.size() < kWordStem || r.compare(0, kWordStem, w.substr(0, kWordStem)) != 0)
            continue;
          stem = true;
          if (r.size() >= w.size() && r.compare(0, w.size(), w) == 0) prefix = true;
        }
        if (stem && !prefix) return true;
      }
      b = e + 1;
    }
    return false;
  }
  // The word guard: among the kGuarded likeliest candidates of a free string, those whose text
  // garbles a word of the request (Garbles) are ruled out, so that a word begun as the
  // request's goes on as the request's or ends (unless that leaves none: RuleOut). The
  // project's labels never have such a word (0 of 7,693 words of free-string values in
  // data/calls/); the adapter writes them ("Milano" for Milo, `zone: "raininference"`).
  // The likeliest kGuarded at a time, until one is not garbled (kGuardedMost at most): exact
  // for greedy decoding (every candidate above the pick is looked at), and it spares a look at
  // every token of the vocabulary; a sampler may still draw a garbled one from further down.
  void WordGuard(const SampleStep& step, std::span<float> cand) const {
    auto likelier = [&](size_t a, size_t b) {
      return cand[a] > cand[b] || (cand[a] == cand[b] && a < b);
    };
    std::vector<size_t> batch, garbled;  // no copy of the vocabulary's candidates: scans
    size_t finite = 0, looked = 0;
    bool first = true, below = false;
    size_t last = 0;  // the least likely candidate looked at so far
    // kGuarded at a time, likeliest first, until one is not garbled (then no candidate left
    // above it is).
    while (looked < kGuardedMost) {
      batch.clear();
      for (size_t j = 0; j < cand.size(); ++j) {
        if (!std::isfinite(cand[j])) continue;
        if (first) ++finite;
        if (below && !likelier(last, j)) continue;
        if (batch.size() == kGuarded && !likelier(j, batch.back())) continue;
        batch.insert(std::upper_bound(batch.begin(), batch.end(), j, likelier), j);
        if (batch.size() > kGuarded) batch.pop_back();
      }
      first = false;
      if (batch.empty()) break;
      bool clean = false;
      for (size_t j : batch) {
        if (Garbles(text_ + tk_->TokenToPiece(step.allowed[j], /*special=*/true), text_.size())) {
          garbled.push_back(j);
        } else {
          clean = true;
        }
      }
      looked += batch.size();
      if (clean) break;
      last = batch.back();
      below = true;
    }
    if (garbled.size() == finite) return;  // none left to write
    for (size_t j : garbled) cand[j] = -INFINITY;
  }
  static bool NumberChar(char c) {
    return (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E';
  }
  // Adds `bias` to the candidates whose token's text (not empty) `favoured` accepts.
  template <class Pred>
  void Favour(const SampleStep& step, std::span<float> cand, float bias, Pred favoured) const {
    for (size_t j = 0; j < step.allowed.size(); ++j) {
      const std::string piece = tk_->TokenToPiece(step.allowed[j], /*special=*/true);
      if (!piece.empty() && favoured(std::string_view(piece))) cand[j] += bias;
    }
  }
  // The key prior (MakeCopyPrior): in the called tool's object, outside a value, and at the
  // '{' that opens it (a token that also closes it, "{}", is not favoured).
  void KeyBias(const SampleStep& step, std::span<float> cand) const {
    if (said_keys_.empty()) return;
    const std::string_view out(output_);
    const size_t call = out.rfind("call:");
    if (call == std::string_view::npos) return;
    const size_t open = out.find('{', call);
    const size_t name_end = open == std::string_view::npos ? out.size() : open;
    const auto it = said_keys_.find(out.substr(call + 5, name_end - call - 5));
    if (it == said_keys_.end()) return;
    std::string_view lead;  // what the favoured tokens spell before the key
    if (open == std::string_view::npos) {
      // The name is complete only when nothing may continue it (no longer tool's name).
      for (int32_t t : step.allowed) {
        if (tk_->TokenToPiece(t, /*special=*/true).rfind('{', 0) != 0) return;
      }
      lead = "{";
    }
    const std::string_view body =
        open == std::string_view::npos ? std::string_view() : out.substr(open + 1);
    const size_t sep = body.find_last_of(',');
    const std::string_view partial = sep == std::string_view::npos ? body : body.substr(sep + 1);
    const size_t colon = partial.find(':');
    if (colon != std::string_view::npos) {
      // In the value of a said enum member's key: the tokens that go on spelling that member.
      const std::string_view key = partial.substr(0, colon), value = partial.substr(colon + 1);
      const auto said = std::find_if(it->second.begin(), it->second.end(),
                                     [&](const SaidKey& k) { return k.key == key; });
      if (said != it->second.end() && said->value.size() > value.size() &&
          std::string_view(said->value).starts_with(value)) {
        const std::string_view rest = std::string_view(said->value).substr(value.size());
        Favour(step, cand, kKeyPriorBias, [&](std::string_view p) { return rest.starts_with(p); });
        return;
      }
    }
    auto written = [&](std::string_view key) {
      const std::string k = std::string(key) + ":";
      return body.starts_with(k) || body.find("," + k) != std::string_view::npos;
    };
    std::string_view last;  // the last wanted key in sorted order: not written yet
    for (const SaidKey& said : it->second) {
      if (!written(said.key) && said.key > last) last = said.key;
    }
    if (last.empty()) return;
    if (colon != std::string_view::npos) {  // after a value: on to another key
      Favour(step, cand, kKeyPriorBias, [](std::string_view p) { return p[0] == ','; });
      return;
    }
    // The keys that may come next, as the tokens would spell them from here: the wanted ones
    // and, not to skip them (the model writes keys in sorted order), those that sort before the
    // last wanted one.
    std::vector<std::string> spelled;
    for (const auto& [key, schema] : catalog_->Find(it->first)->parameters.properties) {
      if (key <= last && !written(key) && std::string_view(key).starts_with(partial)) {
        spelled.push_back(std::string(lead) + key.substr(partial.size()) + ":");
      }
    }
    Favour(step, cand, kKeyPriorBias, [&](std::string_view p) {
      return std::any_of(spelled.begin(), spelled.end(),
                         [&](const std::string& k) { return k.starts_with(p); });
    });
  }
  // The list guard: in an array of free strings whose items so far, two at least, are a list
  // of the request in its order ("the dining room, kids room"; items apart by ", ", " and ",
  // ", and " or " & "), while the request's list goes on after the last item (", kitchen", " and
  // living room"), the array does not close: the tokens that begin with ']' are ruled out. The
  // adapters close such arrays an item early (`rooms: ["dining room", "kids room"]`). Not when
  // the list goes on with thanks or please (", thank you"). Of the 232 arrays of two items or
  // more that the project's labels write as such a list, one stops while the request's list goes
  // on ("..., boss@work.example, subject lunch on Friday").
  void ListGuard(const SampleStep& step, std::span<float> cand) const {
    static constexpr std::string_view kEscape = "<escape>";
    const std::string_view out(output_);
    const size_t open = out.rfind('[');
    if (open == std::string_view::npos || open == 0 || out[open - 1] != ':' ||
        out.find(']', open) != std::string_view::npos) {
      return;
    }
    std::vector<std::string> items;  // lower-cased
    for (std::string_view rest = out.substr(open + 1);;) {
      if (!rest.starts_with(kEscape)) return;
      rest.remove_prefix(kEscape.size());
      const size_t end = rest.find(kEscape);
      if (end == std::string_view::npos) return;  // in an item
      items.push_back(LowerCase(rest.substr(0, end)));
      rest.remove_prefix(end + kEscape.size());
      if (rest.empty()) break;  // an item just closed
      if (!rest.starts_with(',')) return;
      rest.remove_prefix(1);
      if (rest.empty()) return;  // the next item to come
    }
    if (items.size() < 2) return;
    const text::Tool* tool = CalledTool();
    if (tool == nullptr) return;
    size_t b = open - 1;
    while (b > 0 &&
           (std::isalnum(static_cast<unsigned char>(out[b - 1])) != 0 || out[b - 1] == '_'))
      --b;
    const auto param = tool->parameters.properties.find(std::string(out.substr(b, open - 1 - b)));
    if (param == tool->parameters.properties.end() || param->second.items == nullptr ||
        param->second.items->type != "STRING" || !param->second.items->enum_values.empty()) {
      return;
    }
    static constexpr std::string_view kSeparators[] = {", and ", ", ", " and ", " & "};
    auto separator = [](std::string_view s) -> size_t {  // its length at the start of s, or 0
      for (std::string_view sep : kSeparators) {
        if (s.starts_with(sep)) return sep.size();
      }
      return 0;
    };
    const std::string& request = request_lower_;
    size_t at = 0;  // the end of the list so far in the request
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].empty()) return;
      const size_t found = request.find(items[i], at);
      if (found == std::string::npos) return;
      if (i > 0 && separator(std::string_view(request).substr(at)) != found - at) return;
      if (i == 0 && found > 0 && request[found - 1] != ' ') return;
      at = found + items[i].size();
    }
    const size_t sep = separator(std::string_view(request).substr(at));
    if (sep == 0) return;
    const std::string_view next = std::string_view(request).substr(at + sep);
    if (next.empty() || !WordByte(next[0])) return;
    for (std::string_view polite : {"thank", "please"}) {
      if (next.starts_with(polite)) return;
    }
    RuleOut(step.allowed, cand,
            [&](int32_t t) { return tk_->TokenToPiece(t, /*special=*/true).starts_with(']'); });
  }
  // The tool whose call is being written: null before its '{' (or without a catalog).
  const text::Tool* CalledTool() const {
    if (catalog_ == nullptr) return nullptr;
    const std::string_view out(output_);
    const size_t call = out.rfind("call:");
    if (call == std::string_view::npos) return nullptr;
    const size_t open = out.find('{', call);
    if (open == std::string_view::npos) return nullptr;
    return catalog_->Find(out.substr(call + 5, open - call - 5));
  }
  // The key of the value being written: the name before the output's last ':'.
  std::string_view Key() const {
    const size_t colon = output_.rfind(':');
    if (colon == std::string::npos) return {};
    size_t b = colon;
    while (b > 0 && (std::isalnum(static_cast<unsigned char>(output_[b - 1])) != 0 ||
                     output_[b - 1] == '_')) {
      --b;
    }
    return std::string_view(output_).substr(b, colon - b);
  }
  // Once the number has begun as a request's number does: a token that continues one that
  // starts with the number so far, or one that ends the number when the number so far is one
  // (its text does not start with a number character), gets the copy bias. Not at the first
  // character: the value may be the request's number converted ("two hours" -> minutes 120),
  // which the model often writes right; it is the digits after the first that it loses or adds.
  // The numbers said with the key's own unit ("5 minutes" for `minutes`, "fifty one days" for
  // `days`) or as money for the tool's money key ("one hundred and twenty dollars" for
  // `amount`: NumberNamesKey) are the value itself: theirs get kKeyPriorBias, from the first
  // character on (the model repeats digits past them, "fifty one days" -> 511111111111, or
  // loses them, "one hundred and twenty dollars" -> 12).
  void NumberBias(const SampleStep& step, std::span<float> cand) const {
    const std::string_view key = Key();
    const std::string money = MoneyKeyIfSaid(numbers_, CalledTool());
    for (const bool unit : {true, false}) {
      if (!unit && number_.empty()) return;
      bool complete = false;
      std::vector<std::string_view> rest;
      for (const SaidNumber& n : numbers_) {
        if (unit && !NumberNamesKey(n, key, money)) continue;
        const std::string& t = n.text;
        if (t.size() < number_.size() || t.compare(0, number_.size(), number_) != 0) continue;
        if (t.size() == number_.size()) {
          complete = true;
        } else {
          rest.push_back(std::string_view(t).substr(number_.size()));
        }
      }
      if (!complete && rest.empty()) continue;
      Favour(step, cand, unit ? kKeyPriorBias : bias_, [&](std::string_view p) {
        return (complete && !NumberChar(p[0])) ||
               std::any_of(rest.begin(), rest.end(),
                           [&](std::string_view r) { return r.starts_with(p); });
      });
      return;
    }
  }

  static constexpr size_t kMaxPiece = 32;  // bytes of a token's text looked up at most
  static constexpr size_t kWordStem = 3;   // bytes that make a word begin as a request's does
  static constexpr size_t kGuarded = 16;   // candidates the word guard looks at a time
  static constexpr size_t kGuardedMost = 256;  // and at most per step
  std::vector<std::string> request_words_;     // the request's words (WordByte runs), as written
  const std::string request_;
  const std::string request_lower_;        // LowerCase(request_)
  const std::vector<SaidNumber> numbers_;  // SaidNumbers(request_)
  const float bias_;
  const text::Tokenizer* tk_;
  bool in_string_ = false;  // the last Restrict was in a free string
  std::string text_;        // the free string's text so far
  bool in_number_ = false;  // the last Restrict was in a number value
  std::string number_;      // the number value's text so far
  std::string output_;      // the output's text so far
  // A parameter the request names: a number's unit said with a number or a boolean's key
  // (`value` empty), a string enum's member (`value`: that member as the call spells it,
  // <escape>d) or a boolean's negation (`value` "false").
  struct SaidKey {
    std::string key;
    std::string value;
  };
  // Per tool: its parameters the request names (empty when `catalog_` is null).
  std::map<std::string, std::vector<SaidKey>, std::less<>> said_keys_;
  const text::ToolCatalog* catalog_;
};

// English number words: their value (0..90), minus the scale for a scale word (hundred -100,
// thousand -1000, million -1000000), or -2 for any other word.
int64_t NumberWord(std::string_view w) {
  static constexpr std::pair<std::string_view, int64_t> kWords[] = {
      {"zero", 0},       {"one", 1},          {"two", 2},           {"three", 3},
      {"four", 4},       {"five", 5},         {"six", 6},           {"seven", 7},
      {"eight", 8},      {"nine", 9},         {"ten", 10},          {"eleven", 11},
      {"twelve", 12},    {"thirteen", 13},    {"fourteen", 14},     {"fifteen", 15},
      {"sixteen", 16},   {"seventeen", 17},   {"eighteen", 18},     {"nineteen", 19},
      {"twenty", 20},    {"thirty", 30},      {"forty", 40},        {"fifty", 50},
      {"sixty", 60},     {"seventy", 70},     {"eighty", 80},       {"ninety", 90},
      {"hundred", -100}, {"thousand", -1000}, {"million", -1000000}};
  for (const auto& [word, value] : kWords) {
    if (w == word) return value;
  }
  return -2;  // not a number word
}

}  // namespace

std::vector<std::string> RequestNumbers(std::string_view request) {
  std::vector<std::string> out;
  for (SaidNumber& n : RequestNumbersWithWords(request)) {
    if (std::find(out.begin(), out.end(), n.text) == out.end()) out.push_back(std::move(n.text));
  }
  return out;
}

namespace {

// The values of `numbers`, each once, in order.
std::vector<double> NumberValues(std::span<const SaidNumber> numbers) {
  std::vector<double> out;
  for (const SaidNumber& n : numbers) {
    const double v = std::strtod(n.text.c_str(), nullptr);
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

}  // namespace

std::vector<SaidArgument> SaidArguments(std::string_view request, const text::Tool& tool) {
  return SaidArgumentsOf(request, SaidNumbers(request), tool);
}

std::vector<double> SaidNumberValues(std::string_view request) {
  return NumberValues(SaidNumbers(request));
}

SaidFacts SaidFactsOf(std::string_view request, const text::Tool& tool) {
  const std::vector<SaidNumber> numbers = SaidNumbers(request);
  return {SaidArgumentsOf(request, numbers, tool), NumberValues(numbers), std::string(request)};
}

namespace {

// A unit of measure: the words that say it, the words a key in it may use (the first is the
// plural), its family (time, volume, mass, length) and its size in the family's smallest unit.
// Units of a family are in order of size.
struct MeasureUnit {
  std::array<std::string_view, 5> said;  // "" past the last
  std::array<std::string_view, 2> keys;
  int family;
  double size;
};
const MeasureUnit kMeasureUnits[] = {
    {{"second", "seconds", "sec", "secs"}, {"seconds"}, 0, 1},
    {{"minute", "minutes", "min", "mins"}, {"minutes"}, 0, 60},
    {{"hour", "hours", "hr", "hrs"}, {"hours", "hrs"}, 0, 3600},
    {{"day", "days"}, {"days"}, 0, 86400},
    {{"week", "weeks"}, {"weeks"}, 0, 604800},
    {{"milliliter", "milliliters", "millilitre", "millilitres", "ml"}, {"milliliters", "ml"}, 1, 1},
    {{"liter", "liters", "litre", "litres"}, {"liters", "l"}, 1, 1000},
    {{"gram", "grams", "g"}, {"grams", "g"}, 2, 1},
    {{"kilogram", "kilograms", "kilo", "kilos", "kg"}, {"kilograms", "kg"}, 2, 1000},
    {{"centimeter", "centimeters", "centimetre", "centimetres", "cm"}, {"centimeters", "cm"}, 3, 1},
    {{"meter", "meters", "metre", "metres"}, {"meters"}, 3, 100},
    {{"kilometer", "kilometers", "kilometre", "kilometres", "km"}, {"kilometers", "km"}, 3, 100000},
};

}  // namespace

std::vector<SaidNumber> RequestConversions(std::string_view request) {
  const std::vector<std::string> words = LowerWords(request, /*decimals=*/true);
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  auto is = [&](size_t i, std::initializer_list<std::string_view> any) {
    return i < words.size() && std::find(any.begin(), any.end(), words[i]) != any.end();
  };
  // The number whose last word is words[end - 1] (digits or number words), or -1.
  auto number_before = [&](size_t end) {
    if (end == 0) return -1.0;
    const std::string& last = words[end - 1];
    if (std::all_of(last.begin(), last.end(), [&](char c) { return digit(c) || c == '.'; })) {
      return std::strtod(last.c_str(), nullptr);
    }
    size_t begin = end;
    while (begin > 0 && (NumberWord(words[begin - 1]) != -2 || is(begin - 1, {"and", "a"}))) {
      --begin;
    }
    std::string run;
    for (size_t k = begin; k < end; ++k) run += words[k] + " ";
    const std::vector<SaidNumber> said = RequestNumbersWithWords(run);
    // The run's last number must end at its end (nothing follows it).
    if (said.empty() || !said.back().next_word.empty()) return -1.0;
    return std::strtod(said.back().text.c_str(), nullptr);
  };
  std::vector<SaidNumber> out;
  for (size_t i = 0; i < words.size(); ++i) {
    const size_t unit_at = static_cast<size_t>(
        std::find_if(std::begin(kMeasureUnits), std::end(kMeasureUnits),
                     [&](const MeasureUnit& u) {
                       return std::find(u.said.begin(), u.said.end(), words[i]) != u.said.end();
                     }) -
        std::begin(kMeasureUnits));
    if (unit_at == std::size(kMeasureUnits)) continue;
    const MeasureUnit* unit = &kMeasureUnits[unit_at];
    double q = -1;       // the quantity in this unit
    bool whole = false;  // "and a half" may follow
    if (i >= 2 && is(i - 1, {"a", "an"}) && is(i - 2, {"half"})) {
      q = 0.5;  // half an hour
    } else if (i >= 3 && is(i - 1, {"a", "an"}) && is(i - 2, {"of"}) &&
               is(i - 3, {"quarter", "quarters"})) {
      q = i >= 4 && is(i - 4, {"three"}) ? 0.75 : 0.25;  // (three) quarter(s) of an hour
    } else if (i >= 4 && is(i - 1, {"half"}) && is(i - 2, {"a"}) && is(i - 3, {"and"})) {
      q = number_before(i - 3);  // one and a half hours
      if (q >= 0) q += 0.5;
    } else if (i >= 1 && is(i - 1, {"half", "quarter"})) {
      q = is(i - 1, {"half"}) ? 0.5 : 0.25;  // a half hour, a quarter hour
    } else if (i >= 1 && is(i - 1, {"a", "an"})) {
      // "an hour", "a liter", "for a day"; not a rate ("three times a day", "10000 steps a
      // day")
      if (unit->family == 0 && unit->size >= 86400
              ? i >= 2 && is(i - 2, {"for"})
              : i < 2 || !is(i - 2, {"times", "once", "twice", "thrice"})) {
        q = 1;
      }
      whole = true;
    } else {
      q = number_before(i);
      whole = true;
    }
    if (q <= 0) continue;
    if (whole && is(i + 1, {"and"}) && is(i + 2, {"a"}) && is(i + 3, {"half"})) q += 0.5;
    // The said unit and those up to two steps from it in its family ("two hours" is 120
    // minutes and 7,200 seconds; "2 weeks" is not 20,160 minutes).
    for (size_t at = unit_at > 2 ? unit_at - 2 : 0;
         at <= unit_at + 2 && at < std::size(kMeasureUnits); ++at) {
      const MeasureUnit* u = &kMeasureUnits[at];
      if (u->family != unit->family) continue;
      const double v = q * unit->size / u->size;
      const bool whole_v = std::abs(v - std::round(v)) <= 1e-9;
      // In the said unit, the quantity as said ("6.2 kilograms": 6.2 kg); converted, whole only.
      if (v > 1e12 || (at != unit_at && (v < 1 || !whole_v))) continue;
      for (std::string_view name : u->keys) {
        if (name.empty()) continue;
        SaidNumber n{whole_v ? std::to_string(static_cast<int64_t>(std::round(v)))
                             : nlohmann::json(v).dump(),
                     std::string(name)};
        if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
      }
    }
  }
  return out;
}

bool WordNamesKey(std::string_view word, std::string_view key) {
  auto stem = [](std::string_view w) {
    return w.size() > 3 && w.back() == 's' ? w.substr(0, w.size() - 1) : w;
  };
  const std::string_view w = stem(word);
  if (w.empty()) return false;
  for (size_t b = 0; b <= key.size();) {
    size_t e = key.find('_', b);
    if (e == std::string_view::npos) e = key.size();
    const std::string_view part = stem(key.substr(b, e - b));
    if (part == w || (w.size() >= 3 && part.substr(0, w.size()) == w)) return true;
    b = e + 1;
  }
  return false;
}

std::vector<std::string> LowerCaseWords(std::string_view s) { return LowerWords(s); }

std::string LowerCase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<SaidNumber> RequestAmounts(std::string_view request) {
  std::vector<SaidNumber> out;
  auto add = [&](std::string n) {
    SaidNumber said{std::move(n), std::string(kMoneyWord)};
    if (std::find(out.begin(), out.end(), said) == out.end()) out.push_back(std::move(said));
  };
  // A number and a currency word: "60 dollars", "thirty bucks", "50 euros".
  static constexpr std::string_view kCurrencies[] = {"dollar", "dollars", "buck", "bucks", "usd",
                                                     "euro",   "euros",   "eur",  "quid"};
  for (SaidNumber& n : RequestNumbersWithWords(request)) {
    if (std::find(std::begin(kCurrencies), std::end(kCurrencies), n.next_word) !=
        std::end(kCurrencies)) {
      add(std::move(n.text));
    }
  }
  // A currency sign and a number: "$60", "$ 1,200", "€50", "£20".
  for (std::string_view sign : {"$", "\xe2\x82\xac", "\xc2\xa3"}) {
    for (size_t at = request.find(sign); at != std::string_view::npos;
         at = request.find(sign, at + 1)) {
      size_t d = at + sign.size();
      if (d < request.size() && request[d] == ' ') ++d;
      if (d >= request.size() || request[d] < '0' || request[d] > '9') continue;
      // The number that starts there: the first of RequestNumbersWithWords' digit runs.
      std::vector<SaidNumber> from = RequestNumbersWithWords(request.substr(d));
      if (!from.empty() && std::isdigit(static_cast<unsigned char>(from[0].text[0])) != 0) {
        add(std::move(from[0].text));
      }
    }
  }
  return out;
}

std::string MoneyKey(const text::Tool& tool) {
  static constexpr std::string_view kMoney[] = {"amount",  "price", "cost",  "bill",   "dollar",
                                                "dollars", "usd",   "money", "budget", "fee"};
  std::string found;
  for (const auto& [key, schema] : tool.parameters.properties) {
    if (schema.type != "NUMBER" && schema.type != "INTEGER") continue;
    const std::vector<std::string> words = LowerWords(key + " " + schema.description);
    auto says = [&](std::string_view w) {
      return std::find(words.begin(), words.end(), w) != words.end();
    };
    if (says("percent") || std::none_of(std::begin(kMoney), std::end(kMoney), says)) continue;
    if (!found.empty()) return "";  // two money parameters: which one a sum is, is not said
    found = key;
  }
  return found;
}

int SaidEnumMember(std::string_view request, const text::Schema& schema) {
  if (schema.enum_values.empty()) return -1;  // not worth splitting the request
  return SaidMember(LowerWords(request), schema);
}

std::vector<SaidNumber> RequestNumbersWithWords(std::string_view request) {
  std::vector<SaidNumber> out;
  auto add = [&](std::string n, std::string next) {
    SaidNumber said{std::move(n), std::move(next)};
    if (std::find(out.begin(), out.end(), said) == out.end()) out.push_back(std::move(said));
  };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  auto alpha = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
  // The word starting at `at` after spaces, lower case ("" when none).
  auto word_at = [&](size_t at) {
    while (at < request.size() && request[at] == ' ') ++at;
    std::string w;
    for (; at < request.size() && alpha(request[at]); ++at) {
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(request[at])));
    }
    return w;
  };
  // Digit runs: "1,200" (a comma before exactly three digits) and "2.5" are one number each.
  for (size_t i = 0; i < request.size();) {
    if (!digit(request[i])) {
      ++i;
      continue;
    }
    const bool word_start = i == 0 || !alpha(request[i - 1]);
    std::string n;
    size_t j = i;
    bool dot = false;
    while (j < request.size()) {
      if (digit(request[j])) {
        n += request[j++];
        continue;
      }
      if (j + 1 >= request.size() || !digit(request[j + 1])) break;
      if (request[j] == '.' && !dot) {
        dot = true;
        n += request[j++];
        continue;
      }
      size_t k = j + 1;
      while (k < request.size() && digit(request[k])) ++k;
      if (request[j] != ',' || dot || k - (j + 1) != 3) break;
      ++j;  // a thousands separator
    }
    if (word_start && (n.size() == 1 || n[0] != '0' || n[1] == '.')) add(n, word_at(j));
    i = j;
  }
  // Runs of number words; a hyphen joins them, "and" only between two of them.
  std::vector<std::string> words;  // lower case; "" for anything that ends a run
  std::string w;
  for (char c : request) {
    if (alpha(c)) {
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      continue;
    }
    if (!w.empty()) words.push_back(w);
    w.clear();
    if (c != ' ' && c != '-') words.push_back("");
  }
  if (!w.empty()) words.push_back(w);
  // What may follow what: a unit (0-9) after a ten, a hundred or a thousand; a teen or a ten
  // after a hundred or a thousand; a scale after a unit, teen or ten ("a" counts as one before a
  // scale).
  enum Last { kNone, kUnit, kTeen, kTen, kHundred, kScale };
  for (size_t i = 0; i < words.size();) {
    int64_t total = 0, current = 0;
    Last last = kNone;
    size_t j = i;
    for (; j < words.size(); ++j) {
      const std::string& word = words[j];
      const int64_t next = j + 1 < words.size() ? NumberWord(words[j + 1]) : -2;
      if (word == "a" && last == kNone && next <= -100) {
        current = 1;
        last = kUnit;
        continue;
      }
      if (word == "and" && last != kNone && next >= 0) continue;
      const int64_t v = NumberWord(word);
      if (v == -2) break;
      if (v >= 0 && v < 10) {
        if (last == kUnit || last == kTeen) break;
        current += v;
        last = kUnit;
      } else if (v >= 10 && v < 20) {
        if (last != kNone && last != kHundred && last != kScale) break;
        current += v;
        last = kTeen;
      } else if (v >= 20) {
        if (last != kNone && last != kHundred && last != kScale) break;
        current += v;
        last = kTen;
      } else if (v == -100) {
        if (last == kHundred) break;
        current = std::max<int64_t>(current, 1) * 100;
        last = kHundred;
      } else {
        if (last == kScale) break;
        total += std::max<int64_t>(current, 1) * -v;
        current = 0;
        last = kScale;
      }
    }
    if (last != kNone) add(std::to_string(total + current), j < words.size() ? words[j] : "");
    i = j > i ? j : i + 1;
  }
  return out;
}

int32_t LogitProcessorChain::Sample(const SampleStep& step, std::span<float> cand,
                                    runtime::Sampler& sampler, CallStats* stats) {
  for (const auto& p : chain_) p->Restrict(step, cand);
  int32_t tok = step.allowed[sampler.Sample(cand)];
  for (const auto& p : chain_) tok = p->Replace(step, tok, stats);
  return tok;
}

void LogitProcessorChain::Forced(int32_t tok) {
  for (const auto& p : chain_) p->Forced(tok);
}

void LogitProcessorChain::Written(int32_t tok) {
  for (const auto& p : chain_) p->Written(tok);
}

std::unique_ptr<LogitProcessor> MakeStringGuard(int budget, const std::vector<bool>* structural,
                                                int32_t escape) {
  return std::make_unique<StringGuard>(budget, structural, escape);
}

std::unique_ptr<LogitProcessor> MakeDigitGuard(const std::vector<bool>* digits) {
  return std::make_unique<DigitGuard>(digits);
}

double LogSumExp(std::span<const float> logits) {
  double hi = -std::numeric_limits<double>::infinity();
  for (float x : logits) hi = std::max(hi, static_cast<double>(x));
  if (!std::isfinite(hi)) return hi;
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - hi);
  return hi + std::log(sum);
}

double TopProbability(std::span<const float> logits, double log_z) {
  if (logits.empty()) return 0;
  return std::exp(*std::max_element(logits.begin(), logits.end()) - log_z);
}

void BlendLogProbs(std::span<float> own, double own_log_z, std::span<const float> other,
                   double weight) {
  FG_CHECK(own.size() == other.size());
  if (own.empty()) return;
  const double other_log_z = LogSumExp(other);
  for (size_t j = 0; j < own.size(); ++j) {
    own[j] =
        static_cast<float>((1 - weight) * (own[j] - own_log_z) + weight * (other[j] - other_log_z));
  }
}

std::unique_ptr<LogitProcessor> MakeCopyPrior(std::string request, double bias,
                                              const text::Tokenizer* pieces,
                                              const text::ToolCatalog* catalog) {
  return std::make_unique<CopyPrior>(std::move(request), bias, pieces, catalog);
}

}  // namespace fg::call
