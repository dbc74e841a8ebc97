#include "src/call/prompt.h"

namespace fg::call {

namespace {

// Structural UTF-8 check (no overlongs, no surrogates, <= U+10FFFF).
bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    for (int k = 1; k <= n; ++k) {
      if (i + static_cast<size_t>(k) >= s.size()) return false;
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

}  // namespace

std::string PrefixText(text::Dialect dialect, const text::ToolCatalog& catalog,
                       const text::PromptOptions& options) {
  std::string s;
  if (dialect == text::Dialect::kOfficial) s = text::RenderDeveloperTurn(catalog, options);
  s += text::kStartOfTurn;
  s += "user\n";
  return s;
}

std::vector<int32_t> PrefixTokens(const text::Tokenizer& tk, text::Dialect dialect,
                                  const text::ToolCatalog& catalog,
                                  const text::PromptOptions& options) {
  std::vector<int32_t> ids = {tk.vocab().bos};
  std::vector<int32_t> body = tk.Encode(PrefixText(dialect, catalog, options),
                                        /*add_special=*/false, /*parse_special=*/true);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

StatusOr<std::vector<int32_t>> RequestTokens(const text::Tokenizer& tk, std::string_view request) {
  if (request.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return InvalidArgumentError("the request is empty");
  }
  if (!ValidUtf8(request)) return InvalidArgumentError("the request is not valid UTF-8");
  std::vector<int32_t> ids = tk.Encode(request, /*add_special=*/false, /*parse_special=*/false);
  std::vector<int32_t> tail = tk.Encode(kRequestSuffix, false, true);
  ids.insert(ids.end(), tail.begin(), tail.end());
  return ids;
}

}  // namespace fg::call
