#include "src/call/typos.h"

#include <algorithm>
#include <cctype>

#include "src/call/logit_processors.h"  // LowerCase

namespace fg::call {

namespace {

bool Letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool Lower(char c) { return c >= 'a' && c <= 'z'; }
// A character that may not touch a word: a digit, an apostrophe ("don't") or a byte of a
// non-ASCII character ("Müller" is not "M" and "ller").
bool Joins(char c) {
  return (c >= '0' && c <= '9') || c == '\'' || static_cast<unsigned char>(c) >= 0x80;
}

// The runs of ASCII letters of `text` that touch no Joins character, as (start, length).
std::vector<std::pair<size_t, size_t>> Words(std::string_view text) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < text.size();) {
    if (!Letter(text[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && Letter(text[j])) ++j;
    if ((i == 0 || !Joins(text[i - 1])) && (j == text.size() || !Joins(text[j]))) {
      out.emplace_back(i, j - i);
    }
    i = j;
  }
  return out;
}

}  // namespace

bool OneEditApart(std::string_view a, std::string_view b) {
  if (a == b) return false;
  if (a.size() == b.size()) {
    size_t first = 0;
    while (a[first] == b[first]) ++first;  // a != b: stops inside
    size_t last = a.size() - 1;
    while (a[last] == b[last]) --last;
    if (first == last) return true;  // one letter changed
    return last == first + 1 && a[first] == b[last] && a[last] == b[first];  // a swap
  }
  if (a.size() > b.size()) std::swap(a, b);
  if (b.size() != a.size() + 1) return false;
  size_t i = 0;
  while (i < a.size() && a[i] == b[i]) ++i;
  return a.substr(i) == b.substr(i + 1);  // b has one letter more, at i
}

std::vector<std::string> CatalogTexts(const text::ToolCatalog& catalog) {
  std::vector<std::string> out;
  auto schema = [&](auto&& self, const text::Schema& s) -> void {
    if (!s.description.empty()) out.push_back(s.description);
    for (const nlohmann::json& m : s.enum_values) {
      if (m.is_string()) out.push_back(m.get<std::string>());
    }
    for (const auto& [key, p] : s.properties) {
      out.push_back(key);
      self(self, p);
    }
    if (s.items != nullptr) self(self, *s.items);
  };
  for (const text::Tool& t : catalog.tools) {
    out.push_back(t.name);
    if (!t.description.empty()) out.push_back(t.description);
    out.insert(out.end(), t.examples.begin(), t.examples.end());
    schema(schema, t.parameters);
  }
  return out;
}

TypoMender::TypoMender(const text::Tokenizer& tokenizer, std::span<const std::string> texts)
    : tokenizer_(&tokenizer) {
  for (const std::string& t : texts) {
    for (const auto& [at, len] : Words(t)) {
      if (len < 3) continue;
      std::string w = LowerCase(std::string_view(t).substr(at, len));
      if (Known(w)) words_.push_back(std::move(w));
    }
  }
  std::sort(words_.begin(), words_.end());
  words_.erase(std::unique(words_.begin(), words_.end()), words_.end());
}

bool TypoMender::Known(std::string_view word) const {
  auto has = [&](const std::string& w) { return tokenizer_->Find("\xE2\x96\x81" + w).has_value(); };
  std::string w(word);
  if (has(w)) return true;
  std::string lower = LowerCase(w);
  if (lower != w && has(lower)) return true;
  std::string cap = lower;
  cap[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(cap[0])));
  return cap != w && has(cap);
}

std::string TypoMender::Mend(std::string_view request, int* mended) const {
  std::string out;
  size_t copied = 0;
  int n = 0;
  for (const auto& [at, len] : Words(request)) {
    const std::string_view w = request.substr(at, len);
    // All lower case or capitalized, and unknown.
    if (len < 4 || !std::all_of(w.begin() + 1, w.end(), Lower) || Known(w)) continue;
    const std::string lower = LowerCase(w);
    const std::string* only = nullptr;
    bool several = false;
    for (const std::string& c : words_) {
      if (!OneEditApart(lower, c)) continue;
      several = only != nullptr;
      if (several) break;
      only = &c;
    }
    if (only == nullptr || several) continue;
    out.append(request.substr(copied, at - copied));
    std::string fixed = *only;
    if (!Lower(w[0])) fixed[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(fixed[0])));
    out += fixed;
    copied = at + len;
    ++n;
  }
  out.append(request.substr(copied));
  if (mended != nullptr) *mended = n;
  return out;
}

}  // namespace fg::call
