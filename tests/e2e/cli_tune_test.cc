// `fgemma tune` as the real binary on a synthetic model: the loss falls, the adapter loads and
// changes the output, same seed = same bytes, a run stopped and resumed = the uninterrupted
// run, and bad flags and data are clear errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "src/gguf/reader.h"
#include "tests/testing/cli_runner.h"

namespace fg {
namespace {

using ::testing::HasSubstr;
using Result = ::fg::testing::CliResult;

Result Fgemma(const std::string& args, bool with_stderr = true) {
  return ::fg::testing::RunFgemma(args, with_stderr);
}

// In this process's own folder (ProcessTempDir: cases run in parallel processes).
std::string Tmp(const std::string& name) {
  return ::fg::testing::ProcessTempDir() + "/cli_tune_" + name;
}

void Write(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The "loss X" of every progress line ("epoch E  step S/N  loss X ..."; stderr is not a terminal
// here: one line per step). No std::regex: GCC 12 warns inside it under the sanitizers.
std::vector<double> Losses(const std::string& log) {
  std::vector<double> out;
  const std::string key = "  loss ";
  for (size_t p = log.find(key); p != std::string::npos; p = log.find(key, p + 1)) {
    out.push_back(std::strtod(log.c_str() + p + key.size(), nullptr));
  }
  return out;
}

class CliTuneTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new std::string(Tmp("small.gguf"));
    ASSERT_EQ(Fgemma("mkmodel -o " + *model_ + " --preset small --seed 7").rc, 0);
    tools_ = new std::string(Tmp("tools.json"));
    Write(*tools_, R"([{"name":"set_light","description":"Turn a light on or off",
      "parameters":{"type":"object","properties":{"state":{"type":"string","enum":["on","off"]},
      "room":{"type":"string"}},"required":["state"]}},
      {"name":"start_timer","description":"Start a timer",
      "parameters":{"type":"object","properties":{"minutes":{"type":"integer"}},
      "required":["minutes"]}}])");
    data_ = new std::string(Tmp("data.jsonl"));
    Write(*data_,
          "{\"request\":\"turn the light on\",\"calls\":[{\"name\":\"set_light\",\"arguments\":"
          "{\"state\":\"on\"}}]}\n"
          "{\"request\":\"lights off in the hall\",\"calls\":[{\"name\":\"set_light\","
          "\"arguments\":{\"state\":\"off\",\"room\":\"hall\"}}]}\n"
          "{\"request\":\"timer for 5 minutes\",\"calls\":[{\"name\":\"start_timer\","
          "\"arguments\":{\"minutes\":5}}]}\n"
          "{\"request\":\"ten minute timer\",\"calls\":[{\"name\":\"start_timer\","
          "\"arguments\":{\"minutes\":10}}]}\n");
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tools_;
    delete data_;
  }
  // `data`: another data file than the suite's.
  std::string Tune(const std::string& out, const std::string& extra,
                   const std::string& data = "") const {
    return "tune -m " + *model_ + " --tools " + *tools_ + " --data " +
           (data.empty() ? *data_ : data) + " -o " + out +
           " --lora-rank 4 --batch-tokens 1 --lr 0.01 --average 1 -t 1 " + extra;
  }
  // 10 epochs of 4 one-example steps: the last epoch's mean loss is under half the first's.
  static void ExpectLossHalvedOver10Epochs(const Result& r) {
    const std::vector<double> loss = Losses(r.out);
    ASSERT_EQ(loss.size(), 40u) << r.out;
    EXPECT_LT((loss[36] + loss[37] + loss[38] + loss[39]) / 4,
              0.5 * (loss[0] + loss[1] + loss[2] + loss[3]) / 4)
        << r.out;
  }
  // The adapter's prior (its weight large, so it chooses the name) picks the trained tools.
  // `flags`: the adapters, "--lora A" (its own prior) or "--prior-lora A".
  static void ExpectPriorPicksTheTrainedTools(const std::string& flags) {
    EXPECT_EQ(PriorPicks(flags), 2) << flags;
  }
  // How many of two requests the prior (at a weight that drowns the model's own choice) gives
  // their trained tool.
  static int PriorPicks(const std::string& flags) {
    const std::string call =
        "call -m " + *model_ + " --tools " + *tools_ + " -t 1 --tool-channel 50 " + flags;
    int right = 0;
    for (const auto& [request, name] :
         {std::pair<std::string, std::string>{"ten minute timer", "start_timer"},
          {"lights off in the hall", "set_light"}}) {
      Result prior = Fgemma(call + " \"" + request + "\"", false);
      EXPECT_EQ(prior.rc, 0) << prior.out;
      right += prior.out.find(name) != std::string::npos;
    }
    return right;
  }
  static std::string* model_;
  static std::string* tools_;
  static std::string* data_;
};
std::string* CliTuneTest::model_ = nullptr;
std::string* CliTuneTest::tools_ = nullptr;
std::string* CliTuneTest::data_ = nullptr;

TEST_F(CliTuneTest, LossFallsAndTheAdapterChangesTheCall) {
  const std::string out = Tmp("a.gguf");
  Result r = Fgemma(Tune(out, "--epochs 10"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::vector<double> loss = Losses(r.out);
  ASSERT_EQ(loss.size(), 40u) << r.out;  // 4 examples, one per step, 10 epochs
  const double first = (loss[0] + loss[1] + loss[2] + loss[3]) / 4;
  const double last = (loss[36] + loss[37] + loss[38] + loss[39]) / 4;
  EXPECT_LT(last, 0.5 * first) << r.out;
  // The adapter is llama.cpp's format with the design recorded, and `call --lora` applies it.
  Result meta = Fgemma("inspect " + out, false);
  ASSERT_EQ(meta.rc, 0);
  EXPECT_THAT(meta.out, HasSubstr("fgemma.lora.prefix"));
  EXPECT_THAT(meta.out, HasSubstr("adapter.lora.alpha"));
  // The arguments the examples give, per tool, for `fgemma call` to fill the others
  // (FunctionCallerOptions::fill_arguments).
  EXPECT_THAT(meta.out, HasSubstr(R"("{"set_light":["room","state"],"start_timer":["minutes"]}")"));
  const std::string call = "call -m " + *model_ + " --tools " + *tools_ + " -t 1 \"ten minute timer\"";
  Result base = Fgemma(call, false);
  Result tuned = Fgemma(call + " --lora " + out, false);
  ASSERT_EQ(base.rc, 0) << base.out;
  ASSERT_EQ(tuned.rc, 0) << tuned.out;
  EXPECT_NE(base.out, tuned.out);
  EXPECT_THAT(tuned.out, HasSubstr("start_timer"));
}

// --loss-leave-out skip|anchor: the tokens that leave out an optional argument no example
// gives are out of the loss, or learn the starting adapter's distribution. The data give `room`
// once, so nothing is skipped or anchored and the bytes are the same; without that line "turn
// the light on" chooses `state` past a `room` never given. An anchored run stopped and resumed
// writes the same adapter as one run (the anchors come from the start, not the checkpoint).
TEST_F(CliTuneTest, LeaveOutSkipsOnlyArgumentsNoExampleGives) {
  const std::string a = Tmp("lo1.gguf"), b = Tmp("lo2.gguf"), c = Tmp("lo3.gguf");
  ASSERT_EQ(Fgemma(Tune(a, "--epochs 2 -q --loss-leave-out learn")).rc, 0);
  ASSERT_EQ(Fgemma(Tune(b, "--epochs 2 -q --loss-leave-out skip")).rc, 0);
  ASSERT_EQ(Fgemma(Tune(c, "--epochs 2 -q --loss-leave-out anchor")).rc, 0);
  EXPECT_TRUE(Read(a) == Read(b));
  EXPECT_TRUE(Read(a) == Read(c));
  const std::string no_room = Tmp("no_room.jsonl");
  std::string lines = Read(*data_);
  const size_t hall = lines.find("lights off in the hall");
  ASSERT_NE(hall, std::string::npos);
  lines.erase(lines.rfind('\n', hall) + 1, lines.find('\n', hall) - lines.rfind('\n', hall));
  ASSERT_EQ(lines.find("room"), std::string::npos) << lines;
  Write(no_room, lines);
  auto tune = [&](const std::string& out, const std::string& mode) {
    return Fgemma("tune -m " + *model_ + " --tools " + *tools_ + " --data " + no_room + " -o " +
                  out +
                  " --lora-rank 4 --batch-tokens 1 --lr 0.01 --average 1 -t 1 --epochs 2 -q " +
                  "--loss-leave-out " + mode);
  };
  ASSERT_EQ(tune(a, "learn").rc, 0);
  ASSERT_EQ(tune(b, "skip").rc, 0);
  ASSERT_EQ(tune(c, "anchor").rc, 0);
  EXPECT_FALSE(Read(a) == Read(b));
  EXPECT_FALSE(Read(a) == Read(c));
  EXPECT_FALSE(Read(b) == Read(c));
  const std::string d = Tmp("lo4.gguf"), ckpt = Tmp("lo4.ckpt");
  Result part = tune(d, "anchor --checkpoint " + ckpt + " --stop-after 2");
  ASSERT_EQ(part.rc, 0) << part.out;
  EXPECT_FALSE(Read(c) == Read(d));
  Result rest = tune(d, "anchor --checkpoint " + ckpt + " --resume " + ckpt);
  ASSERT_EQ(rest.rc, 0) << rest.out;
  EXPECT_TRUE(Read(c) == Read(d));
  // An anchored run's checkpoint is not resumed by a skip run.
  Result other = tune(d, "skip --resume " + ckpt);
  EXPECT_EQ(other.rc, 1);
  EXPECT_THAT(other.out, HasSubstr("written with other options or data"));
}

TEST_F(CliTuneTest, SameSeedSameBytesAndResumeEqualsOneRun) {
  const std::string a = Tmp("s1.gguf"), b = Tmp("s2.gguf"), c = Tmp("s3.gguf");
  ASSERT_EQ(Fgemma(Tune(a, "--epochs 2 -q")).rc, 0);
  ASSERT_EQ(Fgemma(Tune(b, "--epochs 2 -q")).rc, 0);
  EXPECT_TRUE(Read(a) == Read(b));
  // Stopped after 3 of 8 steps, then resumed: the same adapter as one run.
  const std::string ckpt = Tmp("s3.ckpt");
  Result part = Fgemma(Tune(c, "--epochs 2 --checkpoint " + ckpt + " --stop-after 3"));
  ASSERT_EQ(part.rc, 0) << part.out;
  EXPECT_THAT(part.out, HasSubstr("--resume"));
  EXPECT_FALSE(Read(c) == Read(a));
  Result rest = Fgemma(Tune(c, "--epochs 2 -q --checkpoint " + ckpt + " --resume " + ckpt));
  ASSERT_EQ(rest.rc, 0) << rest.out;
  EXPECT_TRUE(Read(c) == Read(a));
  // Another seed: other bytes; other options: the checkpoint is refused.
  ASSERT_EQ(Fgemma(Tune(b, "--epochs 2 -q --seed 9")).rc, 0);
  EXPECT_FALSE(Read(a) == Read(b));
  // Runs of four examples per catalog prompt instead of one: another order, other bytes.
  ASSERT_EQ(Fgemma(Tune(b, "--epochs 2 -q --prefix-run 4")).rc, 0);
  EXPECT_FALSE(Read(a) == Read(b));
  // The softmax over the allowed tokens where the grammar allows few instead of the whole
  // vocabulary: another objective, other bytes.
  ASSERT_EQ(Fgemma(Tune(b, "--epochs 2 -q --loss-softmax allowed")).rc, 0);
  EXPECT_FALSE(Read(a) == Read(b));
  Result other = Fgemma(Tune(b, "--epochs 3 -q --resume " + ckpt));
  EXPECT_EQ(other.rc, 1);
  EXPECT_THAT(other.out, HasSubstr("written with other options or data"));
}

// A quantized LM head (q8_0): by default the gradient reaches the model through the head's
// rows of the likely tokens (--head-grad top); --head-grad full goes through the whole head's
// transpose: other arithmetic, other bytes, each run repeatable; the checkpoint of one is not
// resumed by the other.
TEST_F(CliTuneTest, HeadGradTopAndFullOnAQuantizedHead) {
  const std::string q8 = Tmp("small_q8.gguf");
  ASSERT_EQ(Fgemma("mkmodel -o " + q8 + " --preset small --seed 7 --type q8_0").rc, 0);
  auto tune = [&](const std::string& out, const std::string& extra) {
    return Fgemma("tune -m " + q8 + " --tools " + *tools_ + " --data " + *data_ + " -o " + out +
                  " --lora-rank 4 --batch-tokens 1 --lr 0.01 -t 1 --epochs 2 -q " + extra);
  };
  const std::string top = Tmp("h_top.gguf"), top2 = Tmp("h_top2.gguf"), full = Tmp("h_full.gguf");
  ASSERT_EQ(tune(top, "").rc, 0);
  ASSERT_EQ(tune(top2, "--head-grad top").rc, 0);
  ASSERT_EQ(tune(full, "--head-grad full").rc, 0);
  EXPECT_TRUE(Read(top) == Read(top2));
  EXPECT_FALSE(Read(top) == Read(full));
  Result other = tune(full, "--head-grad full --resume " + top + ".ckpt");
  EXPECT_EQ(other.rc, 1);
  EXPECT_THAT(other.out, HasSubstr("written with other options or data"));
}

// Two catalog prompts taking turns: each prefix is computed once and read back from the prefix
// store after; the adapter is the same bytes as with every prefix computed (--prefix-store 0).
TEST_F(CliTuneTest, PrefixStoreReadsPrefixesBackWithTheSameAdapter) {
  const std::string data = Tmp("two_catalogs.jsonl");
  const std::string light = R"({"type":"function","function":{"name":"set_light","description":"Turn a light on or off","parameters":{"type":"object","properties":{"state":{"type":"string","enum":["on","off"]}},"required":["state"]}}})";
  const std::string timer = R"({"type":"function","function":{"name":"start_timer","description":"Start a timer","parameters":{"type":"object","properties":{"minutes":{"type":"integer"}},"required":["minutes"]}}})";
  auto line = [](const std::string& tools, const std::string& request, const std::string& call) {
    return R"({"tools":[)" + tools + R"(],"messages":[{"role":"user","content":")" + request +
           R"("},{"role":"assistant","tool_calls":[{"type":"function","function":)" + call +
           "}]}]}\n";
  };
  Write(data, line(light, "lights on", R"({"name":"set_light","arguments":{"state":"on"}})") +
                  line(light + "," + timer, "timer for 3 minutes",
                       R"({"name":"start_timer","arguments":{"minutes":3}})") +
                  line(light, "lights off", R"({"name":"set_light","arguments":{"state":"off"}})") +
                  line(light + "," + timer, "lights off please",
                       R"({"name":"set_light","arguments":{"state":"off"}})"));
  const std::string a = Tmp("store_on.gguf"), b = Tmp("store_off.gguf");
  const std::string common = "tune -m " + *model_ + " --data " + data +
                             " --lora-rank 4 --batch-tokens 1 --lr 0.01 -t 1 --epochs 3 "
                             "--prefix-run 1 ";
  Result on = Fgemma(common + "-o " + a);
  ASSERT_EQ(on.rc, 0) << on.out;
  EXPECT_THAT(on.out, HasSubstr("catalog prefixes computed 2, read back"));
  EXPECT_THAT(on.out, ::testing::Not(HasSubstr("read back 0")));
  Result off = Fgemma(common + "--prefix-store 0 -o " + b);
  ASSERT_EQ(off.rc, 0) << off.out;
  EXPECT_THAT(off.out, ::testing::Not(HasSubstr("computed 2,")));
  EXPECT_THAT(off.out, HasSubstr("read back 0"));
  EXPECT_TRUE(Read(a) == Read(b));
}

TEST_F(CliTuneTest, CtrlCSavesACheckpointAndTheAdapter) {
  const std::string out = Tmp("int.gguf"), ckpt = Tmp("int.ckpt");
  std::remove(out.c_str());
  std::remove(ckpt.c_str());
  // SIGINT after a second of a run far longer than that: exit 1, both files written.
  Result r = ::fg::testing::RunCommand("timeout --preserve-status -s INT 1 " +
                                       std::string(FG_CLI_PATH) + " " +
                                       Tune(out, "--epochs 1000 -q --checkpoint " + ckpt));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--resume " + ckpt));
  EXPECT_FALSE(Read(out).empty());
  EXPECT_FALSE(Read(ckpt).empty());
  Result more = Fgemma(Tune(out, "--epochs 1000 -q --checkpoint " + ckpt + " --resume " + ckpt +
                                     " --stop-after 2"));
  EXPECT_EQ(more.rc, 0) << more.out;
}

// --average N: N members (seeds SEED..SEED+N-1) written as one adapter, their A stacked and
// their B side by side at the same alpha: exactly the members' own values, so its product is
// their mean. Interrupted, it is resumed member by member to the same bytes. An app's few
// requests average 3 by default; --stop-after needs --average 1.
TEST_F(CliTuneTest, AverageWritesTheMeanOfItsMembers) {
  const std::string m1 = Tmp("avg_m1.gguf"), m2 = Tmp("avg_m2.gguf"), avg = Tmp("avg.gguf");
  const std::string base = "tune -m " + *model_ + " --tools " + *tools_ + " --data " + *data_ +
                           " --lora-rank 4 --batch-tokens 1 --lr 0.01 --epochs 2 -t 1 -q -o ";
  ASSERT_EQ(Fgemma(base + m1 + " --average 1 --seed 4").rc, 0);
  ASSERT_EQ(Fgemma(base + m2 + " --average 1 --seed 5").rc, 0);
  Result r = Fgemma(base + avg + " --average 2 --seed 4");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto f1 = gguf::File::Open(m1), f2 = gguf::File::Open(m2), fa = gguf::File::Open(avg);
  ASSERT_TRUE(f1.ok() && f2.ok() && fa.ok());
  ASSERT_EQ((*fa)->tensors().size(), (*f1)->tensors().size());
  ASSERT_FALSE((*fa)->tensors().empty());
  EXPECT_EQ(*(*fa)->GetFloat("adapter.lora.alpha"), *(*f1)->GetFloat("adapter.lora.alpha"));
  for (const gguf::TensorInfo& t : (*fa)->tensors()) {
    const gguf::TensorInfo* a = (*f1)->FindTensor(t.name);
    const gguf::TensorInfo* b = (*f2)->FindTensor(t.name);
    ASSERT_TRUE(a != nullptr && b != nullptr) << t.name;
    ASSERT_EQ(t.shape.size(), 2u);
    const float* pa = reinterpret_cast<const float*>(a->data);
    const float* pb = reinterpret_cast<const float*>(b->data);
    const float* pt = reinterpret_cast<const float*>(t.data);
    if (t.name.ends_with(".lora_a")) {  // [2r, K]: member 1's rows, then member 2's
      ASSERT_EQ(t.shape, std::vector<int64_t>({2 * a->shape[0], a->shape[1]})) << t.name;
      EXPECT_EQ(std::memcmp(pt, pa, a->size_bytes), 0) << t.name;
      EXPECT_EQ(std::memcmp(pt + a->n_elements, pb, b->size_bytes), 0) << t.name;
    } else {  // [N, 2r]: each row member 1's r values, then member 2's
      const int64_t n = a->shape[0], rank = a->shape[1];
      ASSERT_EQ(t.shape, std::vector<int64_t>({n, 2 * rank})) << t.name;
      for (int64_t j = 0; j < n; ++j) {
        EXPECT_EQ(std::memcmp(pt + j * 2 * rank, pa + j * rank, rank * sizeof(float)), 0);
        EXPECT_EQ(std::memcmp(pt + j * 2 * rank + rank, pb + j * rank, rank * sizeof(float)), 0);
      }
    }
  }
  Result meta = Fgemma("inspect " + avg, false);
  EXPECT_THAT(meta.out, HasSubstr("training.average"));
  // Interrupted after 3 s (in member 2 on a quiet machine, whose members take ~2 s each; in
  // member 1 on a busy one): the checkpoints are kept, no adapter is written; resumed, each
  // member from its own checkpoint (a finished one's read back), the same bytes as one run.
  const std::string ckpt = Tmp("avg.ckpt"), out = Tmp("avg_int.gguf");
  const std::string longer = "tune -m " + *model_ + " --tools " + *tools_ + " --data " + *data_ +
                             " --lora-rank 4 --batch-tokens 1 --lr 0.01 -t 1 -q -o " + out +
                             " --checkpoint " + ckpt + " --average 2 ";
  std::remove(out.c_str());
  Result cut = ::fg::testing::RunCommand("timeout --preserve-status -s INT 3 " +
                                         std::string(FG_CLI_PATH) + " " + longer + "--epochs 80");
  EXPECT_EQ(cut.rc, 1) << cut.out;
  EXPECT_THAT(cut.out, HasSubstr("--resume " + ckpt));
  EXPECT_TRUE(Read(out).empty());
  EXPECT_FALSE(Read(ckpt + ".1").empty());
  Result rest = Fgemma(longer + "--epochs 80 --resume " + ckpt);
  ASSERT_EQ(rest.rc, 0) << rest.out;
  const std::string whole = Tmp("avg_whole.gguf");
  ASSERT_EQ(Fgemma("tune -m " + *model_ + " --tools " + *tools_ + " --data " + *data_ +
                   " --lora-rank 4 --batch-tokens 1 --lr 0.01 -t 1 -q -o " + whole +
                   " --average 2 --epochs 80")
                .rc,
            0);
  EXPECT_TRUE(Read(out) == Read(whole));
  // Defaults: an app's few requests average 3; --stop-after with more than one is refused.
  Result few = Fgemma("tune -m " + *model_ + " --tools " + *tools_ + " --data " + *data_ +
                      " --lora-rank 4 --max-steps 1 -t 1 -o " + Tmp("avg_few.gguf"));
  ASSERT_EQ(few.rc, 0) << few.out;
  EXPECT_THAT(few.out, HasSubstr("member 3 of 3"));
  EXPECT_THAT(few.out, HasSubstr("the average of 3 adapters"));
  Result stop = Fgemma("tune -m " + *model_ + " --tools " + *tools_ + " --data " + *data_ +
                       " --lora-rank 4 --stop-after 1 -t 1 -o " + Tmp("avg_stop.gguf"));
  EXPECT_EQ(stop.rc, 2) << stop.out;
  EXPECT_THAT(stop.out, HasSubstr("--stop-after needs --average 1"));
  Result missing = Fgemma(longer + "--epochs 80 --resume " + Tmp("avg_none.ckpt"));
  EXPECT_EQ(missing.rc, 1) << missing.out;
  EXPECT_THAT(missing.out, HasSubstr("avg_none.ckpt.1"));
  EXPECT_EQ(Fgemma(base + avg + " --average 0").rc, 2);
  EXPECT_EQ(Fgemma(base + avg + " --average 17").rc, 2);
}

TEST_F(CliTuneTest, ValidationKeepsTheBestEpoch) {
  const std::string out = Tmp("val.gguf");
  Result r = Fgemma(Tune(out, "--epochs 3 --val-split 0.5"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(
      r.out, HasSubstr("4 examples (2 for validation, 0 added by --augment, 0 of the tool prior)"));
  int scored = 0;
  for (size_t p = r.out.find("validation score"); p != std::string::npos;
       p = r.out.find("validation score", p + 1)) {
    ++scored;
  }
  EXPECT_EQ(scored, 3) << r.out;
  Result meta = Fgemma("inspect " + out, false);
  EXPECT_THAT(meta.out, HasSubstr("training.best_epoch"));
}

// --augment: the on/off state is written in two requests, so each gets the other's value
// ("turn the light off"); the room (one value) and the minutes (5 and "ten") have nothing to
// swap with. The added examples are trained (more tokens per epoch).
TEST_F(CliTuneTest, AugmentAddsValueSwappedExamples) {
  Result plain = Fgemma(Tune(Tmp("aug0.gguf"), "--max-steps 1"));
  ASSERT_EQ(plain.rc, 0) << plain.out;
  Result r = Fgemma(Tune(Tmp("aug.gguf"), "--max-steps 1 --augment 3"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(
      r.out, HasSubstr("4 examples (0 for validation, 2 added by --augment, 0 of the tool prior)"));
  auto tokens = [](const std::string& log) {
    const std::string key = "tool prior), ";
    const size_t p = log.find(key);
    return p == std::string::npos ? -1 : std::atol(log.c_str() + p + key.size());
  };
  EXPECT_GT(tokens(r.out), tokens(plain.out)) << r.out;
}

// Without --init-lora, tuning the default model starts from the shipped tune adapter, or the
// call adapter when there is none (here $FGEMMA_MODEL, $FGEMMA_TUNE_LORA and $FGEMMA_CALL_LORA
// name them); --init-lora
// none, a chosen adapter shape or another model start fresh. Fewer than 300 examples get
// 64-token batches and 480 examples' worth of epochs (at most 32), more get 1024 and 1; when
// they refine an adapter, lr 3e-4 instead of 1e-3.
TEST_F(CliTuneTest, DefaultsForAnAppStartFromTheShippedAdapter) {
  const std::string shipped = Tmp("shipped.gguf");
  ASSERT_EQ(Fgemma(Tune(shipped, "--max-steps 1 -q")).rc, 0);
  auto tune = [&](const std::string& out, const std::string& flags) {
    Result r =
        ::fg::testing::RunCommand("FGEMMA_MODEL=" + *model_ + " FGEMMA_TUNE_LORA=" + shipped + " " +
                                  FG_CLI_PATH + " tune --tools " + *tools_ + " --data " + *data_ +
                                  " -o " + out + " --max-steps 2 -t 1 " + flags);
    EXPECT_EQ(r.rc, 0) << flags << ": " << r.out;
    return r.out;
  };
  const std::string a = Tmp("d_auto.gguf"), b = Tmp("d_named.gguf"), c = Tmp("d_none.gguf"),
                    d = Tmp("d_rank.gguf");
  const std::string log = tune(a, "");
  EXPECT_THAT(log, HasSubstr("starting from the shipped adapter " + shipped));
  EXPECT_THAT(log, HasSubstr("4 examples"));
  EXPECT_THAT(log, HasSubstr("32 epochs of 2 steps (batches of 64 tokens)"));
  // Refining an adapter on an app's few requests: lr 3e-4 (the corpus's 1e-3 otherwise).
  EXPECT_THAT(log, HasSubstr(", lr 0.0003,"));
  tune(b, "--init-lora " + shipped);
  EXPECT_TRUE(Read(a) == Read(b));
  const std::string lr_named = Tmp("d_lr_named.gguf"), lr_corpus = Tmp("d_lr_corpus.gguf");
  tune(lr_named, "--init-lora " + shipped + " --lr 3e-4");
  EXPECT_TRUE(Read(a) == Read(lr_named));
  EXPECT_THAT(tune(lr_corpus, "--lr 1e-3"), HasSubstr(", lr 0.001,"));
  EXPECT_FALSE(Read(a) == Read(lr_corpus));
  const std::string none_log = tune(c, "--init-lora none");
  EXPECT_THAT(none_log, ::testing::Not(HasSubstr("starting from")));
  EXPECT_THAT(none_log, ::testing::Not(HasSubstr("note: no shipped adapter")));
  EXPECT_THAT(none_log, HasSubstr(", lr 0.001,"));  // a fresh adapter learns at 1e-3
  EXPECT_FALSE(Read(a) == Read(c));
  EXPECT_THAT(tune(d, "--lora-rank 16"), ::testing::Not(HasSubstr("starting from")));
  EXPECT_TRUE(Read(c) == Read(d));
  // Without a tune adapter ($FGEMMA_TUNE_LORA empty here), an app's tune starts from the call
  // adapter ($FGEMMA_CALL_LORA).
  const std::string start = Tmp("tune_start.gguf");
  ASSERT_EQ(Fgemma(Tune(start, "--max-steps 1 --seed 3 -q")).rc, 0);
  const std::string e = Tmp("d_tune_start.gguf");
  const Result from_start = ::fg::testing::RunCommand(
      "FGEMMA_MODEL=" + *model_ + " FGEMMA_TUNE_LORA= FGEMMA_CALL_LORA=" + start + " " +
      FG_CLI_PATH + " tune --tools " + *tools_ + " --data " + *data_ + " -o " + e +
      " --max-steps 2 -t 1");
  ASSERT_EQ(from_start.rc, 0) << from_start.out;
  EXPECT_THAT(from_start.out, HasSubstr("starting from the shipped adapter " + start));
  EXPECT_FALSE(Read(a) == Read(e));
  // Neither adapter found (both variables empty): a fresh adapter, and a note that says so.
  const Result fresh = ::fg::testing::RunCommand(
      "FGEMMA_MODEL=" + *model_ + " FGEMMA_TUNE_LORA= FGEMMA_CALL_LORA= " + FG_CLI_PATH +
      " tune --tools " + *tools_ + " --data " + *data_ + " -o " + Tmp("d_fresh.gguf") +
      " --max-steps 2 -t 1 -q");
  ASSERT_EQ(fresh.rc, 0) << fresh.out;
  EXPECT_THAT(fresh.out, HasSubstr("tune: note: no shipped adapter to start from"));
  EXPECT_TRUE(Read(Tmp("d_fresh.gguf")) == Read(c));  // as --init-lora none
  // An app's own tool prior (--objective channel): from the shipped call adapter, whose prior
  // it refines, ranked against every other tool at lr 1e-4, ~120 examples in all (30 epochs of
  // 4): the same bytes as those flags given.
  const std::string marked = Tmp("d_marked.gguf");
  ASSERT_EQ(Fgemma(Tune(marked, "--objective channel --max-steps 1 -q")).rc, 0);
  auto prior_tune = [&](const std::string& out, const std::string& flags) {
    Result r = ::fg::testing::RunCommand(
        "FGEMMA_MODEL=" + *model_ + " FGEMMA_TUNE_LORA=" + shipped + " FGEMMA_CALL_LORA=" + marked +
        " " + FG_CLI_PATH + " tune --tools " + *tools_ + " --data " + *data_ + " -o " + out +
        " --objective channel --max-steps 2 -t 1 " + flags);
    EXPECT_EQ(r.rc, 0) << flags << ": " << r.out;
    return r.out;
  };
  const std::string p1 = Tmp("d_prior.gguf"), p2 = Tmp("d_prior_named.gguf"),
                    p3 = Tmp("d_prior_lr.gguf");
  const std::string prior_log = prior_tune(p1, "");
  EXPECT_THAT(prior_log, HasSubstr("starting from the shipped adapter " + marked));
  EXPECT_THAT(prior_log, HasSubstr("each ranked against up to 64 other tools"));
  EXPECT_THAT(prior_log, HasSubstr("30 epochs of"));
  EXPECT_THAT(prior_log, HasSubstr(", lr 0.0001,"));
  prior_tune(p2, "--init-lora " + marked + " --lr 1e-4 --prior-negatives 64 --epochs 30");
  EXPECT_TRUE(Read(p1) == Read(p2));
  prior_tune(p3, "--lr 1e-3");
  EXPECT_FALSE(Read(p1) == Read(p3));
  // Another model of the same shapes: fresh.
  const std::string other = Tmp("d_other_model.gguf");
  ASSERT_EQ(Fgemma("mkmodel -o " + other + " --preset small --seed 5").rc, 0);
  EXPECT_THAT(tune(Tmp("d_other.gguf"), "-m " + other), ::testing::Not(HasSubstr("starting from")));
  // 300 examples: the defaults of a corpus.
  const std::string many = Tmp("many.jsonl");
  std::string lines;
  for (int i = 0; i < 300; ++i) {
    lines += "{\"request\":\"timer for " + std::to_string(i + 1) +
             " minutes\",\"calls\":[{\"name\":\"start_timer\",\"arguments\":{\"minutes\":" +
             std::to_string(i + 1) + "}}]}\n";
  }
  Write(many, lines);
  Result r = Fgemma("tune -m " + *model_ + " --tools " + *tools_ + " --data " + many + " -o " +
                    Tmp("many.gguf") + " --max-steps 1 -t 1");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("300 examples"));
  EXPECT_THAT(r.out, HasSubstr(" 1 epoch of "));
  EXPECT_THAT(r.out, HasSubstr("(batches of 1024 tokens)"));
}

// --objective channel learns the tool prior alone: the loss falls, the adapter is marked, and
// `fgemma call` runs its prior with it (its prior then chooses the trained tools); both adds
// the prior's examples to the calls' (one per one-call example).
TEST_F(CliTuneTest, ObjectiveTeachesTheToolPrior) {
  const std::string out = Tmp("prior.gguf");
  Result r = Fgemma(Tune(out, "--objective channel --epochs 10 --init-lora none"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("4 of the tool prior"));
  ExpectLossHalvedOver10Epochs(r);
  Result meta = Fgemma("inspect " + out, false);
  ASSERT_EQ(meta.rc, 0);
  EXPECT_THAT(meta.out, HasSubstr("fgemma.lora.channel"));
  EXPECT_THAT(meta.out, ::testing::Not(HasSubstr("fgemma.lora.given_arguments")));  // no calls
  Result both = Fgemma(Tune(Tmp("both.gguf"), "--objective both --epochs 1 --init-lora none"));
  ASSERT_EQ(both.rc, 0) << both.out;
  EXPECT_THAT(both.out, HasSubstr("4 of the tool prior"));
  EXPECT_EQ(Losses(both.out).size(), 8u) << both.out;
  ExpectPriorPicksTheTrainedTools("--lora " + out);
  // Trained on from a marked adapter with the calls alone (the default objective), it is not
  // marked: its prior runs the base model.
  const std::string on = Tmp("on.gguf");
  Result r2 = Fgemma(Tune(on, "--epochs 1 --init-lora " + out));
  ASSERT_EQ(r2.rc, 0) << r2.out;
  EXPECT_THAT(r2.out, HasSubstr("0 of the tool prior"));
  EXPECT_THAT(Fgemma("inspect " + on, false).out, ::testing::Not(HasSubstr("fgemma.lora.channel")));
  // --prior-lora: the marked adapter runs the prior beside another adapter (or none) that
  // decodes; the base model's prior does not pick both tools.
  ExpectPriorPicksTheTrainedTools("--prior-lora " + out);
  ExpectPriorPicksTheTrainedTools("--lora " + on + " --prior-lora " + out);
  // The argument fill: an app's adapter whose examples never give `room` (its record says so),
  // with a prior's model of its own and the tool channel on (the fill needs it; the tiny model
  // has it off by default). Where its call leaves `room` out, the request is decoded again on
  // the prior's model (the fill's time shows in --stats); --no-arg-fill keeps the call.
  const std::string no_room = Tmp("no_room.jsonl");
  Write(no_room,
        "{\"request\":\"turn the light on\",\"calls\":[{\"name\":\"set_light\",\"arguments\":"
        "{\"state\":\"on\"}}]}\n"
        "{\"request\":\"timer for 5 minutes\",\"calls\":[{\"name\":\"start_timer\","
        "\"arguments\":{\"minutes\":5}}]}\n");
  const std::string app = Tmp("no_room.gguf");
  Result tuned = Fgemma(Tune(app, "--epochs 1 --init-lora none", no_room));
  ASSERT_EQ(tuned.rc, 0) << tuned.out;
  EXPECT_THAT(Fgemma("inspect " + app, false).out,
              HasSubstr(R"("{"set_light":["state"],"start_timer":["minutes"]}")"));
  const std::string call_blended = "call -m " + *model_ + " --tools " + *tools_ +
                                   " -t 1 --stats --tool-channel 50 --lora " + app +
                                   " --prior-lora " + out + " \"lights off in the hall\"";
  const std::string call_app = call_blended + " --blend 0";  // the app's adapter decodes alone
  Result kept = Fgemma(call_app + " --no-arg-fill");
  ASSERT_EQ(kept.rc, 0) << kept.out;
  EXPECT_THAT(kept.out, HasSubstr("argument fill 0.0 ms (0 added)"));
  EXPECT_THAT(kept.out, HasSubstr("| blend 0.0 ms (0 steps) |"));
  // By default the prior's model decodes along (--blend 0.4); its time shows in --stats.
  Result blended = Fgemma(call_blended + " --no-arg-fill");
  ASSERT_EQ(blended.rc, 0) << blended.out;
  EXPECT_THAT(blended.out, HasSubstr("| blend "));
  EXPECT_THAT(blended.out, ::testing::Not(HasSubstr("| blend 0.0 ms"))) << blended.out;
  ASSERT_THAT(kept.out, HasSubstr("\"name\":\"set_light\"")) << kept.out;
  ASSERT_THAT(kept.out, ::testing::Not(HasSubstr("room"))) << kept.out;  // what the fill is for
  Result filled = Fgemma(call_app);
  ASSERT_EQ(filled.rc, 0) << filled.out;
  EXPECT_THAT(filled.out, HasSubstr("argument fill "));
  EXPECT_THAT(filled.out, ::testing::Not(HasSubstr("argument fill 0.0 ms"))) << filled.out;
  // `on` learnt from examples that give `room`: nothing to fill, no second decode.
  Result given = Fgemma("call -m " + *model_ + " --tools " + *tools_ +
                        " -t 1 --stats --tool-channel 50 --lora " + on + " --prior-lora " + out +
                        " \"lights off\"");
  EXPECT_EQ(given.rc, 0) << given.out;
  EXPECT_THAT(given.out, HasSubstr("argument fill 0.0 ms (0 added)"));
  EXPECT_LT(PriorPicks(""), 2);
  EXPECT_LT(PriorPicks("--lora " + on + " --prior-lora none"), 2);
  // An adapter not trained for the prior, a missing file: runtime errors; no file: usage.
  const std::string call = "call -m " + *model_ + " --tools " + *tools_ + " -t 1 x ";
  Result unmarked = Fgemma(call + "--prior-lora " + on);
  EXPECT_EQ(unmarked.rc, 1) << unmarked.out;
  EXPECT_THAT(unmarked.out, HasSubstr("not trained for the tool prior"));
  Result missing = Fgemma(call + "--prior-lora " + Tmp("nope.gguf"));
  EXPECT_EQ(missing.rc, 1) << missing.out;
  EXPECT_THAT(missing.out, HasSubstr("nope.gguf"));
  EXPECT_EQ(Fgemma(call + "--prior-lora ''").rc, 2);
}

TEST_F(CliTuneTest, PriorNegativesRankTheOwnToolFirst) {
  // Each prior example against the catalog's other tool: the contrastive loss falls, and the
  // prior picks the trained tools.
  const std::string out = Tmp("contrast.gguf");
  Result r =
      Fgemma(Tune(out, "--objective channel --prior-negatives 5 --epochs 10 --init-lora none"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("4 of the tool prior, each ranked against up to 5 other tools"));
  ExpectLossHalvedOver10Epochs(r);
  ExpectPriorPicksTheTrainedTools("--lora " + out);
  for (const std::string bad : {"--prior-negatives -1 --objective both",
                                "--prior-negatives 65 --objective both", "--prior-negatives 2"}) {
    Result b = Fgemma(Tune(Tmp("bad_contrast.gguf"), bad + " --init-lora none"));
    EXPECT_EQ(b.rc, 2) << bad << "\n" << b.out;
    EXPECT_THAT(b.out, HasSubstr("--prior-negatives")) << bad;
  }
}

TEST_F(CliTuneTest, BadFlagsAndData) {
  const std::string out = Tmp("bad.gguf");
  Result help = Fgemma("tune --help", false);
  EXPECT_EQ(help.rc, 0);
  EXPECT_THAT(help.out, HasSubstr("--lora-rank"));
  EXPECT_EQ(Fgemma("tune -m " + *model_ + " -o " + out).rc, 2);  // no --data
  EXPECT_EQ(Fgemma("tune -m " + *model_ + " --data " + *data_).rc, 2);  // no -o
  for (const std::string flag : {"--lora-rank 0",
                                 "--lr 0",
                                 "--lr nan",
                                 "--epochs 0",
                                 "--val-split 1",
                                 "--prefix sideways",
                                 "--lora-modules attn_x",
                                 "--batch-tokens 0",
                                 "--warmup 2",
                                 "--stop-after -1",
                                 "--augment -1",
                                 "--prefix-run 0",
                                 "--prefix-store -1",
                                 "--loss-softmax sideways",
                                 "--loss-leave-out sideways",
                                 "--head-grad sideways",
                                 "--lora-rank -1",
                                 "--lora-alpha -1",
                                 "--epochs -1",
                                 "--batch-tokens -1",
                                 "--objective sideways",
                                 "--objective both --prefix adapted",
                                 "--prior-weight 0",
                                 "--prior-weight nan"}) {
    Result r = Fgemma(Tune(out, flag));
    EXPECT_EQ(r.rc, 2) << flag << ": " << r.out;
  }
  // A short-form line without --tools, an invalid call, a missing file: runtime errors naming
  // the line; nothing written.
  const std::string bad = Tmp("bad.jsonl");
  Write(bad, "{\"request\":\"lights on\",\"calls\":[{\"name\":\"set_light\",\"arguments\":"
             "{\"state\":\"on\"}}]}\n{\"request\":\"lights\",\"calls\":[{\"name\":\"set_light\","
             "\"arguments\":{\"state\":\"dim\"}}]}\n");
  Result invalid = Fgemma("tune -m " + *model_ + " --tools " + *tools_ + " --data " + bad +
                          " -o " + out);
  EXPECT_EQ(invalid.rc, 1);
  EXPECT_THAT(invalid.out, HasSubstr("line 2"));
  Result no_tools = Fgemma("tune -m " + *model_ + " --data " + bad + " -o " + out);
  EXPECT_EQ(no_tools.rc, 1);
  EXPECT_THAT(no_tools.out, HasSubstr("needs a catalog"));
  EXPECT_EQ(Fgemma("tune -m " + *model_ + " --tools " + *tools_ + " --data " + Tmp("missing") +
                   " -o " + out).rc, 1);
  EXPECT_EQ(std::fopen(out.c_str(), "r"), nullptr);
  // An output nobody can write is refused before training, not after.
  Result nodir = Fgemma(Tune(Tmp("no/such/dir/a.gguf"), "-q"));
  EXPECT_EQ(nodir.rc, 1);
  EXPECT_THAT(nodir.out, HasSubstr("cannot write into"));
  Result folder = Fgemma(Tune(::testing::TempDir(), "-q"));
  EXPECT_EQ(folder.rc, 1);
  EXPECT_THAT(folder.out, HasSubstr("is a folder"));
}

}  // namespace
}  // namespace fg
