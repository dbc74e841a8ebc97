// libFuzzer target for typo mending (src/call/typos.h): arbitrary bytes as "APP TEXT \0 VOCAB
// \0 REQUEST", where VOCAB is a space-separated list of whole-word tokens ("▁word") and APP TEXT
// the app's own text (what CatalogTexts gives). A crash, sanitizer report, exception or failed
// invariant (FG_FUZZ_CHECK) is a bug; the invariants are tests/testing/typo_invariants.h's.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "src/call/typos.h"
#include "src/text/tokenizer.h"
#include "tests/testing/typo_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t a = in.find('\0');
  if (a == std::string_view::npos) return 0;
  const size_t b = in.find('\0', a + 1);
  if (b == std::string_view::npos) return 0;
  const std::string_view vocab_text = in.substr(a + 1, b - a - 1);
  const std::string_view request = in.substr(b + 1);

  fg::text::Vocab v;
  v.tokens = {"<unk>", "<s>", "</s>"};
  for (size_t i = 0; i <= vocab_text.size();) {
    size_t j = vocab_text.find(' ', i);
    if (j == std::string_view::npos) j = vocab_text.size();
    if (j > i) v.tokens.push_back("\xE2\x96\x81" + std::string(vocab_text.substr(i, j - i)));
    i = j + 1;
  }
  auto tokenizer = fg::text::Tokenizer::Create(std::move(v));
  if (!tokenizer.ok()) return 0;  // a token twice, say: not the mender's input
  const std::vector<std::string> texts = {std::string(in.substr(0, a))};
  const fg::call::TypoMender mender(**tokenizer, texts);
  int mended = -1;
  const std::string out = mender.Mend(request, &mended);
  const std::string why = fg::testing::TypoMendViolation(request, out, mended, mender.words());
  if (!why.empty()) std::fprintf(stderr, "%s\n", why.c_str());
  FG_FUZZ_CHECK(why.empty());
  return 0;
}
