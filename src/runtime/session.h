// A decoding session over a shared Model: appends tokens (prefill and decode) at its position
// into preallocated KV caches, and can snapshot, restore, rewind and pin that state.
//
// - An Append runs one graph per chunk of at most max_chunk tokens; only its last token gets
//   what the LogitsRequest asks for (full logits, a few vocabulary rows, or no LM head).
// - Positions are limited by `context` (OutOfRange past it). Sliding layers keep a ring of
//   window + max_chunk - 1 rows, so Truncate can rewind only about max_chunk tokens once the
//   ring has wrapped, except to the pinned position.
// - Not thread-safe: one thread at a time per session; sessions may share one Model.
//
// Cache layout, the head kinds, snapshots and pinning explained: docs/architecture.md
// "The session".
#ifndef FGEMMA_RUNTIME_SESSION_H_
#define FGEMMA_RUNTIME_SESSION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <tuple>
#include <vector>

#include "fgemma/status.h"
#include "src/base/thread_pool.h"
#include "src/exec/executor.h"
#include "src/runtime/kv_cache.h"
#include "src/runtime/model.h"

namespace fg::runtime {

class StepBatcher;

struct SessionOptions {
  int64_t context = 2048;   // positions this session can hold (<= the model's context_length)
  int64_t max_chunk = 128;  // tokens per prefill graph run
  ThreadPool* pool = nullptr;  // not owned; nullptr: single-threaded
  bool reference = false;      // run the reference kernels (tests)
  // Positions before this run without the model's adapters: an adapter trained on the base
  // model's catalog prefix (Model::adapters_after_prefix) applies from the prefix's end on.
  int64_t lora_from = 0;
  // Continuous batching: Appends run in the batcher's batches, with other sessions' (not
  // owned; over the same Model; src/runtime/step_batcher.h). The results are the same.
  StepBatcher* batcher = nullptr;
};

// What the last token of an Append gets.
struct LogitsRequest {
  enum class Kind { kFull, kNone, kRows, kHidden };
  Kind kind = Kind::kFull;
  // kRows: vocabulary ids in [0, vocab); any order, duplicates allowed (ascending runs are
  // fastest). Only read during Append.
  std::span<const int32_t> rows;
  // kFull: the full logits of the last `count` tokens (1 <= count <= the tokens appended, all
  // in the Append's last chunk): checking several drafted tokens in one run. kHidden: no
  // logits, the final-norm hidden states of the last `count` tokens (the same limits), for a
  // caller that applies the LM head itself to many runs' rows at once.
  int64_t count = 1;

  static LogitsRequest Full(int64_t count = 1) { return {Kind::kFull, {}, count}; }
  static LogitsRequest None() { return {Kind::kNone, {}, 1}; }
  static LogitsRequest Rows(std::span<const int32_t> ids) { return {Kind::kRows, ids, 1}; }
  static LogitsRequest Hidden(int64_t count) { return {Kind::kHidden, {}, count}; }
};

// LM-head work of a session's Appends so far (stats).
struct HeadStats {
  int64_t full = 0;         // Appends that computed every vocabulary row
  int64_t none = 0;         // Appends that skipped the head
  int64_t sparse = 0;       // Appends that computed only requested rows
  int64_t sparse_rows = 0;  // rows computed by those
};

class Session {
 public:
  static StatusOr<std::unique_ptr<Session>> Create(const Model& model, SessionOptions options);

  // Appends tokens at the current position. Afterwards logits() are those of the last token;
  // if it fails after checking its arguments, logits() is empty.
  Status Append(std::span<const int32_t> tokens) { return Append(tokens, LogitsRequest::Full()); }
  // Same, computing for the last token only what `request` asks for. Row ids out of range are
  // an OutOfRange error (checked before anything runs).
  Status Append(std::span<const int32_t> tokens, const LogitsRequest& request);
  // Logits of the last appended token ([vocab]) after a kFull Append ([count, vocab], the
  // last `count` tokens in order, after a kFull Append with count > 1); empty before the first
  // Append and after kNone/kRows ones. A view into the session (no copy per token): valid until
  // the next Append, Restore, Truncate or Reset.
  std::span<const float> logits() const { return logits_; }
  // After a kRows Append: row_logits()[j] is the logit of request.rows[j]; empty otherwise.
  std::span<const float> row_logits() const { return row_logits_; }
  // The final-norm hidden state of the last token ([hidden]) after a kNone/kRows Append; of the
  // last `count` tokens ([count, hidden]) after a kHidden one.
  std::span<const float> last_hidden() const { return hidden_; }
  const HeadStats& head_stats() const { return head_stats_; }
  int64_t position() const { return position_; }
  int64_t context() const { return options_.context; }
  const Model& model() const { return model_; }
  // SessionOptions::lora_from for the Appends from now on (the tool prior's runs start each
  // tool's adapted rows where its text ends).
  void set_lora_from(int64_t position) { options_.lora_from = position; }

  struct Snapshot {
    int64_t position = 0;
    std::vector<std::vector<float>> k, v;  // per layer, the rows in use
    std::vector<float> logits;
  };
  Snapshot Save() const;
  Status Restore(const Snapshot& s);
  // What Save copies of layer `layer`, viewed in place (valid until the next Append, Restore,
  // Truncate or Reset): the K and V cache rows in use.
  std::span<const float> cached_k(int64_t layer) const;
  std::span<const float> cached_v(int64_t layer) const;
  // Restore from per-layer views of those rows (e.g. a mapped file), copied straight into the
  // caches; logits are cleared. Checks every size before changing anything.
  Status Restore(int64_t position, std::span<const std::span<const float>> k,
                 std::span<const std::span<const float>> v);
  void Reset();
  // Rewinds to `position` (<= position()), keeping the cache of the tokens before it, so a new
  // continuation can share a prefix with the old one. FailedPrecondition when a sliding layer's
  // ring has already overwritten a row that position still needs (rewinding further back than
  // about max_chunk tokens once the ring has wrapped); the session is then unchanged. Logits are
  // cleared: append at least one token before reading them.
  Status Truncate(int64_t position);
  // Makes Truncate(position()) succeed from any later position (docs/architecture.md): costs
  // nothing while fewer than about max_chunk tokens follow the pinned position, at most the
  // window's rows of every sliding layer after that. Replaces an earlier pin; Restore, Reset and
  // Truncate below the pinned position drop it.
  void Pin();
  // The pinned position, or -1.
  int64_t pinned() const { return cache_.pinned(); }

  // Runs the following Appends through `batcher` (nullptr: alone again); InvalidArgument when
  // it runs another model.
  Status SetBatcher(StepBatcher* batcher);

  // Calls fn for every named intermediate of the following Appends (debugging, --dump).
  void SetDump(exec::DumpFn fn);
  // Bytes of KV cache (with rows copied aside for the pin) and of activation scratch held now.
  size_t cache_bytes() const;
  size_t scratch_bytes() const;

 private:
  Session(const Model& model, SessionOptions options) : model_(model), options_(options) {}
  // The graph for `n_tokens` new tokens, with the LM head (one logit row) or without it (the
  // final-norm hidden state of the last token).
  StatusOr<exec::Executor*> ExecutorFor(int64_t n_tokens, int64_t head_rows, bool base);
  // Tokens of the chunk that starts at `position` with `left` tokens to go.
  int64_t ChunkAt(int64_t position, int64_t left) const;
  // row_logits_ = the head rows `rows` times hidden_.
  Status RowLogits(std::span<const int32_t> rows);
  // After a headless last chunk: the rows a kRows request asks for, and the head stats.
  Status CountHead(const LogitsRequest& request);
  // One chunk at position_ on the session's own graph: the logits of its last head_rows tokens
  // (head_rows > 0), else the final-norm hidden states of its last max(1, -head_rows) tokens;
  // a view into the executor.
  StatusOr<std::span<const float>> RunAlone(std::span<const int32_t> chunk, int64_t head_rows,
                                            bool base);
  // The same through the batcher, into owned_logits_ (head_rows > 0) or owned_hidden_.
  Status RunBatched(std::span<const int32_t> chunk, int64_t head_rows);

  const Model& model_;
  SessionOptions options_;
  int64_t position_ = 0;
  KvCache cache_;
  std::span<const float> logits_;    // an executor's output, or owned_logits_
  std::vector<float> owned_logits_;  // logits restored from a snapshot
  std::span<const float> hidden_;    // result_norm of a headless run
  std::vector<float> row_logits_;
  HeadStats head_stats_;
  // Activation memory every executor uses (grown, and the executors moved to it, when a new
  // graph needs more).
  exec::SharedArena arena_;
  // Keyed by (tokens, rows of full logits: 0 = no LM head).
  // By (tokens, head rows, without adapters).
  std::map<std::tuple<int64_t, int64_t, bool>, std::unique_ptr<exec::Executor>> executors_;
  model::Weights base_weights_;  // the model's weights without adapters (lora_from)
  exec::DumpFn dump_;
  std::vector<int32_t> pos_buf_;
  std::vector<int32_t> logit_rows_;
  std::vector<float> owned_hidden_;  // the last hidden state a batcher copied out
};

}  // namespace fg::runtime

#endif  // FGEMMA_RUNTIME_SESSION_H_
