#include "src/call/typos.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fgemma/function_caller.h"
#include "src/base/status_matchers.h"
#include "src/call/runtime_model.h"
#include "src/gguf_tools/synthetic.h"
#include "src/text/tokenizer.h"
#include "src/text/tool_catalog.h"
#include "tests/testing/typo_invariants.h"

namespace fg::call {
namespace {

using ::testing::ElementsAre;

TEST(OneEditApart, OneChangeDropAddOrSwap) {
  EXPECT_TRUE(OneEditApart("fnid", "find"));    // a swap
  EXPECT_TRUE(OneEditApart("feeed", "feed"));   // a letter more
  EXPECT_TRUE(OneEditApart("paue", "pause"));   // a letter less
  EXPECT_TRUE(OneEditApart("spil", "soil"));    // a letter changed
  EXPECT_TRUE(OneEditApart("abcd", "abdc"));    // a swap at the end
  EXPECT_TRUE(OneEditApart("bacd", "abcd"));    // a swap at the start
  EXPECT_TRUE(OneEditApart("xfeed", "feed"));   // a letter more at the start
  EXPECT_TRUE(OneEditApart("feedx", "feed"));   // a letter more at the end
  EXPECT_FALSE(OneEditApart("feed", "feed"));   // equal
  EXPECT_FALSE(OneEditApart("fnidd", "find"));  // two edits
  EXPECT_FALSE(OneEditApart("abdc", "bacd"));   // two swaps
  EXPECT_FALSE(OneEditApart("acbd", "abdc"));   // two changes, not neighbours swapped
  EXPECT_FALSE(OneEditApart("feeeed", "feed"));
  EXPECT_FALSE(OneEditApart("fond", "find!"));
  EXPECT_FALSE(OneEditApart("", "ab"));
  EXPECT_TRUE(OneEditApart("", "a"));
}

// A vocabulary of whole-word tokens ("▁word"), with <unk> for every other byte.
std::unique_ptr<text::Tokenizer> WordTokenizer(const std::vector<std::string>& words) {
  text::Vocab v;
  v.tokens = {"<unk>", "<s>", "</s>"};
  for (const std::string& w : words) v.tokens.push_back("\xE2\x96\x81" + w);
  auto t = text::Tokenizer::Create(std::move(v));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(*t) : nullptr;
}

constexpr char kCatalog[] = R"([
  {"name": "feed_pet", "description": "Feeds a pet now.",
   "parameters": {"type": "object", "properties": {
     "pet": {"type": "string", "description": "The pet's name"},
     "food": {"type": "string", "enum": ["dry", "canned"]},
     "times": {"type": "array", "items": {"type": "string", "enum": ["morning", "evening"]}}},
     "required": ["pet"]}},
  {"name": "find_pet", "description": "Shows where the pet is.", "examples": ["where is Milo"],
   "parameters": {"type": "object", "properties": {}}}])";

TEST(CatalogTexts, NamesDescriptionsExamplesKeysAndMembers) {
  FG_ASSERT_OK_AND_ASSIGN(const text::ToolCatalog cat, text::ParseToolCatalog(kCatalog));
  EXPECT_THAT(CatalogTexts(cat),
              ElementsAre("feed_pet", "Feeds a pet now.", "food", "dry", "canned", "pet",
                          "The pet's name", "times", "morning", "evening", "find_pet",
                          "Shows where the pet is.", "where is Milo"));
}

TEST(TypoMender, MendsUnknownWordsIntoTheAppsOwn) {
  auto tk = WordTokenizer({"feed", "Feeds", "find", "pet", "the", "then", "Milo", "fond", "where",
                           "dry", "canned", "morning", "evening", "Shows", "now", "name", "times",
                           "food", "Daisy", "Coco"});
  ASSERT_NE(tk, nullptr);
  FG_ASSERT_OK_AND_ASSIGN(const text::ToolCatalog cat, text::ParseToolCatalog(kCatalog));
  const TypoMender mender(*tk, CatalogTexts(cat));
  // The app's words: known ones of 3 or more letters, lower case, once each ("is" is short,
  // "Milo" is known and comes from an example, the "pet" of "pet's" touches an apostrophe).
  EXPECT_THAT(mender.words(),
              ElementsAre("canned", "dry", "evening", "feed", "feeds", "find", "food", "milo",
                          "morning", "name", "now", "pet", "shows", "the", "times", "where"));
  int n = -1;
  EXPECT_EQ(mender.Mend("Feeed Coco", &n), "Feed Coco");  // the first letter's case kept
  EXPECT_EQ(n, 1);
  EXPECT_EQ(mender.Mend("fnid Daisy, then feeed her", &n), "find Daisy, then feed her");
  EXPECT_EQ(n, 2);
  EXPECT_EQ(mender.Mend("give her cannned food in the mornnig", &n),
            "give her canned food in the morning");
  EXPECT_EQ(n, 2);
  // Left as written: a known word ("fond" is one edit from "find" and "food"; "then" from "the"),
  // a name the vocabulary knows, a short word, an unknown word no app word is one edit from, a
  // word with a capital inside or all capitals, a word touching a digit, an apostrophe or a
  // non-ASCII letter.
  for (const char* same :
       {"I can't fond Milo", "then", "fed the pet", "serendipity", "feEed", "FEEED", "feeed2",
        "2feeed", "feeed's", "o'feeed", "feeed\xC3\xA9", "\xC3\xA9"
                                                     "feeed"}) {
    EXPECT_EQ(mender.Mend(same, &n), same);
    EXPECT_EQ(n, 0) << same;
  }
  // A vocabulary that knows a word in lower case or capitalized knows it as written.
  EXPECT_EQ(mender.Mend("Where Is Daisy", &n), "Where Is Daisy");
  EXPECT_EQ(n, 0);
  EXPECT_EQ(mender.Mend("", nullptr), "");
  // Two app words one edit away: no choice.
  auto tk2 = WordTokenizer({"cart", "card"});
  ASSERT_NE(tk2, nullptr);
  const std::vector<std::string> texts = {"cart or card"};
  const TypoMender two(*tk2, texts);
  EXPECT_EQ(two.Mend("carx, carts, crad", &n), "carx, cart, card");
  EXPECT_EQ(n, 2);
}

// Random requests of app words, some with one edit (a letter swapped, dropped, doubled or
// changed), others' words, names, digits, apostrophes, UTF-8 letters and punctuation between
// them, in every case: whatever Mend does keeps tests/testing/typo_invariants.h's invariants
// (what fuzz/call_typos_fuzz.cc checks on arbitrary bytes), and it does mend and leave alone.
TEST(TypoMender, RandomRequestsChangeOnlyTheMendedLetters) {
  const std::vector<std::string> known = {"feed",    "Feeds", "find",  "pet",  "the",    "then",
                                          "Milo",    "fond",  "where", "dry",  "canned", "morning",
                                          "evening", "Shows", "now",   "name", "times",  "food"};
  auto tk = WordTokenizer(known);
  ASSERT_NE(tk, nullptr);
  FG_ASSERT_OK_AND_ASSIGN(const text::ToolCatalog cat, text::ParseToolCatalog(kCatalog));
  const TypoMender mender(*tk, CatalogTexts(cat));
  const std::vector<std::string> glue = {" ", ", ", "! ",           "'",    "2", " 3 ", "\xC3\xA9",
                                         "-", "  ", "\xE2\x96\x81", "\xFF", "."};
  std::mt19937 rng(7);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  int mended_requests = 0, as_written = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string request;
    const size_t n_words = 1 + pick(6);
    for (size_t w = 0; w < n_words; ++w) {
      if (w > 0 || pick(4) == 0) request += glue[pick(glue.size())];
      std::string word =
          pick(5) == 0 ? std::string("Xyzzy").substr(0, 2 + pick(4)) : known[pick(known.size())];
      if (pick(2) == 0 && word.size() > 1) {
        const size_t at = pick(word.size() - 1);
        switch (pick(4)) {
          case 0:
            std::swap(word[at], word[at + 1]);
            break;
          case 1:
            word.erase(at, 1);
            break;
          case 2:
            word.insert(at, 1, word[at]);
            break;
          default:
            word[at] = static_cast<char>('a' + pick(26));
            break;
        }
      }
      if (pick(3) == 0) word[0] = static_cast<char>(std::toupper(word[0]));
      if (pick(10) == 0) {
        for (char& c : word) c = static_cast<char>(std::toupper(c));
      }
      request += word;
    }
    int n = -1;
    const std::string out = mender.Mend(request, &n);
    EXPECT_EQ(fg::testing::TypoMendViolation(request, out, n, mender.words()), "")
        << request << " -> " << out;
    (n > 0 ? mended_requests : as_written) += 1;
  }
  EXPECT_GT(mended_requests, 300);
  EXPECT_GT(as_written, 300);
}

// The tiny synthetic model with a 1,024-token vocabulary (the tiny preset's 640 tokens stop
// before the whole words), which knows "light" and "kitchen" as words (and "set", "room", "on",
// "off"), made once.
std::shared_ptr<const CallModel> WordModel() {
  static const std::shared_ptr<const CallModel> model = [] {
    std::shared_ptr<const CallModel> m;
    auto spec = gguf::SyntheticPreset("tiny");
    EXPECT_TRUE(spec.ok());
    if (!spec.ok()) return m;
    spec->context = 1024;
    spec->vocab = 1024;
    const std::string path = ::testing::TempDir() + "/typos_tiny.gguf";
    const Status written = gguf::WriteSyntheticGemma3(*spec, path);
    EXPECT_TRUE(written.ok()) << written.ToString();
    auto loaded = CallModel::Load(path);
    EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
    if (loaded.ok()) m = std::move(*loaded);
    return m;
  }();
  return model;
}

constexpr char kLights[] = R"([{"name": "set_light", "description": "Turns a light on or off.",
  "parameters": {"type": "object", "properties": {
    "room": {"type": "string", "enum": ["kitchen", "hall"]},
    "state": {"type": "string", "enum": ["on", "off"]}}, "required": ["state"]}}])";

// A caller of kLights on WordModel() with fix_typos = `fix` (and `constrain`).
std::unique_ptr<FunctionCaller> LightsCaller(int fix,
                                             ConstrainMode constrain = ConstrainMode::kCall) {
  FunctionCallerOptions o;
  o.max_tokens = 32;
  o.threads = 1;
  o.context = 1024;
  o.fix_typos = fix;
  o.constrain = constrain;
  auto model = WordModel();
  if (model == nullptr) return nullptr;
  auto c = FunctionCaller::Create(model, kLights, o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

// FunctionCallerOptions::fix_typos: on (1), the caller reads the mended request, the same call
// as the mended text read as written; off (0) and by default on a FunctionGemma vocabulary (the
// tiny model's), the request as written; other values are refused.
TEST(FunctionCaller, ReadsTheRequestWithItsTyposMended) {
  auto on = LightsCaller(1), off = LightsCaller(0), by_default = LightsCaller(-1);
  ASSERT_TRUE(on && off && by_default);
  const std::string typo = "the ligth in the kitchn, off";
  FG_ASSERT_OK_AND_ASSIGN(const CallResult mended, on->Call(typo));
  EXPECT_EQ(mended.mended_request, "the light in the kitchen, off");
  EXPECT_EQ(mended.stats.mended_words, 2);
  FG_ASSERT_OK_AND_ASSIGN(const CallResult as_read, off->Call(mended.mended_request));
  EXPECT_EQ(mended.tokens, as_read.tokens);
  EXPECT_EQ(mended.text, as_read.text);
  EXPECT_TRUE(as_read.mended_request.empty());
  for (FunctionCaller* c : {off.get(), by_default.get()}) {
    FG_ASSERT_OK_AND_ASSIGN(const CallResult r, c->Call(typo));
    EXPECT_TRUE(r.mended_request.empty());
    EXPECT_EQ(r.stats.mended_words, 0);
  }
  // Nothing to mend: the request as written, nothing reported.
  FG_ASSERT_OK_AND_ASSIGN(const CallResult plain, on->Call("the light, off"));
  EXPECT_TRUE(plain.mended_request.empty());
  EXPECT_EQ(plain.stats.mended_words, 0);
  for (int bad : {-2, 2}) {
    FunctionCallerOptions x;
    x.fix_typos = bad;
    EXPECT_THAT(
        FunctionCaller::Create(WordModel(), kLights, x).status(),
        fg::testing::StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("fix_typos")));
  }
}

// CallConversation reads each user turn as Call reads a request: one user turn gives Call's
// answer and mended_request, bit for bit; in a longer conversation every user turn is mended
// (the answer is that of the mended turns read as written) and mended_request is the last one;
// PromptTokens and ConversationTokens give the tokens read.
// Unconstrained: this random model's constrained call is the same for both texts, its free text
// is not.
TEST(FunctionCaller, ReadsAConversationsUserTurnsWithTheirTyposMended) {
  auto on = LightsCaller(1, ConstrainMode::kOff), off = LightsCaller(0, ConstrainMode::kOff);
  ASSERT_TRUE(on && off);
  const std::string typo = "the ligth in the kitchn, off", read = "the light in the kitchen, off";
  FG_ASSERT_OK_AND_ASSIGN(const CallResult call, on->Call(typo));
  FG_ASSERT_OK_AND_ASSIGN(const CallResult one,
                          on->CallConversation({ChatTurn{ChatTurn::Role::kUser, typo, {}}}));
  EXPECT_EQ(one.tokens, call.tokens);
  EXPECT_EQ(one.text, call.text);
  EXPECT_EQ(one.mended_request, read);
  EXPECT_EQ(one.stats.mended_words, 2);
  FG_ASSERT_OK_AND_ASSIGN(const CallResult as_written, off->Call(typo));
  EXPECT_NE(as_written.text, call.text);  // the mending changed this answer

  ChatTurn model_turn;
  model_turn.role = ChatTurn::Role::kModel;
  model_turn.exchanges.push_back(
      {"set_light", nlohmann::json{{"state", "on"}}, nlohmann::json{{"ok", true}}});
  const std::vector<ChatTurn> typos = {{ChatTurn::Role::kUser, "the kitchn ligth, on", {}},
                                       model_turn,
                                       {ChatTurn::Role::kUser, typo, {}}};
  const std::vector<ChatTurn> mended = {{ChatTurn::Role::kUser, "the kitchen light, on", {}},
                                        model_turn,
                                        {ChatTurn::Role::kUser, read, {}}};
  FG_ASSERT_OK_AND_ASSIGN(const CallResult a, on->CallConversation(typos));
  FG_ASSERT_OK_AND_ASSIGN(const CallResult b, off->CallConversation(mended));
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.stats.mended_words, 4);
  EXPECT_EQ(a.mended_request, read);
  FG_ASSERT_OK_AND_ASSIGN(const CallResult c, off->CallConversation(typos));
  EXPECT_EQ(c.stats.mended_words, 0);
  EXPECT_TRUE(c.mended_request.empty());
  // Only an earlier turn mended: counted, but the last turn is read as given.
  std::vector<ChatTurn> first_only = typos;
  first_only.back().text = read;
  FG_ASSERT_OK_AND_ASSIGN(const CallResult d, on->CallConversation(first_only));
  EXPECT_EQ(d.stats.mended_words, 2);
  EXPECT_TRUE(d.mended_request.empty());
  EXPECT_EQ(d.text, b.text);
  // The prompt tokens the callers report are the ones they read.
  FG_ASSERT_OK_AND_ASSIGN(const std::vector<int32_t> p_on, on->PromptTokens(typo));
  FG_ASSERT_OK_AND_ASSIGN(const std::vector<int32_t> p_read, off->PromptTokens(read));
  FG_ASSERT_OK_AND_ASSIGN(const std::vector<int32_t> p_off, off->PromptTokens(typo));
  EXPECT_EQ(p_on, p_read);
  EXPECT_NE(p_off, p_read);
  FG_ASSERT_OK_AND_ASSIGN(const std::vector<int32_t> c_on, on->ConversationTokens(typos));
  FG_ASSERT_OK_AND_ASSIGN(const std::vector<int32_t> c_read, off->ConversationTokens(mended));
  FG_ASSERT_OK_AND_ASSIGN(const std::vector<int32_t> c_off, off->ConversationTokens(typos));
  EXPECT_EQ(c_on, c_read);
  EXPECT_NE(c_off, c_read);
}

}  // namespace
}  // namespace fg::call
