// Logit processors of FunctionCaller's decode loop, chained around the sampler the way
// llama.cpp chains its samplers: after the head (src/call/decode_head.h) gives the candidates'
// logits, each processor may rule candidates out, the sampler picks one, and each processor
// may replace the pick. Today's processors are the guards for a model that never learned
// <escape> (a base Gemma 3):
//
//   string guard  in a free string (CallGrammar::InFreeString: where <escape> may close it)
//                 the first token may not be structure (, { } newline) or <escape> (the model
//                 would leave every string empty); after it, a structure token or one past the
//                 length budget closes the string instead (without the guard the model writes
//                 the value and goes on with ",key:..." inside the string until max_tokens)
//   digit guard   the same model repeats digits without end ("400400400..."), so past 12 digits
//                 in a row any allowed token that is not a digit (the number's end) is preferred
//
// and the copy prior (FunctionCallerOptions::copy_bias): in a free string, the tokens that
// continue a span of the request's text (the string so far followed by the token's text, the
// first token at the start of a word) get `bias` added to their logits, so that a value the
// request spells ("wanderlust", "grazie mille") is copied, not paraphrased; and the word guard
// rules out, among the likeliest tokens, those that make a word begun as a request's word (its
// first 3 bytes) go on as no word of the request ("Milano" or "Millo" for "Milo"). In a number
// value the same holds for the numbers the request says (RequestNumbers: "$50" -> 50, "one hundred
// and twenty" -> 120), once the number has begun as one of them: the tokens that go on
// spelling one get `bias`, and once the number so far is one, so do the tokens that end it (the
// model loses or adds digits: "50 bucks" -> 500, "one hundred and twenty" -> 12). A number
// followed by the argument's own unit ("5 minutes" for `minutes`: WordNamesKey), or a duration
// converted to that unit ("two hours" -> 120 for `minutes`: RequestConversions), is the value
// itself: its tokens get kKeyPriorBias from the first digit on; the others nothing at the
// first digit, where a value converted otherwise must not be pulled to the request's number.
// Outside values, the key prior (MakeCopyPrior): a parameter the request names (a number's unit
// said with a number, or a string enum's member) and that the call left out.
#ifndef FGEMMA_CALL_LOGIT_PROCESSORS_H_
#define FGEMMA_CALL_LOGIT_PROCESSORS_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fgemma/function_caller.h"
#include "src/runtime/sampler.h"
#include "src/text/call_grammar.h"
#include "src/text/tokenizer.h"
#include "src/text/tool_catalog.h"

namespace fg::call {

// FunctionCallerOptions::copy_bias's default for a base Gemma 3 vocabulary.
inline constexpr double kDefaultCopyBias = 8.0;
// The key prior's bias (MakeCopyPrior), whatever the copy bias: the adapter's preference for
// closing the call over a key it left out exceeded 8 nats on the per-app misses, so this is
// close to a rule.
inline constexpr float kKeyPriorBias = 30.0f;

// One sampled grammar step as the processors see it.
struct SampleStep {
  const text::CallGrammar& grammar;
  const text::CallGrammar::State& state;
  std::span<const int32_t> allowed;
};

class LogitProcessor {
 public:
  virtual ~LogitProcessor() = default;
  // Before sampling: may set candidates (cand[j] is the logit of step.allowed[j]) to -inf.
  virtual void Restrict(const SampleStep& step, std::span<float> cand) {
    (void)step;
    (void)cand;
  }
  // After sampling: the token to write instead of `tok` (*stats counts what it did).
  virtual int32_t Replace(const SampleStep& step, int32_t tok, CallStats* stats) {
    (void)step;
    (void)stats;
    return tok;
  }
  // A token the grammar forced (the only one allowed: not sampled).
  virtual void Forced(int32_t tok) { (void)tok; }
  // Every token written (sampled, replaced or forced; a stop token is never written).
  virtual void Written(int32_t tok) { (void)tok; }
};

class LogitProcessorChain {
 public:
  void Add(std::unique_ptr<LogitProcessor> p) { chain_.push_back(std::move(p)); }
  bool empty() const { return chain_.empty(); }

  // Restricts in order, samples, replaces in order: the token to write.
  int32_t Sample(const SampleStep& step, std::span<float> cand, runtime::Sampler& sampler,
                 CallStats* stats);
  void Forced(int32_t tok);
  void Written(int32_t tok);

 private:
  std::vector<std::unique_ptr<LogitProcessor>> chain_;
};

// The string guard with a budget of `budget` tokens (> 0) per string; `structural[t]`: token t's
// text starts with , { } or newline.
std::unique_ptr<LogitProcessor> MakeStringGuard(int budget, const std::vector<bool>* structural,
                                                int32_t escape);
// The digit guard; `digits[t]`: token t's text is digits only.
std::unique_ptr<LogitProcessor> MakeDigitGuard(const std::vector<bool>* digits);
// log sum_j exp(logits[j]), in double (candidate logits may run to the hundreds); -inf when
// empty. The softmax's normalizer, computed once a step and passed to the two below.
double LogSumExp(std::span<const float> logits);
// The softmax probability of the most likely of `logits` (0 when empty), given their
// LogSumExp `log_z`. FunctionCallerOptions::blend_sure compares it with the app's adapter's
// first choice.
double TopProbability(std::span<const float> logits, double log_z);
// FunctionCallerOptions::blend: two models' logits of the same allowed tokens made one, each
// log-softmax normalized over them: own[j] <- (1 - weight) log p_own(j) + weight log p_other(j),
// a weighted product of the two distributions (0 <= weight < 1; the sizes must match).
// `own_log_z` is LogSumExp(own), which the gate (TopProbability) has already computed.
void BlendLogProbs(std::span<float> own, double own_log_z, std::span<const float> other,
                   double weight);
// The numbers `request` says, as the decimal text a number value spells, in order, once each:
// digit runs ("50", "$1,200" -> "1200", "2.5"; a run with a leading zero is skipped) and runs of
// English number words ("five", "twenty-one", "one hundred and twenty", "two thousand five
// hundred"; "a hundred" is 100; "and" only between number words).
std::vector<std::string> RequestNumbers(std::string_view request);
// A number the request says and the word right after it, lower case ("" when none follows):
// "5 minutes" -> {"5", "minutes"}, "forty five mins" -> {"45", "mins"}.
struct SaidNumber {
  std::string text;
  std::string next_word;
  bool operator==(const SaidNumber&) const = default;
};
// RequestNumbers' numbers with the word after each, in order, each pair once.
std::vector<SaidNumber> RequestNumbersWithWords(std::string_view request);
// True when `word` names the unit of argument `key`: it equals, or (3 letters at least) begins,
// one of the key's parts split at '_', a final "s" dropped from both ("minutes" and "mins" for
// `minutes`, "km" for `distance_km`; not "hours" for `minutes`).
bool WordNamesKey(std::string_view word, std::string_view key);
// The measures `request` says, as numbers in their unit and the units near it: a number with a
// unit ("2 hours", "ninety minutes", "1.5 hours", "2 liters", "5 km") or one of the phrases
// "an hour", "a liter", "for a day" (not a rate: "twice an hour", "10000 steps a day"), "half
// an hour", "a half hour", "a quarter of an hour", "three quarters of an hour", "an hour and a
// half", "2 hours and a half"; in the said unit as said ("6.2 kilograms": {"6.2", "kilograms"},
// {"6.2", "kg"}) and converted, where that is a whole number, to the units of the
// same family up to two steps away (time: seconds, minutes, hours, days, weeks; volume:
// milliliters, liters; mass: grams, kilograms; length: centimeters, meters, kilometers): "two
// hours" -> {"7200", "seconds"}, {"120", "minutes"}, {"2", "hours"} (not 1/12 of a day); "two
// weeks" -> {"14", "days"} (not 20,160 minutes); "a quarter of an hour" -> {"15", "minutes"}; "2
// liters" -> {"2000", "milliliters"}, {"2000", "ml"}, {"2", "liters"}, {"2", "l"}. `next_word`
// is a word a key in that unit uses (the plural, and a short form where one is common), so
// that WordNamesKey matches it to a key (`minutes`, `goal_minutes`, `ml`).
std::vector<SaidNumber> RequestConversions(std::string_view request);
// The words of `s`: its runs of ASCII letters and digits, lower case ("Turn-off 2x" -> "turn",
// "off", "2x").
std::vector<std::string> LowerCaseWords(std::string_view s);
// `s` with its ASCII letters in lower case.
std::string LowerCase(std::string_view s);
// The word RequestAmounts gives as a money number's `next_word`.
inline constexpr std::string_view kMoneyWord = "$";
// The sums of money `request` says, as {number, kMoneyWord}: a number before a currency word
// ("60 dollars", "thirty bucks", "one hundred and twenty dollars", "50 euros"; dollar, buck, usd,
// euro, eur, quid) or after a currency sign ("$60", "$1,200", "$ 5", "€50", "£20"), each
// once, in order of the currency words and then the signs.
std::vector<SaidNumber> RequestAmounts(std::string_view request);
// The key of `tool`'s one number parameter for money: its key or description has the word
// amount, price, cost, bill, dollar(s), usd, money, budget or fee, and not percent ("Amount in
// dollars", "Total price paid"; not "Tip percent"); "" when the tool has none or more than one.
std::string MoneyKey(const text::Tool& tool);
// The index of the one member of a string enum `schema` that `request` says as whole words
// (case-insensitive; '_' and punctuation separate words: "resting" for `resting`, "brake check"
// for `brake_check`), or -1 when none or more than one is said, or the schema has no enum.
int SaidEnumMember(std::string_view request, const text::Schema& schema);
// An argument of a tool that the request names, with the value it says (SaidArguments).
struct SaidArgument {
  std::string key;
  nlohmann::json value;
  bool operator==(const SaidArgument&) const = default;
};
// The arguments of `tool` that `request` names, with their values: a number parameter whose
// unit is said with a number ("for 45 minutes": `minutes` 45; "for two hours": `minutes` 120,
// RequestConversions; WordNamesKey), the tool's money parameter when a sum is said ("pay $60 on
// the gas bill": `amount` 60; RequestAmounts, MoneyKey), a string enum parameter one of whose
// members the request says (SaidEnumMember), a boolean parameter whose key the request says as
// words ("mute the tv" for `mute`, "turn on subtitles" for `subtitles`; value null: whether is the
// model's to say) or undoes ("un" and a word of the key or of its description: "unmute" for `mute`,
// "unfreeze" for `frozen` described "True to freeze"; value false, what the data's labels say every
// time). A key comes more than once when the request says two numbers in its unit. The key prior
// writes these keys; the argument check keeps them (CheckArguments).
std::vector<SaidArgument> SaidArguments(std::string_view request, const text::Tool& tool);
// The numbers `request` says, as values: RequestNumbers', RequestConversions' (every unit
// they give) and RequestAmounts', each once, in order.
std::vector<double> SaidNumberValues(std::string_view request);
// What the argument check (CheckArguments) needs of a request, for one tool's call.
struct SaidFacts {
  std::vector<SaidArgument> arguments;  // SaidArguments(request, tool)
  std::vector<double> numbers;          // SaidNumberValues(request)
  std::string request;                  // the request itself
};
// Both, reading the request's numbers once.
SaidFacts SaidFactsOf(std::string_view request, const text::Tool& tool);
// The copy prior over `request` (case-sensitive); `pieces` gives a token's text and finds a
// text's token, and must outlive the processor. With `catalog` (may be null; must outlive the
// processor), also the key prior: a parameter of the called tool that the request names and
// that the call has not written yet gets kKeyPriorBias on the tokens that spell its key, and
// after a value on the tokens that go on to another key (',') rather than close the call (after
// a number, once it cannot go on to spell a said number). The parameters named are
// SaidArguments': a number parameter by its unit said with a number ("for 45 minutes":
// `minutes`, WordNamesKey) or a measure in another unit ("for two hours": `minutes`), a string
// enum by one of its members (SaidEnumMember: "what's my resting heart rate" names `kind`,
// whose members are live and resting), a boolean by its key ("mute the tv!": `mute`; "unmute":
// `mute` and then the tokens of false): the
// adapter leaves such arguments out ("Schedule the herb garden for fifteen minutes at 3:30 am"
// without `minutes`).
std::unique_ptr<LogitProcessor> MakeCopyPrior(std::string request, double bias,
                                              const text::Tokenizer* pieces,
                                              const text::ToolCatalog* catalog = nullptr);

}  // namespace fg::call

#endif  // FGEMMA_CALL_LOGIT_PROCESSORS_H_
