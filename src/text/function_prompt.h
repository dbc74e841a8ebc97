// FunctionGemma prompt rendering, official dialect, byte-exact (docs/model.md "FunctionGemma prompt
// and output"; the golden there is a test).
//
// The text never contains <bos>: BOS is a token, and callers prepend its id (2) to the tokens of
// this text, tokenized with special tokens atomic, so there is exactly one BOS.
//
// Rules (the published Google example plus the official template family's behaviour:
// ref: Gemma chat template macros format_function_declaration / format_parameters /
// format_argument, of which FunctionGemma's is the <escape>-delimited form):
//   * declaration:NAME{description:<escape>D<escape>[,parameters:{...}]}, no separator between
//     declarations. The tool description is ALWAYS emitted, empty or not
//     (description:<escape><escape>): the template writes it unconditionally.
//   * parameters:{[properties:{...},][required:[...],]type:<escape>OBJECT<escape>}: properties
//     and required are omitted when empty; the whole parameters block is omitted only when the
//     catalog gave no "parameters" (Tool::has_parameters false).
//   * A property: KEY:{[description:..][,enum:[..]][,items:{..}][,properties:{..}]
//     [,required:[..]],type:<escape>T<escape>} - keys in that (alphabetical) order, each present
//     only when non-empty: an empty property description is OMITTED (the template tests it for
//     truth), unlike the tool description. Nested OBJECTs with no properties still write
//     properties:{} (the template writes the block whenever the type is OBJECT).
//   * Strings (descriptions, enum members, required keys) are wrapped in <escape>; numbers and
//     booleans are bare; types are upper-cased.
//   * Values in calls/responses: strings <escape>d, numbers/booleans bare, null as null, objects
//     {k:v} with bare keys in sorted order, arrays [v,...].
#ifndef FGEMMA_TEXT_FUNCTION_PROMPT_H_
#define FGEMMA_TEXT_FUNCTION_PROMPT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/text/tool_catalog.h"

namespace fg::text {

inline constexpr std::string_view kDefaultDeveloperMessage =
    "You are a model that can do function calling with the following functions";

inline constexpr std::string_view kEscape = "<escape>";
inline constexpr std::string_view kStartDeclaration = "<start_function_declaration>";
inline constexpr std::string_view kEndDeclaration = "<end_function_declaration>";
inline constexpr std::string_view kStartCall = "<start_function_call>";
inline constexpr std::string_view kEndCall = "<end_function_call>";
inline constexpr std::string_view kStartResponse = "<start_function_response>";
inline constexpr std::string_view kEndResponse = "<end_function_response>";
inline constexpr std::string_view kStartOfTurn = "<start_of_turn>";
inline constexpr std::string_view kEndOfTurn = "<end_of_turn>";

struct PromptOptions {
  // Written verbatim before the first declaration (no separator), as the template does.
  std::string developer_message = std::string(kDefaultDeveloperMessage);
};

// <start_function_declaration>declaration:...<end_function_declaration> for one tool.
std::string RenderDeclaration(const Tool& tool);
// All declarations of the catalog, in catalog order, concatenated.
std::string RenderDeclarations(const ToolCatalog& catalog);

// One value in call syntax (see the rules above). Objects nest at most as deep as the json.
std::string RenderValue(const nlohmann::json& value);
// <start_function_call>call:NAME{k:v,...}<end_function_call>; `arguments` must be an object
// (anything else renders as {}).
std::string RenderCall(std::string_view name, const nlohmann::json& arguments);
// response:NAME{k:v,...}<end_function_response>: what the application appends after the model
// stopped on <start_function_response> (token 50). A non-object response renders as
// response:NAME{value:V}.
std::string RenderResponseBody(std::string_view name, const nlohmann::json& response);
// <start_function_response> + RenderResponseBody: one response inside rendered history.
std::string RenderResponse(std::string_view name, const nlohmann::json& response);

// "<start_of_turn>developer\n" + developer_message + declarations + "<end_of_turn>\n".
std::string RenderDeveloperTurn(const ToolCatalog& catalog, const PromptOptions& options = {});

// Developer turn + "<start_of_turn>user\nREQUEST<end_of_turn>\n<start_of_turn>model\n".
std::string RenderPrompt(const ToolCatalog& catalog, std::string_view user_request,
                         const PromptOptions& options = {});

// Multi-turn history. A model turn holds its calls, then the responses the application gave
// (in the same turn, each <start_function_response>...), then the model's closing text.
struct ToolExchange {
  std::string name;
  nlohmann::json arguments = nlohmann::json::object();
  std::optional<nlohmann::json> response;  // absent: the turn ends right after the calls
};
struct Message {
  enum class Role { kUser, kModel };
  Role role = Role::kUser;
  std::string text;                     // user text, or the model's text after its calls
  std::vector<ToolExchange> exchanges;  // model turns only
};

// Developer turn, then each message: user turns as "<start_of_turn>user\nTEXT<end_of_turn>\n";
// model turns as "<start_of_turn>model\n" + calls + responses + TEXT + "<end_of_turn>\n".
// A model turn whose calls have no responses yet ends with "<start_function_response>" and no
// <end_of_turn> (generation resumes there after the application appends RenderResponseBody);
// it must be the last message. With add_generation_prompt and a last user message, appends
// "<start_of_turn>model\n".
StatusOr<std::string> RenderConversation(const ToolCatalog& catalog,
                                         const std::vector<Message>& messages,
                                         bool add_generation_prompt,
                                         const PromptOptions& options = {});

}  // namespace fg::text

#endif  // FGEMMA_TEXT_FUNCTION_PROMPT_H_
