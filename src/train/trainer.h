// LoRA fine-tuning on the CPU (`fgemma tune`): examples rendered as `fgemma call` prompts them,
// cross-entropy on the call tokens, the gradient from the graph's backward pass, AdamW.
//
// Two designs for the catalog prefix (every example's prompt starts with its tool catalog):
// - kBase: the prefix's K/V come from the base model (forward only, never adapted; at
//   inference the adapter applies from the end of the prefix on, so `fgemma call` can share
//   the base model's prefix cache); only the request and the call pass forward and backward.
// - kAdapted: the adapter applies at every position; the whole prompt passes forward and
//   backward (llama.cpp applies such an adapter as it is).
// The adapter file records the design (metadata fgemma.lora.prefix = "base" | "adapted").
//
// Determinism: the order of examples comes from the seed, every kernel's result is independent
// of the thread that runs it, and a checkpoint holds all the state (adapter, AdamW moments,
// step), so the same seed and data give the same adapter bytes, resumed or not.
#ifndef FGEMMA_TRAIN_TRAINER_H_
#define FGEMMA_TRAIN_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fgemma/status.h"
#include "src/call/training_data.h"
#include "src/runtime/model.h"
#include "src/text/tokenizer.h"
#include "src/train/lora_params.h"

namespace fg::train {

enum class PrefixMode { kBase, kAdapted };
enum class LeaveOutLoss { kLearn, kSkip, kAnchor };

// Candidates of a row whose softmax covers the grammar's allowed tokens (TuneOptions::
// softmax_allowed); rows that allow more use the whole vocabulary.
inline constexpr int64_t kMaxCandidates = 64;

// The sparse LM-head gradient's defaults (TuneOptions::head_grad_threshold).
inline constexpr float kHeadGradThreshold = 1e-5f;
inline constexpr int64_t kHeadGradMaxTokens = 2048;

struct TuneOptions {
  LoraTrainSpec lora;
  // Start from this adapter's values (an adapter `fgemma tune` wrote, f32/f16/bf16/q8_0)
  // instead of a fresh one; its rank, alpha and modules replace `lora`'s.
  std::string init_adapter;
  PrefixMode prefix = PrefixMode::kBase;
  // true: the loss skips call tokens the call grammar forces (the only token it allows there):
  // `fgemma call` never asks the model for them (it does not even run the LM head), so their
  // rows cost the head's forward and backward for nothing. false: every call token.
  bool loss_free_tokens_only = true;
  // true: at a trained call token where the call grammar allows 2 to kMaxCandidates tokens,
  // the softmax covers those tokens only (what constrained decoding chooses from: 82 % of the
  // corpus's trained rows allow 2 to 64 tokens, the rest, string values, nearly all), so the
  // LM head costs C dot products there instead of the whole vocabulary's. Measured 1.3-1.4x
  // faster per-app tunes but 6 points fewer right functions (docs/tuning.md), so off by
  // default. false: every row's softmax covers the whole vocabulary.
  bool softmax_allowed = false;
  // The rows that leave out an optional argument that no example gives for its tool
  // (TrainingTokens::leave_out: a key chosen past it, the arguments closed while it could
  // follow; not a number's end, which the rows of every number teach). An app's few labelled
  // requests leave out what they do not say; where none of them shows a tool's optional
  // argument, learning those rows teaches the adapter to leave it out even when a request says
  // it ("order three yellow cartridges" without `quantity`).
  //   kLearn: learned as every row (the default).
  //   kSkip: out of the loss, the decision left to the starting adapter (it still drifts with
  //     the rest of the tune). Arguments that some examples give and others do not are
  //     learned both ways: skipping those too taught the adapter to give them where a request
  //     does not.
  //   kAnchor: the row's target is the starting adapter's own distribution over the tokens the
  //     grammar allows there (2 to kMaxCandidates of them; a row allowing more is learned),
  //     computed once when the trainer is made: a distillation loss that holds the decision
  //     where it started while the rest of the tune moves. It holds it on the examples' own
  //     requests, which do not say the argument and where the start leaves it out too, so it
  //     taught what the label did: no gain measured.
  // Measured per app in docs/tuning.md ("Arguments the 30 never give").
  LeaveOutLoss loss_leave_out = LeaveOutLoss::kLearn;
  // > 0: a whole-vocabulary row's gradient reaches the hidden state through the LM-head rows
  // of the tokens with p >= this (at most head_grad_max_tokens; the head's mean row for the
  // mass left out) instead of the head's whole transpose (TrainGraphSpec::head_threshold):
  // the head's backward product and its 178 MB transpose are gone. 0: exact.
  float head_grad_threshold = kHeadGradThreshold;
  int64_t head_grad_max_tokens = kHeadGradMaxTokens;
  // The tool prior's examples' (call::ChannelExamples) share of the loss: their rows weigh this
  // much against a call row's 1 (they need a lower rate than the calls: docs/tuning.md).
  double prior_weight = 1.0;
  double lr = 1e-3;
  double weight_decay = 0.0;
  double warmup = 0.05;         // share of the steps with a linear warmup
  double min_lr_ratio = 0.1;    // cosine decay to lr * this
  double clip = 1.0;            // global gradient norm clip (0: none)
  int64_t batch_tokens = 1024;  // trained tokens per step at least (whole examples)
  // Examples of one catalog prompt that come one after the other (a run): with kBase and no
  // prefix store, the prompt's K/V are computed once per run. Longer runs compute fewer
  // prefixes but put fewer catalogs in a batch; with the store (below) runs of 1 cost nothing.
  int64_t prefix_run = 1;
  // With kBase, every catalog prompt's K/V computed are kept (up to this many MiB, in an
  // unlinked temporary file: PrefixStore) and read back when the prompt comes again, instead of
  // computed again. 0: off. The adapter is the same either way.
  int64_t prefix_store_mib = 8192;
  int64_t epochs = 1;
  int64_t max_steps = 0;        // stop after this many steps in all (0: the epochs')
  int threads = 0;              // 0: the machine's
  tensor::DType transposed_type = tensor::DType::kQ8_0;
  std::string checkpoint;       // path; written every checkpoint_every steps and on stop
  int64_t checkpoint_every = 50;
  // Stop after this many steps of this run (0: run to the end), checkpoint written: a long run
  // in parts. Not part of the run's identity (a resumed run may use another value).
  int64_t stop_after = 0;
};

struct Progress {
  int64_t epoch = 0, step = 0, steps = 0;  // step of steps (in all)
  double loss = 0;                         // the step's mean loss per target token
  double tokens_per_s = 0;                 // trained tokens / s (forward and backward)
  double elapsed_s = 0, eta_s = 0;
  int64_t trained_tokens = 0;
};

struct EpochResult {
  int64_t epoch = 0;
  double train_loss = 0;   // mean over the epoch's target tokens
  double val_score = -1;   // the validation callback's score (-1: none)
};

class Trainer {
 public:
  // `model` is the base (no adapters).
  static StatusOr<std::unique_ptr<Trainer>> Create(const runtime::Model& model,
                                                   const text::Tokenizer& tokenizer,
                                                   std::vector<call::TrainingExample> examples,
                                                   const TuneOptions& options);
  ~Trainer();

  // Continues from a checkpoint written by this trainer's options (same data, same options).
  Status Resume(const std::string& checkpoint_path);

  // Runs the remaining steps. `progress` is called after every step; `stop` is polled between
  // steps (a checkpoint is written, then Cancelled is returned); `validate` (may be empty)
  // scores an adapter file after each epoch (higher is better) and the best epoch's adapter
  // is kept.
  Status Train(const std::function<void(const Progress&)>& progress,
               const std::atomic<bool>* stop,
               const std::function<StatusOr<double>(const std::string& adapter_path)>& validate,
               std::vector<EpochResult>* epochs);

  // All steps done (false after a stop_after stop).
  bool finished() const;
  // The adapter after training (the best epoch's when validated), with its metadata; with
  // `averaged` (other trainers' AdapterValues, the same options but the seed), the average of
  // this one and those (LoraParams::ToWriter; training.average is their count).
  StatusOr<gguf::Writer> AdapterWriter(
      std::span<const std::vector<std::vector<float>>> averaged = {}) const;
  // The values AdapterWriter writes, one per params().tensors() entry.
  std::vector<std::vector<float>> AdapterValues() const;
  LoraParams& params();
  // Example `index`'s loss at the current parameters (summed over its rows; with a contrast,
  // the -log softmax of its group's channel scores), and into `grad` its gradient with respect
  // to params().tensors() (resized and overwritten). Trains nothing: for gradient checks.
  StatusOr<double> ExampleLoss(int index, std::vector<std::vector<float>>* grad);
  int64_t steps_per_epoch() const;
  int64_t trained_tokens_per_epoch() const;
  // Rows of the loss per epoch (the trained tokens the loss scores, contrasts included; an
  // anchored position, LeaveOutLoss::kAnchor, one row per token allowed there).
  int64_t loss_rows_per_epoch() const;
  uint64_t transposed_bytes() const;
  // Catalog prefixes run through the base model so far, and those read back from the store.
  int64_t prefixes_computed() const;
  int64_t prefixes_read() const;

  struct Impl;

 private:
  explicit Trainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

const char* PrefixModeName(PrefixMode m);

}  // namespace fg::train

#endif  // FGEMMA_TRAIN_TRAINER_H_
