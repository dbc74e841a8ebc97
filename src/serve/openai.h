// The OpenAI API's JSON, as `fgemma serve` speaks it (docs/serve.md): request bodies parsed and
// checked against the server's limits into what FunctionCaller takes, and the response bodies
// (whole, or as server-sent-event chunks) built from a CallResult. No HTTP here: these are pure
// functions of their inputs, fed random and malformed bodies by the tests.
//
// Mapping of a chat request onto fgemma's function calling:
//   * system / developer messages (joined with "\n") become FunctionGemma's developer message
//     (the text before the declarations); without them the default one, as `fgemma call`.
//   * user messages are user turns; an assistant message's tool_calls are the model turn's
//     calls and the `tool` messages that follow (matched by tool_call_id) their responses; the
//     assistant's text closes that turn.
//   * tools are the catalog (the `{"tools": [...]}` object FunctionCaller parses);
//     tool_choice "required" = the call grammar (constrain "call"), "auto" (the default) = text
//     or valid calls ("auto"), "none" = no grammar and no calls returned, a named function = the
//     call grammar admitting that function only (the prompt still declares every tool).
//   * parallel_tool_calls false = one call at most; true (the default) = the server's
//     --max-calls.
// A request whose only message after the system ones is one user message is rendered exactly as
// `fgemma call` renders its REQUEST: the same tokens and, greedy, the same answer.
#ifndef FGEMMA_SERVE_OPENAI_H_
#define FGEMMA_SERVE_OPENAI_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fgemma/function_caller.h"

namespace fg::text {
struct ToolCatalog;
}  // namespace fg::text

namespace fg::serve {

// What one request may ask for; a request beyond a limit gets 400 (413 for the body) with a
// message naming the limit and the flag that sets it.
struct Limits {
  size_t max_body_bytes = size_t{1} << 20;  // --max-body (bytes)
  size_t max_messages = 64;                 // --max-messages
  size_t max_tools = 64;                    // --max-tools
  int64_t max_tokens = 1024;                // --max-tokens: max_tokens a request may ask for
  int64_t default_max_tokens = 256;         // when the request names none (fgemma call's -n)
  size_t max_stop = 4;                      // stop strings (OpenAI's limit)
  int max_calls = 1;                        // --max-calls: calls per answer with parallel calls
};

// An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}, sent with
// `http_status`.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" = null
  std::string code;   // "" = null
  nlohmann::json ToJson() const;
};

ApiError BadRequest(std::string message, std::string param = "");

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

struct ChatRequest {
  std::string model;
  std::string catalog_json;       // {"tools": [...]}: the FunctionCaller's catalog
  std::string developer_message;  // "": FunctionGemma's default
  std::vector<ChatTurn> turns;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string named_tool;  // kNamed: the only tool the grammar admits calls of
  ConstrainMode constrain = ConstrainMode::kAuto;  // FunctionCallerOptions::constrain
  int max_calls = 1;
  CallControl control;  // sampling, max_tokens (always set); `cancelled` is the server's
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // The turns are one user turn: answered with FunctionCaller::Call(turns[0].text).
  bool single_request() const { return turns.size() == 1; }
};

// Parses a /v1/chat/completions body. Never throws; any body gives a request or an error.
std::optional<ApiError> ParseChatRequest(std::string_view body, const Limits& limits,
                                         ChatRequest* out);

struct CompletionRequest {
  std::string model;
  std::string prompt;
  CallControl control;  // sampling and max_tokens (always set)
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
};

// Parses a /v1/completions body (prompt: one string, or an array of one string).
std::optional<ApiError> ParseCompletionRequest(std::string_view body, const Limits& limits,
                                               CompletionRequest* out);

// The answer of a chat request, in OpenAI's terms.
struct ChatAnswer {
  std::string content;  // the text (null in JSON when there are tool calls and no text)
  struct ToolCall {
    std::string id, name, arguments;  // arguments: a JSON object's text
  };
  std::vector<ToolCall> tool_calls;
  std::string finish_reason;  // "tool_calls", "stop" or "length"
  int64_t prompt_tokens = 0, completion_tokens = 0;
};

// Turns a FunctionCaller result into the answer: valid calls become tool_calls (ids
// "call_<id>_<i>"), the text is cut at the first stop string, finish_reason from the result's
// stop reason. With tool_choice none, no tool calls: the text before the first call.
ChatAnswer MakeChatAnswer(const CallResult& result, const ChatRequest& request,
                          std::string_view id);

// Cuts `text` at the first of `stop` (true if one was found).
bool CutAtStop(std::string* text, const std::vector<std::string>& stop);

// The response bodies. `created` is the Unix time; `model` the served model's name.
nlohmann::json ChatCompletionJson(const ChatAnswer& a, std::string_view id, int64_t created,
                                  std::string_view model);
// The SSE events of a streamed chat answer ("data: {...}\n\n" each, "data: [DONE]\n\n" last), made
// while the model decodes. Update() takes the output so far (the generated tokens' text, special
// tokens as text) and returns the events it settles: the role, then the content the model writes
// before any call, as it comes, held back only where it could still become a call or a stop
// string or ends inside a UTF-8 character; and, where a call the output begins is certain to be a
// call of the answer (below), per call {index, id, type, function: {name, arguments: ""}} as soon
// as its name is complete, then its arguments' JSON text as it settles: the longest prefix of the
// answer's `arguments` string no later token can change (object keys come out in the order the
// answer's JSON sorts them, so a key is sent once no key sorting before it can still come; a
// string value is sent as it is written, a number, boolean or bare word once it ends; never
// inside a UTF-8 character). Finish() takes the final answer (MakeChatAnswer of the same output)
// and returns the rest: the content not sent yet, the calls (or the rest of their arguments) not
// sent yet, the finish_reason, usage when asked for, [DONE]. The events of one answer add up to
// the answer ChatCompletionJson gives.
//
// When is a begun call certain? The output could still turn into a text answer (an invalid or cut
// call) unless the decoder forbids it, so calls are streamed while decoding only when the
// request's call grammar guarantees the call ends complete and valid (docs/architecture.md "The
// budget"): tool_choice "auto" (the grammar lets a call start only when it can be finished in the
// tokens left), and "required" or a named function when `budget` (the tokens the caller may write:
// max_tokens, or fewer when the context is the limit) surely fits the shortest call the grammar
// admits; otherwise (tool_choice "none", or "required" with a budget that may cut the call, or
// unknown, -1) the calls are held back and sent by Finish, as the answer has them. Call ids are
// the answer's, "call_<n>_<i>" for a stream id "chatcmpl-<n>". Should an answer ever differ
// from the calls already sent (an output no grammar would allow), Finish sends an error event
// instead of a wrong answer.
class ChatStream {
 public:
  ChatStream(const ChatRequest& request, std::string id, int64_t created, std::string model,
             int64_t budget = -1);
  ~ChatStream();
  std::vector<std::string> Update(std::string_view output);
  std::vector<std::string> Finish(const ChatAnswer& a);
  // Whether calls are streamed while decoding (see above).
  bool streams_calls() const { return catalog_ != nullptr; }

 private:
  nlohmann::json Chunk(nlohmann::json delta, nlohmann::json finish) const;
  void Role(bool tool_calls, std::vector<std::string>* ev);
  void UpdateCalls(std::string_view output, std::vector<std::string>* ev);
  std::string CallId(size_t index) const;
  std::string CallHeader(size_t index, const std::string& id, const std::string& name) const;
  std::string CallArguments(size_t index, std::string_view piece) const;
  const std::vector<std::string> stop_;
  const bool none_, include_usage_;
  const std::string id_, model_;
  const int64_t created_;
  std::string sent_;  // the content sent so far
  bool role_sent_ = false;
  // Null unless calls are streamed while decoding: the request's catalog (names and schemas).
  std::unique_ptr<const text::ToolCatalog> catalog_;
  struct SentCall {
    std::string id, name, arguments;  // the arguments text sent so far
  };
  std::vector<SentCall> calls_;  // the calls sent while decoding, by index
  bool calls_stopped_ = false;   // the output left the call syntax: the rest waits for Finish
};

// The events of a whole answer at once (ChatStream's Finish alone).
std::vector<std::string> ChatCompletionEvents(const ChatAnswer& a, std::string_view id,
                                              int64_t created, std::string_view model,
                                              bool include_usage);

struct TextAnswer {
  std::string text;
  std::string finish_reason;  // "stop" or "length"
  int64_t prompt_tokens = 0, completion_tokens = 0;
};
nlohmann::json CompletionJson(const TextAnswer& a, std::string_view id, int64_t created,
                              std::string_view model);
// A raw completion's events as it decodes, like ChatStream: Update() with the text so far sends
// what is settled (held back where it could still become a stop string or ends inside a UTF-8
// character), Finish() the rest, the finish_reason, usage when asked for, [DONE].
class TextStream {
 public:
  TextStream(std::vector<std::string> stop, bool include_usage, std::string id, int64_t created,
             std::string model);
  std::vector<std::string> Update(std::string_view text);
  std::vector<std::string> Finish(const TextAnswer& a);

 private:
  std::string Event(std::string_view text, nlohmann::json finish) const;
  const std::vector<std::string> stop_;
  const bool include_usage_;
  const std::string id_, model_;
  const int64_t created_;
  std::string sent_;
};

std::vector<std::string> CompletionEvents(const TextAnswer& a, std::string_view id,
                                          int64_t created, std::string_view model,
                                          bool include_usage);

// The part of `text` (an output so far) no later token can change: cut at the first `stop`
// string, else without a tail that could still grow into one of `stop` or `holds`, and never
// ending inside a UTF-8 character.
std::string SettledPrefix(std::string_view text, const std::vector<std::string>& stop,
                          const std::vector<std::string_view>& holds);

// Splits UTF-8 `s` into pieces of about `n` bytes, never inside a character.
std::vector<std::string> Fragments(std::string_view s, size_t n);

// "data: " + json + "\n\n".
std::string SseEvent(const nlohmann::json& j);

}  // namespace fg::serve

#endif  // FGEMMA_SERVE_OPENAI_H_
