// What TypoMender::Mend (src/call/typos.h) keeps of a request, checked on arbitrary input by
// fuzz/call_typos_fuzz.cc and on random requests by src/call/typos_test.cc:
// - nothing mended: the request as given, byte for byte;
// - only ASCII letters change, so every other byte (spaces, punctuation, digits, UTF-8 or not)
//   is where it was: the two texts without their ASCII letters are equal;
// - each word changed is an app word and one edit from the word it replaced (case aside: the
//   first letter's case is kept, "Xfeed" -> "Feed"), and the words changed are the ones counted;
// - so the length changes by at most one a word mended.
#ifndef FGEMMA_TESTS_TESTING_TYPO_INVARIANTS_H_
#define FGEMMA_TESTS_TESTING_TYPO_INVARIANTS_H_

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "src/call/logit_processors.h"  // LowerCase
#include "src/call/typos.h"

namespace fg::testing {

// "" when `out` and `mended` are what Mend may answer for `request` with the app's `words`
// (TypoMender::words(): sorted, lower case); otherwise what is wrong.
inline std::string TypoMendViolation(std::string_view request, std::string_view out, int mended,
                                     const std::vector<std::string>& words) {
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  auto without_letters = [&](std::string_view s) {
    std::string o;
    for (char c : s) {
      if (!letter(c)) o += c;
    }
    return o;
  };
  auto runs = [&](std::string_view s) {  // the runs of ASCII letters, in order
    std::vector<std::string_view> o;
    for (size_t i = 0; i < s.size();) {
      if (!letter(s[i])) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < s.size() && letter(s[j])) ++j;
      o.push_back(s.substr(i, j - i));
      i = j;
    }
    return o;
  };
  if (mended < 0) return "a negative count";
  if (mended == 0) return out == request ? "" : "nothing counted, yet the text changed";
  if (without_letters(out) != without_letters(request)) return "a byte other than a letter moved";
  const auto before = runs(request), after = runs(out);
  if (before.size() != after.size()) return "the words are not the same in number";
  int changed = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    if (before[i] == after[i]) continue;
    ++changed;
    const std::string a = call::LowerCase(before[i]), b = call::LowerCase(after[i]);
    if (!call::OneEditApart(a, b)) return "'" + a + "' -> '" + b + "' is not one edit";
    if (!std::binary_search(words.begin(), words.end(), b)) return "'" + b + "' is no app word";
  }
  if (changed != mended) return "changed and counted words differ";
  const size_t diff =
      out.size() > request.size() ? out.size() - request.size() : request.size() - out.size();
  if (diff > static_cast<size_t>(mended)) return "the length changed by more than one a word";
  return "";
}

}  // namespace fg::testing

#endif  // FGEMMA_TESTS_TESTING_TYPO_INVARIANTS_H_
