// fgemma tune: LoRA fine-tuning of a base model on labelled function calls (src/train).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fgemma/function_caller.h"
#include "src/base/file_io.h"
#include "src/call/runtime_model.h"
#include "src/call/training_data.h"
#include "src/runtime/model.h"
#include "src/text/tokenizer.h"
#include "src/text/tool_catalog.h"
#include "src/train/trainer.h"
#include "tools/fgemma/commands.h"
#include "tools/fgemma/common_flags.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void OnInterrupt(int) { g_stop.store(true); }

std::string Duration(double s) {
  char b[32];
  const long t = static_cast<long>(s + 0.5);
  if (t >= 3600) {
    std::snprintf(b, sizeof(b), "%ldh%02ldm", t / 3600, t / 60 % 60);
  } else {
    std::snprintf(b, sizeof(b), "%ldm%02lds", t / 60, t % 60);
  }
  return b;
}

// Exact-call accuracy of an adapter on validation examples (greedy, constrained), with the
// right-function rate as a small tie-breaker.
StatusOr<double> Validate(const std::string& model_path, const std::string& adapter,
                          const std::vector<call::TrainingExample>& val,
                          const std::string& tools_json, int threads, bool quiet) {
  FG_ASSIGN_OR_RETURN(auto model, CallModel::Load(model_path, {{adapter, 1.0f}}));
  int exact = 0, fn = 0;
  // One caller per run of examples with the same catalog prompt (its prefix and tool prior are
  // made once, as an app's caller would).
  std::unique_ptr<FunctionCaller> caller;
  std::string caller_key;
  for (size_t i = 0; i < val.size(); ++i) {
    const call::TrainingExample& e = val[i];
    // The catalog key starts with the tools' JSON (TRL lines) or "--tools".
    const std::string key = e.catalog_key.substr(0, e.catalog_key.find('\n'));
    if (caller == nullptr || caller_key != e.catalog_key) {
      FunctionCallerOptions o;
      o.threads = threads;
      o.developer_message = e.prompt.developer_message;
      caller.reset();
      FG_ASSIGN_OR_RETURN(caller,
                          FunctionCaller::Create(model, key == "--tools" ? tools_json : key, o));
      caller_key = e.catalog_key;
    }
    FG_ASSIGN_OR_RETURN(auto r, caller->Call(e.request));
    const bool f = r.validity.ok() && !r.calls.empty() && r.calls[0].name == e.calls[0].first;
    fn += f;
    exact += f && r.calls[0].arguments == e.calls[0].second;
    if (!quiet) std::fprintf(stderr, "\r  validating %zu/%zu", i + 1, val.size());
  }
  if (!quiet) std::fprintf(stderr, "\n");
  const double n = static_cast<double>(val.size());
  std::fprintf(stderr, "  validation: right function %d/%zu (%.1f %%), exact %d/%zu (%.1f %%)\n", fn,
               val.size(), 100.0 * fn / n, exact, val.size(), 100.0 * exact / n);
  return (exact + 1e-3 * fn) / n;
}

}  // namespace

// Fewer training examples than this are an app's few labelled requests: smaller batches and
// more epochs by default (kFewExamplePasses examples in all: 16 epochs of 30). An app's tool
// prior (--objective channel on them) refines the shipped call adapter's: kFewPriorPasses
// examples (4 epochs of 30) at kFewPriorLr, each ranked against every other tool (docs/tuning.md:
// the prior's loss rose at the calls' 1e-3; this is the shipped ranking stages' 5e-5 doubled for
// 30 examples, not swept).
constexpr size_t kFewExamples = 300;
constexpr int64_t kFewExamplePasses = 480;
// Adapters averaged for an app's few requests (--average): one run's exact calls vary with the
// example order by a few requests of 50; the average of three gained 11 of 399 over their mean.
constexpr int64_t kFewAverage = 3;
constexpr int64_t kFewPriorPasses = 120;
constexpr double kFewPriorLr = 1e-4;
// An app's few requests refining an adapter (the shipped tune adapter or --init-lora): at the
// corpus's 1e-3 their 16 epochs overfit them; 3e-4 read more exact calls both on the phrasings
// they show and on others (docs/tuning.md: "The learning rate of an app's tune"). A fresh
// adapter keeps 1e-3.
constexpr double kFewRefineLr = 3e-4;
// A flag not given.
constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();
constexpr double kUnsetAlpha = std::numeric_limits<double>::lowest();

int CmdTune(int argc, char** argv) {
  // kUnset, kUnsetAlpha and "": not given; the defaults below depend on the data and model.
  std::string data_path, tools_path, out_path, checkpoint, resume, modules;
  std::string prefix = "base", init_lora, loss_tokens = "free", loss_softmax = "vocab";
  std::string objective = "call", head_grad = "top", loss_leave_out = "learn";
  double prior_weight = 1.0;
  int64_t rank = kUnset, epochs = kUnset, batch_tokens = kUnset, max_steps = 0,
          checkpoint_every = 50, prefix_run = 1, prefix_store = 8192;
  int64_t stop_after = 0, prior_negatives = 0;
  int64_t seed = 1, augment = 0, average = kUnset;
  double alpha = kUnsetAlpha, lr = 1e-3, wd = 0.0, warmup = 0.05, val_split = 0.0, clip = 1.0;
  bool quiet = false;
  FlagParser p("tune",
               "LoRA fine-tuning on labelled function calls: trains an adapter (llama.cpp's "
               "format) that `fgemma call --lora` applies. The loss covers the call tokens only; "
               "prompts are rendered exactly as `fgemma call` renders them.");
  CommonFlags common;
  common.Register(p, CommonFlags::kModel, "Base model GGUF (default: the installed model)");
  p.AddString("--data", &data_path, "FILE",
              "Training examples, JSONL: TRL tool-calling lines {\"tools\", \"messages\"} or "
              "{\"request\", \"calls\"} with --tools (required)");
  p.AddString("--tools", &tools_path, "FILE", "Catalog of the {\"request\", \"calls\"} lines");
  p.AddString("-o,--output", &out_path, "FILE", "Adapter to write (required)");
  p.AddInt("--augment", &augment, "N",
           "Up to N more examples per training example, argument values that appear in the "
           "request swapped with other values of the same argument in the data (request and "
           "call together; for an app's few labelled requests; default 0)");
  p.AddInt("--lora-rank", &rank, "R", "LoRA rank (default 16)");
  p.AddDouble("--lora-alpha", &alpha, "A", "LoRA alpha: the scale is alpha / rank (default 32)");
  p.AddString("--lora-modules", &modules, "LIST",
              "Adapted projections, comma-separated (default all seven: attn_q,attn_k,attn_v,"
              "attn_o,ffn_gate,ffn_up,ffn_down)");
  p.AddString("--init-lora", &init_lora, "FILE|none",
              "Start from this adapter instead of a fresh one; its rank, alpha and modules are "
              "kept. Default: the shipped tune adapter (models/fgemma-tune-lora.gguf, the "
              "calls-only stage of the shipped call adapter) when the base model is the default "
              "model (or a copy), with --prefix base and no --lora-rank, --lora-alpha or "
              "--lora-modules (tuning it for one app); for an app's tool prior (--objective "
              "channel, fewer than 300 examples) the shipped call adapter, whose prior it "
              "refines; none: a fresh adapter");
  p.AddString("--loss-tokens", &loss_tokens, "free|all",
              "free (default): the loss skips call tokens the call grammar forces (fgemma call "
              "never asks the model for them); all: every call token");
  p.AddString("--loss-leave-out", &loss_leave_out, "learn|skip|anchor",
              "the tokens that leave out an optional argument none of the examples gives for "
              "its tool (a key chosen past it, the arguments closed while it could follow; not "
              "a number's end), for an app's few requests that never show an argument its "
              "users may say. learn (default): learned as every token; skip: out of the loss, "
              "the choice left to the starting adapter; anchor: learned toward the starting "
              "adapter's own distribution over the tokens the grammar allows there. Neither "
              "skip nor anchor read better in our per-app runs (docs/tuning.md)");
  p.AddString("--loss-softmax", &loss_softmax, "allowed|vocab",
              "vocab (default): the loss's softmax covers the whole vocabulary at every row; "
              "allowed: where the call grammar allows at most 64 tokens, only those (what "
              "constrained decoding chooses from; the LM head costs 64 rows there instead of "
              "the vocabulary's: faster, but less accurate in our per-app runs)");
  char head_top[160];
  std::snprintf(head_top, sizeof(head_top), "p >= %g (at most %lld", train::kHeadGradThreshold,
                static_cast<long long>(train::kHeadGradMaxTokens));
  p.AddString("--head-grad", &head_grad, "top|full",
              "top (default): a whole-vocabulary row's gradient reaches the model through the "
              "LM-head rows of the tokens with " +
                  std::string(head_top) +
                  "; the head's mean row for the mass left out, 1.6e-4 of it on average in a "
                  "per-app tune); full: through the whole head (exact; a product as large as the "
                  "head's forward one, and its 178 MB transpose in memory)");
  p.AddString("--objective", &objective, "call|both|channel",
              "call (default): learn the calls; both: also learn the tool prior, each one-call "
              "example's request after its tool's text (the adapter is marked "
              "fgemma.lora.channel and `fgemma call` runs its tool prior with it; the shipped "
              "adapter is trained so); channel: the tool prior only. Needs --prefix base. "
              "Without the prior's examples the adapter is not marked, and its tool prior runs "
              "the base model");
  p.AddDouble("--prior-weight", &prior_weight, "W",
              "With --objective both: the tool prior's examples' weight in the loss against the "
              "calls' 1 (default 1)");
  p.AddInt("--prior-negatives", &prior_negatives, "K",
           "With --objective both|channel: score each prior example's request after K other "
           "tools of its catalog too (drawn from --seed) and learn to rank its own tool first "
           "(-log softmax of the K+1 scores) instead of the request's likelihood alone; each "
           "example then costs K+1 runs (default 0: likelihood; 64, every other tool, for an "
           "app's tool prior: --objective channel with fewer than 300 examples)");
  p.AddString("--prefix", &prefix, "base|adapted",
              "base (default): the catalog prefix stays the base model's, the adapter applies "
              "after it (trains only request and call tokens); adapted: every position");
  p.AddDouble("--lr", &lr, "X",
              "Peak learning rate of AdamW (default 1e-3; for fewer than 300 examples that "
              "refine an adapter, the shipped one or --init-lora's: 3e-4; 1e-4 for an app's tool "
              "prior: --objective channel with fewer than 300 examples)");
  p.AddDouble("--wd", &wd, "X", "AdamW weight decay (default 0)");
  p.AddDouble("--warmup", &warmup, "F", "Share of steps with a linear warmup (default 0.05); then cosine");
  p.AddDouble("--clip", &clip, "X", "Clip the gradient's global norm to X (default 1; 0: off)");
  p.AddInt("--batch-tokens", &batch_tokens, "N",
           "Trained tokens per step, at least (default 1024; 64 for fewer than 300 training "
           "examples, an app's few labelled requests)");
  p.AddInt("--prefix-run", &prefix_run, "N",
           "Examples of one catalog prompt trained one after the other, sharing one computed "
           "prefix (--prefix base; default 1): without --prefix-store, longer runs compute fewer "
           "prefixes, but put fewer catalogs in a batch");
  p.AddInt("--prefix-store", &prefix_store, "MIB",
           "Keep each catalog prompt's K/V once computed (--prefix base), up to MIB MiB in an "
           "unlinked file of the temporary folder ($TMPDIR), and read them back instead of "
           "computing them again (default 8192; 0: off; the adapter is the same)");
  p.AddInt("--epochs", &epochs, "N",
           "Passes over the data (default 1; for fewer than 300 training examples, enough for "
           "about 480 examples in all, at most 32: 16 for 30; for an app's tool prior, "
           "--objective channel, about 120: 4 for 30)");
  p.AddInt("--max-steps", &max_steps, "N", "Stop after N steps in all (default 0: the epochs')");
  p.AddInt("--seed", &seed, "N", "Seed of the initial adapter and the example order (default 1)");
  p.AddInt("--average", &average, "N",
           "Train N adapters, seeds SEED to SEED+N-1 (their example orders, and a fresh "
           "adapter's start), one after the other, and write their average: one adapter of "
           "rank N x R whose product is the mean of theirs (default 1; 3 for fewer than 300 "
           "training examples, an app's few labelled requests, where it gave more exact calls "
           "than any one of the three: docs/tuning.md). Member M's checkpoint is CHECKPOINT.M");
  p.AddDouble("--val-split", &val_split, "F",
              "Hold out this share of the examples; score exact calls after each epoch and keep "
              "the best epoch (default 0: none)");
  p.AddString("--checkpoint", &checkpoint, "FILE",
              "Checkpoint (adapter + optimizer state), written atomically every "
              "--checkpoint-every steps, at the end and on Ctrl-C (default: OUTPUT.ckpt)");
  p.AddInt("--checkpoint-every", &checkpoint_every, "N", "Steps between checkpoints (default 50)");
  p.AddString("--resume", &resume, "FILE", "Continue from a checkpoint (same data and options)");
  p.AddInt("--stop-after", &stop_after, "N",
           "Stop after N steps of this run: write the checkpoint and the adapter as it is "
           "(go on later with --resume; default 0: run to the end)");
  common.Register(p, CommonFlags::kThreads);
  p.AddBool("-q,--quiet", &quiet, "No progress on stderr");
  p.AddNote("Same seed, data and options give the same adapter bytes, resumed or not. Ctrl-C "
            "(or SIGTERM) finishes the step, writes the checkpoint and the adapter as it is and "
            "exits 1; --resume goes on from the checkpoint. Exit codes: 0 ok, 1 "
            "runtime error, 2 usage error.");
  if (auto rc = p.Parse(argc, argv)) return *rc;
  auto usage = [&](const std::string& m) { return ReportError("tune", InvalidArgumentError(m), true); };
  if (data_path.empty()) return usage("--data FILE is required");
  if (out_path.empty()) return usage("-o FILE is required");
  if (Status s = common.Check(); !s.ok()) return usage(s.message());
  // Whether the adapter's shape was chosen (then a fresh adapter, not the shipped one).
  const bool shape_given = rank != kUnset || alpha != kUnsetAlpha || !modules.empty();
  if (rank == kUnset) rank = 16;
  if (alpha == kUnsetAlpha) alpha = 32;
  if (modules.empty()) modules = "attn_q,attn_k,attn_v,attn_o,ffn_gate,ffn_up,ffn_down";
  if (rank < 1 || rank > 1024) return usage("--lora-rank must be in [1, 1024]");
  if (!(alpha > 0) || !std::isfinite(alpha)) return usage("--lora-alpha must be > 0");
  if (!(lr > 0) || !std::isfinite(lr) || lr > 1) return usage("--lr must be in (0, 1]");
  if (!(wd >= 0) || !std::isfinite(wd)) return usage("--wd must be >= 0");
  if (!(warmup >= 0 && warmup <= 1)) return usage("--warmup must be in [0, 1]");
  if (!(clip >= 0) || !std::isfinite(clip)) return usage("--clip must be >= 0");
  if (batch_tokens < 1 && batch_tokens != kUnset) return usage("--batch-tokens must be >= 1");
  if (prefix_run < 1) return usage("--prefix-run must be >= 1");
  if (prefix_store < 0) return usage("--prefix-store must be >= 0");
  if ((epochs < 1 && epochs != kUnset) || epochs > 1000)
    return usage("--epochs must be in [1, 1000]");
  if (max_steps < 0) return usage("--max-steps must be >= 0");
  if (checkpoint_every < 0) return usage("--checkpoint-every must be >= 0");
  if (stop_after < 0) return usage("--stop-after must be >= 0");
  if (seed < 0) return usage("--seed must be >= 0");
  if ((average < 1 && average != kUnset) || average > 16)
    return usage("--average must be in [1, 16]");
  if (!(val_split >= 0 && val_split < 1)) return usage("--val-split must be in [0, 1)");
  if (augment < 0 || augment > 1000) return usage("--augment must be in [0, 1000]");
  if (prefix != "base" && prefix != "adapted") return usage("--prefix must be base or adapted");
  if (objective != "call" && objective != "both" && objective != "channel") {
    return usage("--objective must be call, both or channel");
  }
  if (!(prior_weight > 0) || !std::isfinite(prior_weight) || prior_weight > 1000) {
    return usage("--prior-weight must be in (0, 1000]");
  }
  if (prior_negatives < 0 || prior_negatives > 64)
    return usage("--prior-negatives must be in [0, 64]");
  if (prior_negatives > 0 && objective == "call") {
    return usage("--prior-negatives needs --objective both or channel");
  }
  if (objective != "call" && prefix != "base") {
    return usage("--objective " + objective + " needs --prefix base");
  }
  if (loss_tokens != "free" && loss_tokens != "all") return usage("--loss-tokens must be free or all");
  if (loss_leave_out != "learn" && loss_leave_out != "skip" && loss_leave_out != "anchor") {
    return usage("--loss-leave-out must be learn, skip or anchor");
  }
  if (loss_softmax != "allowed" && loss_softmax != "vocab") {
    return usage("--loss-softmax must be allowed or vocab");
  }
  if (head_grad != "top" && head_grad != "full") return usage("--head-grad must be top or full");
  auto mods = train::ParseModules(modules);
  if (!mods.ok()) return usage("--lora-modules: " + mods.status().message());
  if (checkpoint.empty()) checkpoint = out_path + ".ckpt";
  if (checkpoint == out_path) return usage("--checkpoint must differ from -o");

  // Where the results go must be writable before hours of training, not after.
  for (const std::string& path : {out_path, checkpoint}) {
    std::error_code ec;
    const std::filesystem::path p(path);
    const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
    if (std::filesystem::is_directory(p, ec)) {
      return ReportError("tune", InvalidArgumentError("'" + path + "' is a folder"));
    }
    if (!std::filesystem::is_directory(dir, ec) || access(dir.c_str(), W_OK) != 0) {
      return ReportError("tune", InvalidArgumentError("cannot write into '" + dir.string() +
                                                      "' (for '" + path + "')"));
    }
  }
  auto model_path = common.ModelPath();
  if (!model_path.ok()) return ReportError("tune", model_path.status());
  // The model and tokenizer as `fgemma call` loads them (a base vocabulary's function-calling
  // tokens named), so the training prompts are the inference prompts token for token.
  auto call_model = CallModel::Load(*model_path);
  if (!call_model.ok()) return ReportError("tune", call_model.status());
  const runtime::Model& model = call::RuntimeModel(**call_model);
  const text::Tokenizer& tok = call::CallTokenizer(**call_model);
  std::shared_ptr<const text::ToolCatalog> catalog;
  std::string tools_json;
  if (!tools_path.empty()) {
    auto t = ReadFileToString(tools_path);
    if (!t.ok()) return ReportError("tune", t.status().WithContext("--tools"));
    tools_json = *t;
    auto c = text::ParseToolCatalog(tools_json);
    if (!c.ok()) return ReportError("tune", c.status().WithContext("--tools '" + tools_path + "'"));
    catalog = std::make_shared<const text::ToolCatalog>(std::move(*c));
  }
  auto text = ReadFileToString(data_path, uint64_t{1} << 30);
  if (!text.ok()) return ReportError("tune", text.status().WithContext("--data"));
  auto examples = call::ParseTrainingData(*text, data_path, catalog);
  if (!examples.ok()) return ReportError("tune", examples.status());

  const size_t n_examples = examples->size();
  // The validation share: every k-th example (a fixed, spread-out choice).
  std::vector<call::TrainingExample> train_set, val_set;
  if (val_split > 0) {
    const size_t every = std::max<size_t>(2, static_cast<size_t>(std::llround(1.0 / val_split)));
    for (size_t i = 0; i < examples->size(); ++i) {
      ((i % every == every - 1) ? val_set : train_set).push_back(std::move((*examples)[i]));
    }
    if (val_set.empty()) return usage("--val-split leaves no validation example");
  } else {
    train_set = std::move(*examples);
  }
  // After the split: no variant of a validation example is trained on.
  const size_t n_original = train_set.size();
  if (augment > 0) {
    train_set = call::AugmentSwappingValues(train_set, static_cast<int>(augment),
                                            static_cast<uint64_t>(seed));
  }
  const size_t n_added = train_set.size() - n_original;
  // Defaults for an app's few labelled requests (the per-app runs of docs/tuning.md: 30 requests,
  // 16 epochs of 64-token batches, from the shipped adapter).
  const bool few = train_set.size() < kFewExamples;
  const bool app_prior = few && objective == "channel";
  if (batch_tokens == kUnset) batch_tokens = few ? 64 : 1024;
  if (epochs == kUnset) {
    const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(train_set.size()));
    const int64_t passes = app_prior ? kFewPriorPasses : kFewExamplePasses;
    epochs = few ? std::min<int64_t>(32, (passes + n - 1) / n) : 1;
  }
  if (average == kUnset) average = few && !app_prior ? kFewAverage : 1;
  if (average > 1 && stop_after > 0) {
    return usage("--stop-after needs --average 1 (fewer than 300 examples average " +
                 std::to_string(kFewAverage) + " adapters by default)");
  }
  if (app_prior && !p.WasSet("--prior-negatives")) prior_negatives = 64;
  if (init_lora == "none") {
    init_lora.clear();
  } else if (init_lora.empty() && !shape_given && prefix == "base" && IsDefaultModel(*model_path)) {
    init_lora = app_prior ? DefaultCallAdapterPath() : DefaultTuneAdapterPath();
    if (!init_lora.empty() && !quiet) {
      std::fprintf(
          stderr,
          "tune: starting from the shipped adapter %s (--init-lora none: a fresh adapter)\n",
          init_lora.c_str());
    } else if (init_lora.empty()) {
      std::fprintf(stderr,
                   "tune: note: no shipped adapter to start from (fgemma-tune-lora.gguf or "
                   "fgemma-call-lora.gguf in $FGEMMA_TUNE_LORA, $FGEMMA_CALL_LORA, ../models or "
                   "../share/fgemma beside this program): a fresh adapter, which needs far more "
                   "than an app's few requests (--init-lora FILE names one; --init-lora none "
                   "starts fresh without this note)\n");
    }
  }

  // The rate, once the start is known: an app's tool prior at its own; an app's calls slower
  // when they refine an adapter than when they train a fresh one.
  if (!p.WasSet("--lr")) {
    if (app_prior) {
      lr = kFewPriorLr;
    } else if (few && !init_lora.empty()) {
      lr = kFewRefineLr;
    }
  }

  size_t n_prior = 0;
  if (objective != "call") {
    std::vector<call::TrainingExample> prior = call::ChannelExamples(
        train_set, static_cast<int>(prior_negatives), static_cast<uint64_t>(seed));
    if (prior.empty()) {
      return ReportError("tune", InvalidArgumentError("--objective " + objective +
                                                      ": no training example has one call"));
    }
    n_prior = prior.size();
    if (objective == "channel") train_set.clear();
    for (call::TrainingExample& e : prior) train_set.push_back(std::move(e));
  }
  train::TuneOptions o;
  o.lora.rank = rank;
  o.lora.alpha = static_cast<float>(alpha);
  o.lora.modules = *mods;
  o.lora.seed = static_cast<uint64_t>(seed);
  o.init_adapter = init_lora;
  o.loss_free_tokens_only = loss_tokens == "free";
  o.softmax_allowed = loss_softmax == "allowed";
  o.loss_leave_out = loss_leave_out == "skip"     ? train::LeaveOutLoss::kSkip
                     : loss_leave_out == "anchor" ? train::LeaveOutLoss::kAnchor
                                                  : train::LeaveOutLoss::kLearn;
  if (head_grad == "full") o.head_grad_threshold = 0.0f;
  o.prior_weight = prior_weight;
  o.prefix = prefix == "base" ? train::PrefixMode::kBase : train::PrefixMode::kAdapted;
  o.lr = lr;
  o.weight_decay = wd;
  o.warmup = warmup;
  o.clip = clip;
  o.batch_tokens = batch_tokens;
  o.prefix_run = prefix_run;
  o.prefix_store_mib = prefix_store;
  o.epochs = epochs;
  o.max_steps = max_steps;
  o.threads = common.Threads();
  o.checkpoint = checkpoint;
  o.checkpoint_every = checkpoint_every;
  o.stop_after = stop_after;
  const bool tty = isatty(fileno(stderr));
  const std::string contrast = prior_negatives > 0 ? ", each ranked against up to " +
                                                         std::to_string(prior_negatives) +
                                                         " other tools of its catalog"
                                                   : "";
  struct sigaction sa = {}, old_int = {}, old_term = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  auto progress = [&](const train::Progress& pr) {
    if (quiet) return;
    char line[256];
    std::snprintf(line, sizeof(line),
                  "epoch %lld  step %lld/%lld  loss %.4f  %.0f tok/s  elapsed %s  eta %s",
                  static_cast<long long>(pr.epoch + 1), static_cast<long long>(pr.step),
                  static_cast<long long>(pr.steps), pr.loss, pr.tokens_per_s,
                  Duration(pr.elapsed_s).c_str(), Duration(pr.eta_s).c_str());
    if (tty) {
      std::fprintf(stderr, "\r%s\033[K", line);
      if (pr.step == pr.steps) std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "%s\n", line);
    }
  };
  std::function<StatusOr<double>(const std::string&)> validate;
  if (!val_set.empty()) {
    validate = [&](const std::string& adapter) {
      if (tty && !quiet) std::fprintf(stderr, "\n");
      return Validate(*model_path, adapter, val_set, tools_json, common.ThreadsOrZero(), quiet || !tty);
    };
  }
  // The members of --average, one after the other; the last one writes the average.
  std::vector<std::vector<std::vector<float>>> members;
  for (int64_t m = 1; m <= average; ++m) {
    const std::string suffix = average > 1 ? "." + std::to_string(m) : "";
    o.lora.seed = static_cast<uint64_t>(seed + m - 1);
    o.checkpoint = checkpoint + suffix;
    auto trainer = train::Trainer::Create(model, tok, train_set, o);
    if (!trainer.ok()) return ReportError("tune", trainer.status());
    // With --average, a member resumes from its own checkpoint where the run left one (member
    // 1 always did: a missing one is an error, as without --average).
    std::error_code ec;
    if (!resume.empty() && (m == 1 || std::filesystem::exists(resume + suffix, ec))) {
      if (Status s = (*trainer)->Resume(resume + suffix); !s.ok()) return ReportError("tune", s);
    }
    if (!quiet) {
      if (average > 1) {
        std::fprintf(stderr, "tune: member %lld of %lld (seed %lld, checkpoint %s)\n",
                     static_cast<long long>(m), static_cast<long long>(average),
                     static_cast<long long>(seed + m - 1), o.checkpoint.c_str());
      }
      std::fprintf(
          stderr,
          "tune: %zu examples (%zu for validation, %zu added by --augment, %zu of the tool "
          "prior%s), %lld trained "
          "tokens per epoch, %lld epoch%s of %lld steps (batches of %lld tokens), rank "
          "%lld, lr %g, %lld parameters, prefix %s, %d threads\n",
          n_examples, val_set.size(), n_added, n_prior, contrast.c_str(),
          static_cast<long long>((*trainer)->trained_tokens_per_epoch()),
          static_cast<long long>(epochs), epochs == 1 ? "" : "s",
          static_cast<long long>((*trainer)->steps_per_epoch()),
          static_cast<long long>(batch_tokens),
          static_cast<long long>((*trainer)->params().tensors()[0].shape[0]), lr,
          static_cast<long long>((*trainer)->params().parameters()), prefix.c_str(), o.threads);
    }
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    std::vector<train::EpochResult> epochs_done;
    Status s = (*trainer)->Train(progress, &g_stop, validate, &epochs_done);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    if (!s.ok()) {
      if (g_stop.load()) {
        if (average == 1) {
          // The adapter as it is, too (what --stop-after writes), then exit 1.
          if (auto w = (*trainer)->AdapterWriter(); w.ok() && w->WriteFile(out_path).ok()) {
            std::fprintf(stderr, "\nfgemma tune: interrupted; wrote %s as it is", out_path.c_str());
          }
          std::fprintf(stderr,
                       "\nfgemma tune: interrupted; checkpoint saved to %s (go on with --resume "
                       "%s)\n",
                       checkpoint.c_str(), checkpoint.c_str());
        } else {
          std::fprintf(stderr,
                       "\nfgemma tune: interrupted in member %lld of %lld; checkpoint saved to "
                       "%s, %s not written (go on with --resume %s)\n",
                       static_cast<long long>(m), static_cast<long long>(average),
                       o.checkpoint.c_str(), out_path.c_str(), checkpoint.c_str());
        }
        return kExitRuntime;
      }
      return ReportError("tune", s);
    }
    if (!quiet) {
      for (const auto& e : epochs_done) {
        if (e.val_score >= 0) {
          std::fprintf(stderr, "epoch %lld: train loss %.4f, validation score %.4f\n",
                       static_cast<long long>(e.epoch + 1), e.train_loss, e.val_score);
        } else {
          std::fprintf(stderr, "epoch %lld: train loss %.4f\n", static_cast<long long>(e.epoch + 1),
                       e.train_loss);
        }
      }
      if (o.prefix == train::PrefixMode::kBase) {
        std::fprintf(stderr, "tune: catalog prefixes computed %lld, read back %lld\n",
                     static_cast<long long>((*trainer)->prefixes_computed()),
                     static_cast<long long>((*trainer)->prefixes_read()));
      }
    }
    if (m < average) {
      members.push_back((*trainer)->AdapterValues());
      continue;
    }
    auto w = (*trainer)->AdapterWriter(members);
    if (!w.ok()) return ReportError("tune", w.status());
    if (Status ws = w->WriteFile(out_path); !ws.ok()) return ReportError("tune", ws);
    if (!quiet) {
      std::fprintf(
          stderr, "tune: wrote %s%s\n", out_path.c_str(),
          average > 1 ? (", the average of " + std::to_string(average) + " adapters").c_str() : "");
      if (!(*trainer)->finished()) {
        std::fprintf(stderr, "tune: stopped early (--stop-after); go on with --resume %s\n",
                     checkpoint.c_str());
      }
    }
  }
  return kExitOk;
}

}  // namespace fg::cli
