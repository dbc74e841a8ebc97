// Misspelt request words mended from the words the app uses (FunctionCallerOptions::fix_typos).
#ifndef FGEMMA_CALL_TYPOS_H_
#define FGEMMA_CALL_TYPOS_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/text/tokenizer.h"
#include "src/text/tool_catalog.h"

namespace fg::call {

// Whether `a` and `b` are one edit apart: one letter changed, dropped, added, or two neighbours
// swapped (Damerau); false when equal.
bool OneEditApart(std::string_view a, std::string_view b);

// The app's own text for TypoMender: each tool's name, description and example requests, and
// each parameter's key, description and string enum members (nested ones too).
std::vector<std::string> CatalogTexts(const text::ToolCatalog& catalog);

// Mends the words of a request that the model's vocabulary does not know ("Feeed", "fnid",
// "sutitles") into the one word the app itself uses that is one edit away ("Feed", "find",
// "subtitles"). A word is a run of ASCII letters with no digit, apostrophe or non-ASCII byte
// right before or after it (neither "Müller" nor "don't" holds one). It is known when the
// vocabulary has it as one whole-word token (SentencePiece's "▁word"), as written, in lower case
// or capitalized; the app's words are the known words of 3 or more letters in `texts` (the
// catalog's names, descriptions and enum members, the tools' example requests), lower case. Only
// a word of 4 or more letters, all lower case or capitalized, is mended, and only when exactly
// one app word is one edit away; its first letter's case is kept. Names and words the vocabulary
// knows ("fond", "Milo") stay as written.
class TypoMender {
 public:
  TypoMender(const text::Tokenizer& tokenizer, std::span<const std::string> texts);
  // `request` mended; `mended` (may be null) gets the number of words changed.
  std::string Mend(std::string_view request, int* mended) const;
  // The app's words, sorted.
  const std::vector<std::string>& words() const { return words_; }

 private:
  bool Known(std::string_view word) const;
  const text::Tokenizer* tokenizer_;
  std::vector<std::string> words_;
};

}  // namespace fg::call

#endif  // FGEMMA_CALL_TYPOS_H_
