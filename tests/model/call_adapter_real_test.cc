// The shipped call adapter (models/fgemma-call-lora.gguf, `make adapter`) on the real model
// (FGEMMA_MODEL): its accuracy on the 8 held-out catalogs of data/calls/ (never trained on, not
// even as distractors), greedy and constrained, through `fgemma eval`, must not fall below
// what it measured when it was trained (docs/tuning.md has the table; the issue's targets, 90 %
// right function and 75 % exact calls, are not reached yet: see there), alone (--tool-channel 0
// --copy-bias 0) and with what fgemma applies by default for a base model: the noisy-channel
// tool prior and argument check (src/call/tool_channel.h) and the copy prior.
// And `fgemma call` applies the adapter by default to the default model, also when -m names
// it; --no-lora runs the base model alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/testing/cli_runner.h"

namespace fg {
namespace {

// The shipped adapter (`make adapter`: 3 epochs of the 68-catalog corpus) measured 65.0 % right
// function and 39.4 % exact calls alone when it was trained, and 77.1 % / 54.0 % with the tool
// prior (weight 4), the argument check and the copy prior (bias 8; 2026-12-02); 55.3 % exact
// once the argument check also weighed enum members, 56.8 % with the key prior for said enum
// members, 58.1 % with durations converted to the argument's unit, 59.4 % with other units,
// unsaid optional numbers dropped and said boolean keys (2026-12-03); 79.2 % / 62.0 % with the
// tool texts' enum members and parameters' descriptions, 63.0 % exact with booleans undone
// ("unmute") and copies cut before another argument's number, 63.3 % with the word guard
// (2026-12-04). The adapter of `make adapter`'s second stage (one more epoch of the calls and
// the tool prior together, `--objective both`, so that its prior runs with the adapter):
// 69.1 % / 44.1 % alone, 82.3 % / 67.8 % with every default; after its prior's ranking steps
// (`--prior-negatives`, the stages after it) 83.6 % / 68.2 % (2026-12-04); 69.6 % exact with
// the copy prior's word-end guard and copies cut before another argument's string, 70.4 %
// with the unsaid optional numbers and arrays the check drops, 84.6 % / 71.4 % with a call that
// invents a number decoded again without its tool (2026-12-05). The tests score a fixed sample
// (below): on a 2-core AVX2 CPU, alone 136 / 198 right functions (80 exact) on every 4th
// request, with every default 83 / 103 (72 exact) on every 8th (2026-12-06). The eval is
// deterministic on one machine; the margin of 5 and 3 requests (~2.5 points) covers another
// ISA's kernels (rounding can flip a near tie); a larger drop is a change in the model, the
// runtime, the prompt or the adapter.
constexpr int kMinFunction = 131, kMinExact = 75;                   // of 198
constexpr int kMinFunctionWithPrior = 80, kMinExactWithPrior = 69;  // of 103

std::string ModelPath() {
  const char* p = std::getenv("FGEMMA_MODEL");
  return p ? p : "";
}

std::string Adapter() { return std::string(FG_SOURCE_DIR) + "/models/fgemma-call-lora.gguf"; }

// Every `every`-th request of a held-out catalog (its 1st, (every+1)th, ...), written into the
// test process's temporary folder (again, with the same bytes, by each eval that asks for it:
// a few KiB): the tests score a fixed sample, so that the model
// suite fits CI on a CPU without AVX-512 (the whole held-out set is a benchmark:
// bench/heldout_eval.sh, docs/tuning.md).
std::string Sample(const std::string& catalog, int every) {
  const std::string src =
      std::string(FG_SOURCE_DIR) + "/data/calls/eval_requests/" + catalog + ".jsonl";
  const std::string out =
      testing::ProcessTempDir() + "/" + catalog + "_every" + std::to_string(every) + ".jsonl";
  const auto r = testing::RunCommand("awk 'NR % " + std::to_string(every) + " == 1' '" + src +
                                     "' > '" + out + "'");
  EXPECT_EQ(r.rc, 0) << r.out;
  return out;
}

// fgemma eval's "all" line on every `every`-th request of the held-out catalogs `catalogs`
// with `adapter` and `flags`.
nlohmann::json Eval(const std::string& adapter, const std::vector<std::string>& catalogs, int every,
                    const std::string& flags) {
  const std::string dir = std::string(FG_SOURCE_DIR) + "/data/calls/";
  std::string args = "eval -m " + ModelPath() + " --lora " + adapter + " --json -t 2" + flags;
  for (const std::string& c : catalogs) {
    args += " --tools " + dir + "catalogs/" + c + ".json --data " + Sample(c, every);
  }
  auto r = testing::RunFgemma(args, false);
  EXPECT_EQ(r.rc, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  if (!j.is_array() || j.empty() || j.back()["catalog"] != "all") {
    ADD_FAILURE() << r.out;
    return {};
  }
  return j.back();
}

// Eval's "all" line for the shipped adapter on every `every`-th request of every held-out
// catalog (`n` of the 774), with `flags`.
nlohmann::json HeldOut(int every, int n, const std::string& flags) {
  const nlohmann::json all = Eval(Adapter(),
                                  {"garden", "pet_care", "printer", "translation", "banking",
                                   "robot_vacuum", "fitness", "tv_box"},
                                  every, flags);
  if (all.empty()) return all;
  EXPECT_EQ(all["requests"].get<int>(), n);
  EXPECT_EQ(all["valid"].get<int>(), n);
  std::printf("held-out, every %dth request%s: right function %d / %d, exact %d\n", every,
              flags.c_str(), all["function"].get<int>(), n, all["exact"].get<int>());
  return all;
}

// Two tests, so that each eval has the test timeout to itself. The adapter alone scores every
// 4th held-out request (198; 167 s on a 2-core AVX2 CPU), with the tool prior every 8th (103;
// the prior scores the request under every tool: ~3 s a request there).
TEST(CallAdapterRealTest, HeldOutCatalogsAdapterAlone) {
  if (ModelPath().empty()) GTEST_SKIP() << "FGEMMA_MODEL is not set (make test sets it)";
  const nlohmann::json all = HeldOut(4, 198, " --tool-channel 0 --copy-bias 0");
  ASSERT_FALSE(all.empty());
  EXPECT_GE(all["function"].get<int>(), kMinFunction);
  EXPECT_GE(all["exact"].get<int>(), kMinExact);
}

TEST(CallAdapterRealTest, HeldOutCatalogsWithTheToolPrior) {
  if (ModelPath().empty()) GTEST_SKIP() << "FGEMMA_MODEL is not set (make test sets it)";
  const nlohmann::json all = HeldOut(8, 103, "");  // the default: the tool prior and the rest
  ASSERT_FALSE(all.empty());
  EXPECT_GE(all["function"].get<int>(), kMinFunctionWithPrior);
  EXPECT_GE(all["exact"].get<int>(), kMinExactWithPrior);
}

// An app's adapter tuned on its calls alone is not marked for the tool prior; on the default
// model its prior is then the shipped call adapter's (--prior-lora), not the base model's. The
// shipped tune adapter (models/fgemma-tune-lora.gguf, where an app's tune starts; unmarked)
// stands in for one here, with the prior choosing every name (--tool-channel 100) on two
// held-out catalogs: measured 175 / 210 right functions (159 exact) with the shipped prior,
// 160 (145) with --prior-lora none (2026-12-05); on every 6th request, the sample scored here,
// 33 / 36 (32 exact) and 30 (29) on a 2-core AVX2 CPU (2026-12-06; 105 s each). Were the
// base model's prior used, both evals would be the same.
TEST(CallAdapterRealTest, AnUnmarkedAdapterGetsTheShippedAdaptersPrior) {
  if (ModelPath().empty()) GTEST_SKIP() << "FGEMMA_MODEL is not set (make test sets it)";
  const std::string tune = std::string(FG_SOURCE_DIR) + "/models/fgemma-tune-lora.gguf";
  const std::vector<std::string> catalogs = {"garden", "pet_care"};
  const nlohmann::json shipped = Eval(tune, catalogs, 6, " --tool-channel 100");
  const nlohmann::json base = Eval(tune, catalogs, 6, " --tool-channel 100 --prior-lora none");
  ASSERT_FALSE(shipped.empty());
  ASSERT_FALSE(base.empty());
  ASSERT_EQ(shipped["requests"].get<int>(), 36);
  std::printf("prior alone: %d right functions with the shipped prior, %d with the base model's\n",
              shipped["function"].get<int>(), base["function"].get<int>());
  EXPECT_GE(shipped["function"].get<int>(), 31);
  EXPECT_GT(shipped["function"].get<int>(), base["function"].get<int>());
}

// An app's labelled requests as its tools' examples in the tool prior's texts (--examples), with
// no tuning: printer (a held-out catalog), the 28 training requests of bench/per_app_tune.sh's
// old split (SPLIT=lines: every 3rd line) as the examples, its 50 test requests scored with the
// shipped adapter and every default. Measured 48 / 50 right functions (38 exact) with them, 42
// (31) without (2026-12-05).
TEST(CallAdapterRealTest, AnAppsRequestsAsExamplesOfItsTools) {
  if (ModelPath().empty()) GTEST_SKIP() << "FGEMMA_MODEL is not set (make test sets it)";
  const std::string src = std::string(FG_SOURCE_DIR) + "/data/calls/eval_requests/printer.jsonl";
  const std::string dir = testing::ProcessTempDir();
  const std::string train = dir + "/printer_train.jsonl", test = dir + "/printer_test.jsonl";
  ASSERT_EQ(testing::RunCommand("awk 'NR % 3 == 1 && ++n <= 30' " + src + " > " + train +
                                " && awk 'NR % 3 != 1 && ++n <= 50' " + src + " > " + test)
                .rc,
            0);
  auto eval = [&](const std::string& flags) {
    const std::string catalog = std::string(FG_SOURCE_DIR) + "/data/calls/catalogs/printer.json";
    auto r = testing::RunFgemma("eval -m " + ModelPath() + " --lora " + Adapter() +
                                    " --json -t 2 --tools " + catalog + " --data " + test + flags,
                                false);
    EXPECT_EQ(r.rc, 0) << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_array() && !j.empty() ? j.back() : nlohmann::json::object();
  };
  const nlohmann::json with = eval(" --examples " + train), without = eval("");
  ASSERT_EQ(with.value("requests", 0), 50);
  ASSERT_EQ(without.value("requests", 0), 50);
  std::printf("printer: %d right functions with its requests as examples, %d without\n",
              with["function"].get<int>(), without["function"].get<int>());
  EXPECT_GE(with["function"].get<int>(), 46);
  EXPECT_GE(with["function"].get<int>(), without["function"].get<int>() + 4);
}

// The argument check's enum part on a held-out request: without the copy prior (whose key
// prior writes the member the request says), the adapter writes `card: "credit"` for "freeze my
// debit card"; the base model finds the request far likelier after `card="debit"`, so the check
// replaces it (`--stats` counts it), and --no-arg-check keeps the decoded value. With the
// default copy prior the decoding itself writes "debit" (the key prior), check or not.
TEST(CallAdapterRealTest, ArgumentCheckReplacesAnEnumValueTheRequestNames) {
  if (ModelPath().empty()) GTEST_SKIP() << "FGEMMA_MODEL is not set (make test sets it)";
  const std::string call = "call -m " + ModelPath() + " --lora " + Adapter() + " --tools " +
                           std::string(FG_SOURCE_DIR) +
                           "/data/calls/catalogs/banking.json -t 2 \"freeze my debit card\"";
  const std::string debit = R"({"arguments":{"card":"debit","frozen":true},"name":"freeze_card"})"
                            "\n";
  auto checked = testing::RunFgemma(call + " --copy-bias 0 --stats", /*with_stderr=*/true);
  auto raw = testing::RunFgemma(call + " --copy-bias 0 --no-arg-check", false);
  auto key_prior = testing::RunFgemma(call + " --no-arg-check", false);
  ASSERT_EQ(checked.rc, 0) << checked.out;
  ASSERT_EQ(raw.rc, 0) << raw.out;
  ASSERT_EQ(key_prior.rc, 0) << key_prior.out;
  EXPECT_THAT(checked.out, ::testing::HasSubstr("(0 dropped, 1 replaced, 0 tools ruled out)"));
  EXPECT_THAT(checked.out, ::testing::HasSubstr(debit.substr(0, debit.size() - 1)));
  EXPECT_EQ(raw.out, R"({"arguments":{"card":"credit","frozen":true},"name":"freeze_card"})"
                     "\n");
  EXPECT_EQ(key_prior.out, debit);
  // --constrain auto (tool_choice "auto" in fgemma serve) gives the same call: a base model
  // taught by the adapter never opens a call itself, so auto runs as call.
  auto automatic = testing::RunFgemma(call + " --copy-bias 0 --constrain auto", false);
  ASSERT_EQ(automatic.rc, 0) << automatic.out;
  EXPECT_EQ(automatic.out, debit);
}

// A word the vocabulary does not know is read as the catalog's word one edit away: "epispde"
// as "episode", which the adapter reads as a whole series (a held-out tv_box request);
// --no-typo-fix reads the request as written. The mended request gives the very call the
// corrected one does. (Without the mending the call records one show on an AVX2 CPU, and the
// whole series with the AVX-512 kernels, whose rounding differs: not asserted.)
TEST(CallAdapterRealTest, AMisspeltWordIsReadAsTheCatalogsWord) {
  if (ModelPath().empty()) GTEST_SKIP() << "FGEMMA_MODEL is not set (make test sets it)";
  const std::string call = "call -m " + ModelPath() + " --lora " + Adapter() + " --tools " +
                           std::string(FG_SOURCE_DIR) + "/data/calls/catalogs/tv_box.json -t 2 ";
  const std::string typo = "\"Record every epispde of Breaking Bad.\"";
  auto mended = testing::RunFgemma(call + typo + " --stats", /*with_stderr=*/true);
  auto as_written =
      testing::RunFgemma(call + typo + " --no-typo-fix --stats", /*with_stderr=*/true);
  auto corrected = testing::RunFgemma(call + "\"Record every episode of Breaking Bad.\"", false);
  ASSERT_EQ(mended.rc, 0) << mended.out;
  ASSERT_EQ(as_written.rc, 0) << as_written.out;
  ASSERT_EQ(corrected.rc, 0) << corrected.out;
  EXPECT_THAT(mended.out, ::testing::HasSubstr("read as: Record every episode of Breaking Bad.\n"));
  EXPECT_THAT(mended.out, ::testing::HasSubstr("| typos 1 mended |"));
  const std::string want = R"({"arguments":{"series":true,"show":"Breaking Bad"},)"
                           R"("name":"record_program"})"
                           "\n";
  EXPECT_EQ(corrected.out, want);
  EXPECT_THAT(mended.out, ::testing::EndsWith("\n" + want));
  EXPECT_THAT(as_written.out, ::testing::Not(::testing::HasSubstr("read as:")));
  EXPECT_THAT(as_written.out, ::testing::HasSubstr("| typos 0 mended |"));
  EXPECT_THAT(as_written.out, ::testing::HasSubstr(R"("name":"record_program"})"));
}

// A measure the request says in another unit than the argument's. The adapter writes "for
// two hours" as `minutes: 120` itself, and the argument check keeps it (the base model finds
// the request likelier without `minutes=120`: the check dropped it until it learnt which
// arguments the request says, call::SaidArguments). Where the adapter gets the number wrong ("a
// quarter of an hour" -> 30), the copy prior writes the converted one (15).
TEST(CallAdapterRealTest, AMeasureInAnotherUnitIsConvertedAndKept) {
  if (ModelPath().empty()) GTEST_SKIP() << "FGEMMA_MODEL is not set (make test sets it)";
  auto call = [](const std::string& catalog, const std::string& request) {
    return "call -m " + ModelPath() + " --lora " + Adapter() + " --tools " +
           std::string(FG_SOURCE_DIR) + "/data/calls/catalogs/" + catalog + ".json -t 2 \"" +
           request + "\"";
  };
  const std::string water = call("garden", "Water the side yard for two hours");
  const std::string watered =
      R"({"arguments":{"minutes":120,"zone":"side yard"},"name":"start_watering"})"
      "\n";
  auto decoded = testing::RunFgemma(water + " --no-arg-check", false);
  auto checked = testing::RunFgemma(water, false);
  ASSERT_EQ(decoded.rc, 0) << decoded.out;
  ASSERT_EQ(checked.rc, 0) << checked.out;
  EXPECT_EQ(decoded.out, watered);
  EXPECT_EQ(checked.out, watered);
  const std::string yoga = call("fitness", "log a quarter of an hour yoga session");
  auto plain = testing::RunFgemma(yoga + " --copy-bias 0", false);
  auto copied = testing::RunFgemma(yoga, false);
  ASSERT_EQ(plain.rc, 0) << plain.out;
  ASSERT_EQ(copied.rc, 0) << copied.out;
  // (The adapter alone wrote 150 before it learnt the tool prior, 30 after, and 15 since its
  // prior's ranking stages on an AVX-512 CPU; on an AVX2 CPU, whose kernels round otherwise, it
  // still writes 30: a near tie, so only its function and activity are pinned. The volume below
  // is the case the copy prior alone converts.)
  EXPECT_THAT(plain.out, ::testing::HasSubstr(R"("activity":"yoga")")) << plain.out;
  EXPECT_THAT(plain.out, ::testing::HasSubstr(R"("name":"log_workout")")) << plain.out;
  EXPECT_EQ(copied.out, R"({"arguments":{"activity":"yoga","minutes":15},"name":"log_workout"})"
                        "\n");
  // A volume: "2 liters" is `ml` 2000 (the adapter alone writes 2).
  const std::string drank = call("fitness", "I drank 2 liters of water");
  auto liters = testing::RunFgemma(drank + " --copy-bias 0", false);
  auto ml = testing::RunFgemma(drank, false);
  ASSERT_EQ(liters.rc, 0) << liters.out;
  ASSERT_EQ(ml.rc, 0) << ml.out;
  EXPECT_EQ(liters.out, R"({"arguments":{"ml":2},"name":"log_water"})"
                        "\n");
  EXPECT_EQ(ml.out, R"({"arguments":{"ml":2000},"name":"log_water"})"
                    "\n");
}

TEST(CallAdapterRealTest, CallAppliesItByDefault) {
  if (ModelPath().empty()) GTEST_SKIP() << "FGEMMA_MODEL is not set (make test sets it)";
  // Without -m: the default model ($FGEMMA_MODEL) and the shipped adapter next to the binary.
  const std::string call = "call --tools " + std::string(FG_SOURCE_DIR) +
                           "/examples/smart_home.json -t 2 \"Turn the light on in the kitchen, please.\"";
  auto tuned = testing::RunFgemma(call, false);
  auto base = testing::RunFgemma(call + " --no-lora", false);
  auto named = testing::RunFgemma(call + " --lora " + Adapter(), false);
  ASSERT_EQ(tuned.rc, 0) << tuned.out;
  ASSERT_EQ(base.rc, 0) << base.out;
  EXPECT_EQ(tuned.out, named.out);
  EXPECT_NE(tuned.out, base.out);
  // -m naming the default model changes nothing (it used to drop the adapter silently).
  EXPECT_EQ(testing::RunFgemma(call + " -m " + ModelPath(), false).out, tuned.out);
  const nlohmann::json j = nlohmann::json::parse(tuned.out);
  EXPECT_EQ(j["name"], "set_light") << tuned.out;
  EXPECT_EQ(j["arguments"]["room"], "kitchen") << tuned.out;
  EXPECT_EQ(j["arguments"]["state"], "on") << tuned.out;
}

}  // namespace
}  // namespace fg
