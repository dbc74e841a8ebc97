#include "src/runtime/kv_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace fg::runtime {

void CacheUnmap::operator()(void* p) const { ::munmap(p, bytes); }

StatusOr<KvCache> KvCache::Create(const model::Config& c, int64_t local_rows, int64_t context) {
  KvCache kc;
  kc.kv_dim_ = c.kv_dim();
  kc.window_ = c.sliding_window;
  kc.local_rows_ = local_rows;
  kc.context_ = context;
  kc.global_.resize(static_cast<size_t>(c.n_layers));
  for (int64_t l = 0; l < c.n_layers; ++l) kc.global_[l] = c.IsGlobal(l);
  size_t total = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    total += 2 * static_cast<size_t>(kc.rows(l) * kc.kv_dim_) * sizeof(float);
  }
  total = std::max<size_t>(total, 1);
  void* map = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    return ResourceExhaustedError("session: cannot map " + std::to_string(total) +
                                  " bytes of KV cache");
  }
  kc.map_ = std::unique_ptr<void, CacheUnmap>(map, CacheUnmap{total});
  float* next = static_cast<float*>(map);
  kc.k_.resize(c.n_layers);
  kc.v_.resize(c.n_layers);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const size_t n = static_cast<size_t>(kc.rows(l) * kc.kv_dim_);
    kc.k_[l] = std::span<float>(next, n);
    kc.v_[l] = std::span<float>(next + n, n);
    next += 2 * n;
  }
  kc.pin_k_.resize(c.n_layers);
  kc.pin_v_.resize(c.n_layers);
  return kc;
}

std::span<const float> KvCache::filled_k(int64_t layer, int64_t position) const {
  const int64_t rows = std::min<int64_t>(position, this->rows(layer));
  return std::span<const float>(k_[layer]).first(static_cast<size_t>(rows * kv_dim_));
}

std::span<const float> KvCache::filled_v(int64_t layer, int64_t position) const {
  const int64_t rows = std::min<int64_t>(position, this->rows(layer));
  return std::span<const float>(v_[layer]).first(static_cast<size_t>(rows * kv_dim_));
}

bool KvCache::CanRewind(int64_t position, int64_t to) const {
  // A sliding layer keeps position p at ring row p % local_rows_; the next query (at `to`)
  // reads keys from to - window + 1 on. The oldest of them is intact iff no later position
  // written so far (< position) landed on its row.
  const int64_t oldest = std::max<int64_t>(0, to - window_ + 1);
  return !(to > 0 && to < position && oldest + local_rows_ < position);
}

int64_t KvCache::PinLow() const { return std::max<int64_t>(0, pin_ - window_ + 1); }

void KvCache::Pin(int64_t position) {
  Unpin();
  pin_ = position;
  pin_saved_ = PinLow();
}

void KvCache::Unpin() {
  pin_ = -1;
  pin_saved_ = 0;
  for (auto& p : pin_k_) std::vector<float>().swap(p);
  for (auto& p : pin_v_) std::vector<float>().swap(p);
}

void KvCache::BeforeWrite(int64_t start, int64_t n) {
  if (pin_ < 0) return;
  // Writing position p overwrites ring row p % local_rows_, which held p - local_rows_. Every
  // position from the pin on was written through here since the pin, so the rows of
  // [PinLow(), pin_saved_) were saved before their first overwrite and those of
  // [pin_saved_, pin_) still hold their pinned positions: the first of them that this run
  // reaches is pin_saved_ itself.
  const int64_t from = std::max(pin_saved_, start - local_rows_);
  const int64_t to = std::min(pin_, start + n - local_rows_);
  if (to <= from) return;
  const int64_t low = PinLow();
  for (size_t l = 0; l < k_.size(); ++l) {
    if (global_[l]) continue;
    pin_k_[l].resize(static_cast<size_t>((to - low) * kv_dim_));
    pin_v_[l].resize(static_cast<size_t>((to - low) * kv_dim_));
    for (int64_t q = from; q < to; ++q) {
      const size_t src = static_cast<size_t>((q % local_rows_) * kv_dim_);
      const size_t dst = static_cast<size_t>((q - low) * kv_dim_);
      std::memcpy(&pin_k_[l][dst], &k_[l][src], kv_dim_ * sizeof(float));
      std::memcpy(&pin_v_[l][dst], &v_[l][src], kv_dim_ * sizeof(float));
    }
  }
  pin_saved_ = to;
}

void KvCache::RewindToPin() {
  // Every ring row of a position in [PinLow(), pin_) that a run after the pin overwrote was
  // copied aside first (BeforeWrite), so putting those back makes the ring hold exactly what it
  // held at the pin for every position a query at the pin or later reads; rows of other
  // positions are never read again before being rewritten. Global layers keep position p at
  // row p, which only a run at p writes, so rows below the pin are untouched.
  const int64_t low = PinLow();
  for (size_t l = 0; l < k_.size(); ++l) {
    if (global_[l]) continue;
    for (int64_t q = low; q < pin_saved_; ++q) {
      const size_t src = static_cast<size_t>((q - low) * kv_dim_);
      const size_t dst = static_cast<size_t>((q % local_rows_) * kv_dim_);
      std::memcpy(&k_[l][dst], &pin_k_[l][src], kv_dim_ * sizeof(float));
      std::memcpy(&v_[l][dst], &pin_v_[l][src], kv_dim_ * sizeof(float));
    }
    pin_k_[l].clear();
    pin_v_[l].clear();
  }
  pin_saved_ = low;
}

size_t KvCache::bytes() const {
  size_t b = 0;
  for (size_t l = 0; l < k_.size(); ++l) {
    b += (k_[l].size() + v_[l].size() + pin_k_[l].size() + pin_v_[l].size()) * sizeof(float);
  }
  return b;
}

}  // namespace fg::runtime
