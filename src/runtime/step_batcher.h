// Continuous batching: the Appends of several sessions over one Model, each made on its own
// thread, run as one forward pass (model::BuildBatchedForward): every matmul once over all
// their new tokens, so the weights are read once per step for all of them, and the attention
// per session on its own caches.
//
// A session with SessionOptions::batcher set hands each chunk to the batcher and waits. The
// batcher runs what is waiting as soon as every participant (Enter .. Exit: the threads that
// will append soon, e.g. a server's busy slots) is waiting, or when the oldest waiting chunk has
// waited `wait`; so a lone participant never waits, and one busy with something else (sending,
// a grammar step) delays the others at most `wait`. One batch runs at a time, on the batcher's
// thread pool, driven by one of the waiting threads.
//
// Every kernel's arithmetic for a row is the same whatever the other rows (docs/architecture.md
// "Batch invariance"), so a session gets bit for bit the logits it gets alone, whatever runs
// beside it.
//
// What runs alone (the session's own graphs, as without a batcher): chunks before
// SessionOptions::lora_from (the base model's weights), the reference kernels, a dump.
#ifndef FGEMMA_RUNTIME_STEP_BATCHER_H_
#define FGEMMA_RUNTIME_STEP_BATCHER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fgemma/status.h"
#include "src/base/thread_pool.h"
#include "src/exec/executor.h"
#include "src/runtime/kv_cache.h"
#include "src/runtime/model.h"

namespace fg::runtime {

class StepBatcher {
 public:
  struct Options {
    ThreadPool* pool = nullptr;  // not owned; nullptr: single-threaded
    // How long the oldest waiting chunk waits for the other participants.
    std::chrono::microseconds wait{2000};
    // Tokens per batch at most (a chunk larger than this runs in a batch of its own).
    int64_t max_tokens = 256;
  };

  // One session's chunk (filled by Session; the batcher writes the outputs).
  struct Item {
    std::span<const int32_t> tokens;
    int64_t position = 0;                   // of the first token
    KvCache* cache = nullptr;               // the session's caches (written at the positions)
    int64_t head_rows = 0;                  // logits of the last head_rows tokens (0: none)
    std::vector<float>* logits = nullptr;   // out: [head_rows, vocab] when head_rows > 0
    std::vector<float>* hidden = nullptr;   // out: the last token's final-norm hidden state
    // Batcher-owned.
    std::chrono::steady_clock::time_point arrived;
    bool done = false;
    Status status;
  };

  struct Stats {
    int64_t steps = 0;          // batched forward passes run
    int64_t sequences = 0;      // chunks they ran (sequences / steps: the mean batch)
    int64_t max_sequences = 0;  // the largest batch
    int64_t graphs = 0;         // batch graphs built
    double run_seconds = 0;     // spent running batches (the rest of the time the batcher idles
                                // or waits for participants)
  };

  static StatusOr<std::unique_ptr<StepBatcher>> Create(const Model& model, Options options);
  ~StepBatcher();

  // A participant: a thread that will append to a batched session soon (Enter), until it
  // will not (Exit). The batcher waits for every participant (up to Options::wait) before it
  // runs a batch.
  void Enter();
  void Exit();

  // Runs `item` in a batch; returns when it ran (its outputs filled) or failed.
  Status Run(Item* item);

  Stats stats() const;
  const Model& model() const { return model_; }

 private:
  StepBatcher(const Model& model, Options options) : model_(model), options_(options) {}
  // Runs `batch` as one graph (called without the lock; one at a time).
  Status RunBatch(std::span<Item* const> batch);
  StatusOr<exec::Executor*> ExecutorFor(std::span<Item* const> batch);

  const Model& model_;
  const Options options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Item*> pending_;  // in arrival order
  int participants_ = 0;
  bool running_ = false;
  std::chrono::steady_clock::time_point free_since_;  // when the last batch ended
  Stats stats_;

  // Only the running thread touches these.
  struct Cached {
    std::unique_ptr<exec::Executor> executor;
    uint64_t used = 0;  // clock_ at its last run
  };
  std::map<std::vector<int64_t>, Cached> executors_;  // by ExecutorKey
  uint64_t clock_ = 0;
  int64_t graphs_built_ = 0;
  exec::SharedArena arena_;
  std::vector<int32_t> tokens_, pos_, logit_rows_, full_rows_;
  // The cache states' names, [sequence][layer]: (K name, V name), made once.
  std::vector<std::vector<std::pair<std::string, std::string>>> state_names_;
};

}  // namespace fg::runtime

#endif  // FGEMMA_RUNTIME_STEP_BATCHER_H_
