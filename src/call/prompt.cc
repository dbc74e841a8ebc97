#include "src/call/prompt.h"

namespace fg::call {

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

Status CheckRequest(std::string_view request) {
  if (request.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return InvalidArgumentError("the request is empty");
  }
  if (!text::IsValidUtf8(request)) return InvalidArgumentError("the request is not valid UTF-8");
  return OkStatus();
}

StatusOr<std::vector<int32_t>> RequestTokens(const text::Tokenizer& tk, std::string_view request,
                                             std::span<const int32_t> suffix) {
  FG_RETURN_IF_ERROR(CheckRequest(request));
  std::vector<int32_t> ids = tk.Encode(request, /*add_special=*/false, /*parse_special=*/false);
  ids.insert(ids.end(), suffix.begin(), suffix.end());
  return ids;
}

std::vector<int32_t> RequestSuffixTokens(const text::Tokenizer& tk) {
  return tk.Encode(kRequestSuffix, /*add_special=*/false, /*parse_special=*/true);
}

StatusOr<std::vector<int32_t>> RequestTokens(const text::Tokenizer& tk, std::string_view request) {
  return RequestTokens(tk, request, RequestSuffixTokens(tk));
}

}  // namespace fg::call
