// The tool prior's contrastive loss (`fgemma tune --prior-negatives K`, Trainer's RunGroup): a
// tool prior example scored after its own tool's text and after each of its contrast tools',
// loss -log softmax(s)[own], s_j = log p(request | tool j's text). Its gradient combines the
// members' own (each checked against finite differences by train_grad_test) as
// sum_j (y_j - p_j) dCE_j; here that combination is checked against central differences of the
// group's loss itself, along the gradient and along a random direction, on a small synthetic
// model through the trainer (F32 transposes, so the backward products are exact).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fgemma/function_caller.h"
#include "src/call/runtime_model.h"
#include "src/call/training_data.h"
#include "src/gguf_tools/synthetic.h"
#include "src/text/tool_catalog.h"
#include "src/train/trainer.h"
#include "tests/testing/exec_inputs.h"

namespace fg {
namespace {

constexpr char kTools[] = R"([
  {"name":"set_light","description":"Turn a light on or off",
   "parameters":{"type":"object","properties":{"state":{"type":"string","enum":["on","off"]}},
   "required":["state"]}},
  {"name":"start_timer","description":"Start a timer",
   "parameters":{"type":"object","properties":{"minutes":{"type":"integer"}},"required":["minutes"]}},
  {"name":"play_music","description":"Play a song or an artist",
   "parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}])";

class TrainContrastTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = gguf::SyntheticPreset("small");
    ASSERT_TRUE(spec.ok());
    spec->seed = 11;
    path_ = ::testing::TempDir() + "/train_contrast_small.gguf";
    ASSERT_TRUE(gguf::WriteSyntheticGemma3(*spec, path_).ok());
    auto m = CallModel::Load(path_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = *m;
    auto c = text::ParseToolCatalog(kTools);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    catalog_ = std::make_shared<const text::ToolCatalog>(std::move(*c));
  }

  std::vector<call::TrainingExample> Prior(int negatives) const {
    auto ex = call::ParseTrainingData(
        R"({"request":"turn the light on","calls":[{"name":"set_light","arguments":{"state":"on"}}]})"
        "\n"
        R"({"request":"timer for five minutes","calls":[{"name":"start_timer","arguments":{"minutes":5}}]})",
        "test", catalog_);
    EXPECT_TRUE(ex.ok()) << ex.status().ToString();
    return call::ChannelExamples(*ex, negatives, 3);
  }

  // A TRL line of a catalog whose optional arguments can be left out, with `call`.
  static std::string InkLine(const std::string& call) {
    const std::string tools =
        R"([{"type":"function","function":{"name":"order_ink","parameters":{"type":"object",)"
        R"("properties":{"cartridge":{"type":"string","enum":["cyan","black"]},)"
        R"("quantity":{"type":"integer"}},"required":["cartridge"]}}},)"
        R"({"type":"function","function":{"name":"start_timer","parameters":{"type":"object",)"
        R"("properties":{"minutes":{"type":"integer"},"note":{"type":"string"}},)"
        R"("required":["minutes"]}}}])";
    return R"({"tools":)" + tools +
           R"(,"messages":[{"role":"user","content":"order ink"},{"role":"assistant",)"
           R"("tool_calls":[{"type":"function","function":)" +
           call + "}]}]}\n";
  }

  std::unique_ptr<train::Trainer> MakeTrainer(
      std::vector<call::TrainingExample> examples,
      train::LeaveOutLoss leave_out = train::LeaveOutLoss::kLearn, bool free_only = true,
      const std::string& init = "") const {
    train::TuneOptions o;
    o.init_adapter = init;
    o.loss_leave_out = leave_out;
    o.loss_free_tokens_only = free_only;
    o.lora.rank = 4;
    o.lora.alpha = 8;
    o.lora.seed = 5;
    o.threads = 1;
    o.prefix_store_mib = 0;
    o.transposed_type = tensor::DType::kF32;
    auto t = train::Trainer::Create(call::RuntimeModel(*model_), call::CallTokenizer(*model_),
                                    std::move(examples), o);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    if (!t.ok()) return nullptr;
    if (!init.empty()) return std::move(*t);
    // Random B (a fresh adapter's is 0, which leaves A without a gradient).
    uint32_t rnd = 41;
    for (train::LoraParams::Tensor& p : (*t)->params().tensors()) {
      if (!p.is_b) continue;
      p.values = ::fg::testing::Random(p.values.size(), rnd++);
      for (float& v : p.values) v *= 0.3f;
    }
    return std::move(*t);
  }

  std::string path_;
  std::shared_ptr<const CallModel> model_;
  std::shared_ptr<const text::ToolCatalog> catalog_;
};

TEST_F(TrainContrastTest, ChannelExamplesNameOtherToolsOfTheCatalog) {
  const std::vector<call::TrainingExample> all = Prior(64);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].channel_negatives.size(), 2u);  // every other tool, at most
  for (const call::TrainingExample& e : all) {
    for (const std::string& n : e.channel_negatives) {
      EXPECT_NE(n, e.calls[0].first);
      EXPECT_NE(catalog_->Find(n), nullptr);
    }
  }
  const std::vector<call::TrainingExample> one = Prior(1);
  EXPECT_EQ(one[0].channel_negatives.size(), 1u);
  EXPECT_EQ(Prior(1)[0].channel_negatives, one[0].channel_negatives);  // from the seed
  EXPECT_TRUE(Prior(0)[0].channel_negatives.empty());
  // A negative renders as the same request after the other tool's text.
  const call::TrainingExample n = call::ChannelNegative(all[0], all[0].channel_negatives[0]);
  EXPECT_EQ(n.calls[0].first, all[0].channel_negatives[0]);
  EXPECT_NE(n.catalog_key, all[0].catalog_key);
  EXPECT_EQ(n.request, all[0].request);
}

TEST_F(TrainContrastTest, GroupLossIsMinusLogSoftmaxOfTheMembersScores) {
  // The members' own losses (each run alone, no contrast) give the group's loss.
  std::vector<call::TrainingExample> group = Prior(64);
  std::vector<call::TrainingExample> alone = {Prior(0)[0]};
  for (const std::string& n : group[0].channel_negatives) {
    alone.push_back(call::ChannelNegative(group[0], n));
  }
  auto g = MakeTrainer(group);
  auto a = MakeTrainer(alone);
  ASSERT_TRUE(g && a);
  std::vector<std::vector<float>> grad;
  std::vector<double> s;
  for (int j = 0; j < static_cast<int>(alone.size()); ++j) {
    auto ce = a->ExampleLoss(j, &grad);
    ASSERT_TRUE(ce.ok()) << ce.status().ToString();
    s.push_back(-*ce);
  }
  double z = 0;
  for (double x : s) z += std::exp(x);
  auto loss = g->ExampleLoss(0, &grad);
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  EXPECT_NEAR(*loss, std::log(z) - s[0], 1e-4);
  EXPECT_GT(*loss, 0.05) << "the check needs a group that is not already decided";
}

// Example `index`'s gradient against central differences of its loss, along the gradient and
// along a random direction.
void ExpectGradientMatchesFiniteDifferences(train::Trainer& t, int index) {
  std::vector<std::vector<float>> grad, scratch;
  auto l0 = t.ExampleLoss(index, &grad);
  ASSERT_TRUE(l0.ok()) << l0.status().ToString();
  std::vector<train::LoraParams::Tensor>& ps = t.params().tensors();
  double norm2 = 0;
  for (const auto& g : grad) {
    for (float x : g) norm2 += static_cast<double>(x) * x;
  }
  ASSERT_GT(norm2, 0);
  // Directions: the gradient (unit) and a random unit vector.
  std::vector<std::vector<float>> dirs_g = grad, dirs_r;
  uint32_t rnd = 97;
  double rn2 = 0;
  for (auto& g : dirs_g) {
    for (float& x : g) x = static_cast<float>(x / std::sqrt(norm2));
    dirs_r.push_back(::fg::testing::Random(g.size(), rnd++));
    for (float x : dirs_r.back()) rn2 += static_cast<double>(x) * x;
  }
  for (auto& r : dirs_r) {
    for (float& x : r) x = static_cast<float>(x / std::sqrt(rn2));
  }
  for (const auto* dir : {&dirs_g, &dirs_r}) {
    double analytic = 0;
    for (size_t i = 0; i < grad.size(); ++i) {
      for (size_t k = 0; k < grad[i].size(); ++k) analytic += static_cast<double>(grad[i][k]) * (*dir)[i][k];
    }
    const std::vector<std::vector<float>> saved = [&] {
      std::vector<std::vector<float>> v;
      for (const auto& p : ps) v.push_back(p.values);
      return v;
    }();
    const double h = 1e-2;
    double at[2];
    for (int side = 0; side < 2; ++side) {
      for (size_t i = 0; i < ps.size(); ++i) {
        for (size_t k = 0; k < ps[i].values.size(); ++k) {
          ps[i].values[k] = saved[i][k] + static_cast<float>((side == 0 ? h : -h) * (*dir)[i][k]);
        }
      }
      auto l = t.ExampleLoss(index, &scratch);
      ASSERT_TRUE(l.ok());
      at[side] = *l;
    }
    for (size_t i = 0; i < ps.size(); ++i) ps[i].values = saved[i];
    const double fd = (at[0] - at[1]) / (2 * h);
    SCOPED_TRACE(dir == &dirs_g ? "along the gradient" : "along a random direction");
    EXPECT_NEAR(analytic, fd, 0.02 * std::abs(fd) + 1e-4) << "analytic " << analytic << " fd " << fd;
  }
}

TEST_F(TrainContrastTest, GroupGradientMatchesFiniteDifferences) {
  auto t = MakeTrainer(Prior(64));
  ASSERT_TRUE(t);
  ExpectGradientMatchesFiniteDifferences(*t, 0);
}

// LeaveOutLoss::kSkip: the row where the arguments close while an optional one
// that no example gives could follow leaves the loss; one that some example gives stays, and so
// does a number's end (the same '}' after "5" ends the number).
TEST_F(TrainContrastTest, SkippingLeaveOutRowsDropsClosesBeforeArgumentsNeverGiven) {
  const std::string cyan = InkLine(R"({"name":"order_ink","arguments":{"cartridge":"cyan"}})");
  const std::string two =
      InkLine(R"({"name":"order_ink","arguments":{"cartridge":"cyan","quantity":2}})");
  const std::string timer = InkLine(R"({"name":"start_timer","arguments":{"minutes":5}})");
  struct Case {
    std::string jsonl;
    int64_t skipped;
  };
  for (const Case& c :
       {Case{cyan, 1}, Case{two, 0}, Case{timer, 0}, Case{cyan + two, 0}, Case{cyan + timer, 1}}) {
    auto ex = call::ParseTrainingData(c.jsonl, "test");
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    auto learn = MakeTrainer(*ex);
    auto skip = MakeTrainer(*ex, train::LeaveOutLoss::kSkip);
    ASSERT_TRUE(learn && skip);
    EXPECT_GT(skip->loss_rows_per_epoch(), 0);
    EXPECT_EQ(learn->loss_rows_per_epoch() - skip->loss_rows_per_epoch(), c.skipped) << c.jsonl;
    // With every call token in the loss (--loss-tokens all) too.
    auto all = MakeTrainer(*ex, train::LeaveOutLoss::kLearn, /*free_only=*/false);
    auto all_skip = MakeTrainer(*ex, train::LeaveOutLoss::kSkip, /*free_only=*/false);
    ASSERT_TRUE(all && all_skip);
    EXPECT_GT(all->loss_rows_per_epoch(), learn->loss_rows_per_epoch());
    EXPECT_EQ(all->loss_rows_per_epoch() - all_skip->loss_rows_per_epoch(), c.skipped) << c.jsonl;
  }
  // The timer's '}' leaves `note` out, but ends the number too.
  auto ex = call::ParseTrainingData(timer, "test");
  ASSERT_TRUE(ex.ok());
  auto tokens = call::RenderTrainingExample(call::CallTokenizer(*model_), (*ex)[0]);
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->leave_out.size(), 1u);
  EXPECT_EQ(tokens->leave_out[0].keys, std::vector<std::string>{"note"});
}

// LeaveOutLoss::kAnchor: the row where the arguments close while `quantity` (never given) could
// follow learns the starting adapter's own distribution over the tokens the grammar allows
// there. At the start that row's gradient is p - q = 0: the example's gradient is the one with
// the row skipped, and its loss exceeds it by the distribution's entropy. Once the adapter
// moves, the row pulls it back, and its gradient matches finite differences.
TEST_F(TrainContrastTest, AnchoredRowsLearnTheStartingAdaptersDistribution) {
  auto ex = call::ParseTrainingData(
      InkLine(R"({"name":"order_ink","arguments":{"cartridge":"cyan"}})"), "test");
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  const std::string start = ::testing::TempDir() + "/anchor_start.gguf";
  {
    auto random = MakeTrainer(*ex);  // a random B: the start is not the base model
    ASSERT_TRUE(random);
    auto w = random->AdapterWriter();
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE(w->WriteFile(start).ok());
  }
  auto learn = MakeTrainer(*ex, train::LeaveOutLoss::kLearn, true, start);
  auto skip = MakeTrainer(*ex, train::LeaveOutLoss::kSkip, true, start);
  auto anchor = MakeTrainer(*ex, train::LeaveOutLoss::kAnchor, true, start);
  ASSERT_TRUE(learn && skip && anchor);
  // The anchored position runs one row per token allowed there (',' and '}' at least).
  const int64_t allowed = anchor->loss_rows_per_epoch() - skip->loss_rows_per_epoch();
  EXPECT_GE(allowed, 2);
  std::vector<std::vector<float>> g_learn, g_skip, g_anchor;
  auto l_learn = learn->ExampleLoss(0, &g_learn);
  auto l_skip = skip->ExampleLoss(0, &g_skip);
  auto l_anchor = anchor->ExampleLoss(0, &g_anchor);
  ASSERT_TRUE(l_learn.ok() && l_skip.ok() && l_anchor.ok());
  auto distance = [](const std::vector<std::vector<float>>& a,
                     const std::vector<std::vector<float>>& b) {
    double d2 = 0, n2 = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      for (size_t k = 0; k < a[i].size(); ++k) {
        d2 += static_cast<double>(a[i][k] - b[i][k]) * (a[i][k] - b[i][k]);
        n2 += static_cast<double>(b[i][k]) * b[i][k];
      }
    }
    return std::sqrt(d2 / n2);
  };
  EXPECT_GT(distance(g_learn, g_skip), 1e-2) << "the '}' row must carry a gradient when learned";
  EXPECT_LT(distance(g_anchor, g_skip), 1e-4);
  const double entropy = *l_anchor - *l_skip;
  EXPECT_GT(entropy, 1e-3);
  EXPECT_LT(entropy, std::log(static_cast<double>(allowed)) + 1e-4);
  // Moved away from the start, the anchored row pulls back.
  for (auto* t : {skip.get(), anchor.get()}) {
    for (train::LoraParams::Tensor& p : t->params().tensors()) {
      if (p.is_b) {
        for (float& v : p.values) v *= 1.5f;
      }
    }
  }
  ASSERT_TRUE(skip->ExampleLoss(0, &g_skip).ok());
  ASSERT_TRUE(anchor->ExampleLoss(0, &g_anchor).ok());
  EXPECT_GT(distance(g_anchor, g_skip), 1e-3);
  ExpectGradientMatchesFiniteDifferences(*anchor, 0);
}

}  // namespace
}  // namespace fg
