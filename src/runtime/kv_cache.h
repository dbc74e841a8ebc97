// The K and V caches of one sequence, and the pin a session rewinds to.
//
// Global layers keep position p at row p (`context` rows); sliding-window layers keep it in a
// ring at row p % local_rows (model::LocalCacheRows: the window plus a prefill chunk). One
// anonymous mapping holds every layer: zero pages until written, so a long context costs memory
// only as it fills.
//
// The pin: a position (the end of a cached catalog prefix) the session can always rewind to,
// without a copy of the caches. Rows of global layers below the pin are never rewritten by later
// positions; ring rows are, so before a run overwrites a ring row of a pinned position (the
// window before the pin), that row is copied aside once (BeforeWrite), and RewindToPin puts the
// copies back.
#ifndef FGEMMA_RUNTIME_KV_CACHE_H_
#define FGEMMA_RUNTIME_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "fgemma/status.h"
#include "src/model/gemma3/config.h"

namespace fg::runtime {

// Unmaps the caches' mapping.
struct CacheUnmap {
  size_t bytes = 0;
  void operator()(void* p) const;
};

class KvCache {
 public:
  KvCache() = default;
  // ResourceExhausted when the mapping fails.
  static StatusOr<KvCache> Create(const model::Config& config, int64_t local_rows,
                                  int64_t context);

  int64_t layers() const { return static_cast<int64_t>(k_.size()); }
  int64_t rows(int64_t layer) const { return global_[layer] ? context_ : local_rows_; }
  int64_t local_rows() const { return local_rows_; }
  int64_t context() const { return context_; }  // a global layer's rows
  std::span<float> k(int64_t layer) { return k_[layer]; }
  std::span<float> v(int64_t layer) { return v_[layer]; }
  // The rows a sequence of `position` tokens fills (global: 0..position-1; rings: all once
  // wrapped).
  std::span<const float> filled_k(int64_t layer, int64_t position) const;
  std::span<const float> filled_v(int64_t layer, int64_t position) const;

  // Whether a sequence at `position` can rewind to `to` (< position): the keys a query at `to`
  // reads in the rings (from to - window + 1 on) were not overwritten by a later position.
  bool CanRewind(int64_t position, int64_t to) const;

  void Pin(int64_t position);
  void Unpin();  // also drops the copies
  int64_t pinned() const { return pin_; }  // -1: none
  // Before a run writes positions [start, start + n): copies aside the ring rows of pinned
  // positions it overwrites (each once).
  void BeforeWrite(int64_t start, int64_t n);
  // Puts the copies back: every ring row a query at the pin or later reads holds what it held
  // at the pin. The pin stays.
  void RewindToPin();

  // Bytes of the caches and of the copies.
  size_t bytes() const;

 private:
  int64_t PinLow() const;  // the oldest position a query at the pin reads in a ring

  int64_t kv_dim_ = 0, window_ = 0, local_rows_ = 0, context_ = 0;
  std::vector<bool> global_;
  std::unique_ptr<void, CacheUnmap> map_;
  std::vector<std::span<float>> k_, v_;  // per layer: [rows, n_kv, head_dim] in map_
  int64_t pin_ = -1;
  int64_t pin_saved_ = 0;  // ring rows of positions [PinLow(), pin_saved_) are in pin_k_/pin_v_
  std::vector<std::vector<float>> pin_k_, pin_v_;  // per layer (sliding layers only)
};

}  // namespace fg::runtime

#endif  // FGEMMA_RUNTIME_KV_CACHE_H_
