// Prompt tokens for a function-calling request, split at the user's text so the part before it
// (the catalog prefix) can be prefilled once and cached.
//
//   official: <bos> + RenderDeveloperTurn(catalog) + "<start_of_turn>user\n" | REQUEST +
//             "<end_of_turn>\n<start_of_turn>model\n"   (function_prompt.h, byte-exact)
//   compact:  <bos> + "<start_of_turn>user\n" | REQUEST + "<end_of_turn>\n<start_of_turn>model\n"
//             (the seed's fine-tune sees no declarations: its tools are <tool_N> tokens)
//
// Template text is tokenized with special tokens atomic; the request is tokenized with special
// tokens as plain text, so a request cannot inject "<end_of_turn>" or "<escape>". Because "\n"
// is an atomic token in Gemma vocabularies, the split tokenizes exactly like the whole prompt
// text (checked by a test for requests without control-token text). Exactly one BOS (id 2).
#ifndef FGEMMA_CALL_PROMPT_H_
#define FGEMMA_CALL_PROMPT_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fgemma/status.h"
#include "src/text/call_grammar.h"
#include "src/text/function_prompt.h"
#include "src/text/tokenizer.h"
#include "src/text/tool_catalog.h"

namespace fg::call {

// The text before the request (without <bos>).
std::string PrefixText(text::Dialect dialect, const text::ToolCatalog& catalog,
                       const text::PromptOptions& options);
inline constexpr std::string_view kRequestSuffix = "<end_of_turn>\n<start_of_turn>model\n";

// <bos> + the prefix text's tokens.
std::vector<int32_t> PrefixTokens(const text::Tokenizer& tk, text::Dialect dialect,
                                  const text::ToolCatalog& catalog,
                                  const text::PromptOptions& options);

// InvalidArgument for an empty (or all-whitespace) request or one that is not UTF-8.
Status CheckRequest(std::string_view request);

// The tokens after the prefix: the request (special text not parsed) and the suffix.
// InvalidArgument for an empty (or all-whitespace) request or one that is not UTF-8.
StatusOr<std::vector<int32_t>> RequestTokens(const text::Tokenizer& tk, std::string_view request);
// The same with kRequestSuffix's tokens (RequestSuffixTokens) computed once by the caller.
StatusOr<std::vector<int32_t>> RequestTokens(const text::Tokenizer& tk, std::string_view request,
                                             std::span<const int32_t> suffix);
std::vector<int32_t> RequestSuffixTokens(const text::Tokenizer& tk);

}  // namespace fg::call

#endif  // FGEMMA_CALL_PROMPT_H_
