// A decoding session over a shared Model: prefill and decode with a preallocated KV cache.
//
// - Tokens are appended in chunks of at most max_chunk (one graph run per chunk); only the last
//   token of an Append gets logits (the LM head never sees the other rows).
// - Global layers keep `context` cache rows (position p at row p); sliding layers keep a ring
//   of window + max_chunk - 1 rows (position p at row p % rows), so their memory and attention
//   cost do not grow with position. Appending past `context` is an OutOfRange error.
// - Snapshot/Restore copy the whole state (caches, position, last logits).
#ifndef FGEMMA_RUNTIME_SESSION_H_
#define FGEMMA_RUNTIME_SESSION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "fgemma/status.h"
#include "src/base/thread_pool.h"
#include "src/exec/executor.h"
#include "src/runtime/model.h"

namespace fg::runtime {

struct SessionOptions {
  int64_t context = 2048;   // positions this session can hold (<= the model's context_length)
  int64_t max_chunk = 128;  // tokens per prefill graph run
  ThreadPool* pool = nullptr;  // not owned; nullptr: single-threaded
  bool reference = false;      // run the reference kernels (tests)
};

class Session {
 public:
  static StatusOr<std::unique_ptr<Session>> Create(const Model& model, SessionOptions options);

  // Appends tokens at the current position. Afterwards logits() are those of the last token;
  // if it fails after checking its arguments, logits() is empty.
  Status Append(std::span<const int32_t> tokens);
  // Logits of the last appended token ([vocab]); empty before the first Append. A view into the
  // session (no copy per token): valid until the next Append, Restore or Reset.
  std::span<const float> logits() const { return logits_; }
  int64_t position() const { return position_; }
  int64_t context() const { return options_.context; }
  const Model& model() const { return model_; }

  struct Snapshot {
    int64_t position = 0;
    std::vector<std::vector<float>> k, v;  // per layer, the rows in use
    std::vector<float> logits;
  };
  Snapshot Save() const;
  Status Restore(const Snapshot& s);
  void Reset();

  // Calls fn for every named intermediate of the following Appends (debugging, --dump).
  void SetDump(exec::DumpFn fn);
  // Bytes of KV cache and of activation scratch held now.
  size_t cache_bytes() const;
  size_t scratch_bytes() const;

 private:
  Session(const Model& model, SessionOptions options) : model_(model), options_(options) {}
  StatusOr<exec::Executor*> ExecutorFor(int64_t n_tokens);
  int64_t CacheRows(int64_t layer) const;

  const Model& model_;
  SessionOptions options_;
  int64_t local_rows_ = 0;
  int64_t position_ = 0;
  std::vector<std::vector<float>> k_, v_;  // per layer: [rows, n_kv, head_dim]
  std::span<const float> logits_;    // an executor's output, or owned_logits_
  std::vector<float> owned_logits_;  // logits restored from a snapshot
  std::map<int64_t, std::unique_ptr<exec::Executor>> executors_;  // by chunk length
  exec::DumpFn dump_;
  std::vector<int32_t> pos_buf_;
};

}  // namespace fg::runtime

#endif  // FGEMMA_RUNTIME_SESSION_H_
