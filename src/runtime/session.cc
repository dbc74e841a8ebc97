#include "src/runtime/session.h"

#include <algorithm>
#include <cstring>
#include <new>

#include <sys/mman.h>

#include "src/kernels/matmul.h"
#include "src/model/gemma3/forward.h"
#include "src/tensor/dtype.h"

namespace fg::runtime {

StatusOr<std::unique_ptr<Session>> Session::Create(const Model& model, SessionOptions options) {
  const model::Config& c = model.config();
  if (options.context <= 0) return InvalidArgumentError("session: context must be > 0");
  if (c.context_length > 0 && options.context > c.context_length) {
    return InvalidArgumentError("session: context " + std::to_string(options.context) +
                                " exceeds the model's trained context " +
                                std::to_string(c.context_length));
  }
  if (options.max_chunk <= 0) return InvalidArgumentError("session: max_chunk must be > 0");
  options.max_chunk = std::min(options.max_chunk, options.context);
  std::unique_ptr<Session> s(new Session(model, options));
  s->local_rows_ = model::LocalCacheRows(c, options.max_chunk, options.context);
  // One anonymous mapping for all caches: zero pages until written (a vector would write every
  // row up front, making the whole context resident).
  size_t total = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    total += 2 * static_cast<size_t>(s->CacheRows(l) * c.kv_dim()) * sizeof(float);
  }
  total = std::max<size_t>(total, 1);
  void* map = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    return ResourceExhaustedError("session: cannot map " + std::to_string(total) +
                                  " bytes of KV cache");
  }
  s->cache_map_ = std::unique_ptr<void, CacheUnmap>(map, CacheUnmap{total});
  float* next = static_cast<float*>(map);
  s->k_.resize(c.n_layers);
  s->v_.resize(c.n_layers);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const size_t n = static_cast<size_t>(s->CacheRows(l) * c.kv_dim());
    s->k_[l] = std::span<float>(next, n);
    s->v_[l] = std::span<float>(next + n, n);
    next += 2 * n;
  }
  s->pin_k_.resize(c.n_layers);
  s->pin_v_.resize(c.n_layers);
  return s;
}

void CacheUnmap::operator()(void* p) const { ::munmap(p, bytes); }

int64_t Session::CacheRows(int64_t layer) const {
  return model_.config().IsGlobal(layer) ? options_.context : local_rows_;
}

int64_t Session::ChunkAt(int64_t position, int64_t left) const {
  int64_t n = std::min<int64_t>(options_.max_chunk, left);
  if (position < options_.lora_from) n = std::min<int64_t>(n, options_.lora_from - position);
  return n;
}

StatusOr<exec::Executor*> Session::ExecutorFor(int64_t n_tokens, int64_t head_rows, bool base) {
  const std::tuple<int64_t, int64_t, bool> key(n_tokens, head_rows, base);
  auto it = executors_.find(key);
  if (it != executors_.end()) return it->second.get();
  // Keep a few dozen graphs (each is a plan over the shared arena: kilobytes): full chunks,
  // 1 token (decode), and the short shapes of forced runs and drafted tokens, which repeat from
  // call to call; building one costs milliseconds.
  if (executors_.size() >= 32) {
    for (auto e = executors_.begin(); e != executors_.end(); ++e) {
      if (std::get<0>(e->first) != 1 && std::get<0>(e->first) != options_.max_chunk) {
        executors_.erase(e);
        break;
      }
    }
  }
  model::ForwardSpec spec;
  spec.n_tokens = n_tokens;
  spec.n_logit_rows = std::max<int64_t>(1, head_rows);
  spec.lm_head = head_rows > 0;
  spec.global_cache_rows = options_.context;
  spec.local_cache_rows = local_rows_;
  if (base && base_weights_.layers.empty()) {
    base_weights_ = model_.weights();
    base_weights_.loras.clear();
  }
  FG_ASSIGN_OR_RETURN(graph::Graph g, model::BuildForward(model_.config(),
                                                          base ? base_weights_ : model_.weights(),
                                                          spec));
  exec::ExecOptions eo;
  eo.reference = options_.reference;
  eo.external_arena = true;
  FG_ASSIGN_OR_RETURN(std::unique_ptr<exec::Executor> e,
                      exec::Executor::Create(std::move(g), model_.resolver(), options_.pool, eo));
  if (e->arena_bytes() > arena_capacity_) {
    // Grow the shared arena and move every executor to it (none holds results anyone reads
    // now: Append clears its views before making or running an executor).
    constexpr size_t kAlign = 64;
    const size_t bytes = e->arena_bytes();
    std::unique_ptr<uint8_t[]> grown(new (std::nothrow) uint8_t[bytes + kAlign]);
    if (!grown) {
      return ResourceExhaustedError("session: cannot allocate " + std::to_string(bytes) +
                                    " bytes of activation memory");
    }
    uint8_t* base = grown.get() + (kAlign - reinterpret_cast<uintptr_t>(grown.get()) % kAlign);
    for (auto& [key, other] : executors_) FG_RETURN_IF_ERROR(other->UseArena(base, bytes));
    arena_ = std::move(grown);
    arena_base_ = base;
    arena_capacity_ = bytes;
  }
  FG_RETURN_IF_ERROR(e->UseArena(arena_base_, arena_capacity_));
  for (int64_t l = 0; l < model_.config().n_layers; ++l) {
    FG_RETURN_IF_ERROR(e->BindState(model::KCacheName(l), k_[l].data(), k_[l].size()));
    FG_RETURN_IF_ERROR(e->BindState(model::VCacheName(l), v_[l].data(), v_[l].size()));
  }
  if (dump_) e->SetDump(dump_);
  exec::Executor* raw = e.get();
  executors_[key] = std::move(e);
  return raw;
}

Status Session::Append(std::span<const int32_t> tokens, const LogitsRequest& request) {
  if (tokens.empty()) return OkStatus();
  if (position_ + static_cast<int64_t>(tokens.size()) > options_.context) {
    return OutOfRangeError("session: " + std::to_string(position_) + " + " +
                           std::to_string(tokens.size()) + " tokens exceed the context of " +
                           std::to_string(options_.context));
  }
  const int64_t vocab = model_.config().vocab;
  for (int32_t t : tokens) {
    if (t < 0 || t >= vocab) {
      return OutOfRangeError("session: token id " + std::to_string(t) +
                             " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  if (request.kind == LogitsRequest::Kind::kFull) {
    int64_t last_chunk = 0;
    for (int64_t p = position_, left = static_cast<int64_t>(tokens.size()); left > 0;) {
      last_chunk = ChunkAt(p, left);
      p += last_chunk;
      left -= last_chunk;
    }
    if (request.count < 1 || request.count > last_chunk) {
      return InvalidArgumentError("session: logits of the last " + std::to_string(request.count) +
                                  " tokens asked, but the last chunk of this Append has " +
                                  std::to_string(last_chunk));
    }
  }
  if (request.kind == LogitsRequest::Kind::kRows) {
    for (int32_t r : request.rows) {
      if (r < 0 || r >= vocab) {
        return OutOfRangeError("session: logit row " + std::to_string(r) +
                               " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
      }
    }
  }
  // The runs below may overwrite what these point at.
  logits_ = {};
  hidden_ = {};
  row_logits_.clear();
  size_t done = 0;
  while (done < tokens.size()) {
    const int64_t n = ChunkAt(position_, static_cast<int64_t>(tokens.size() - done));
    const bool last = done + n == tokens.size();
    // Only the last chunk's last token can need logits; nobody reads the others'.
    const bool lm_head = last && request.kind == LogitsRequest::Kind::kFull;
    const int64_t head_rows = lm_head ? request.count : 0;
    const bool base = position_ < options_.lora_from && !model_.weights().loras.empty();
    FG_ASSIGN_OR_RETURN(exec::Executor * e, ExecutorFor(n, head_rows, base));
    pos_buf_.resize(n);
    for (int64_t i = 0; i < n; ++i) pos_buf_[i] = static_cast<int32_t>(position_ + i);
    // The rows whose final hidden state goes on: the last one, or the last `count`.
    logit_rows_.clear();
    for (int64_t i = n - std::max<int64_t>(1, head_rows); i < n; ++i) {
      logit_rows_.push_back(static_cast<int32_t>(i));
    }
    if (pin_ >= 0) SavePinnedRows(position_, n);
    FG_RETURN_IF_ERROR(e->SetInput("tokens", tokens.subspan(done, n)));
    FG_RETURN_IF_ERROR(e->SetInput("pos", std::span<const int32_t>(pos_buf_)));
    FG_RETURN_IF_ERROR(e->SetInput("logit_rows", std::span<const int32_t>(logit_rows_)));
    FG_RETURN_IF_ERROR(e->Run());
    position_ += n;
    done += n;
    if (!last) continue;
    // Views: the executor keeps its outputs until it runs again (it is never evicted while a
    // view points into it: the views are cleared above before any executor is made or run).
    if (lm_head) {
      FG_ASSIGN_OR_RETURN(logits_, e->OutputF32("result_output"));
      ++head_stats_.full;
    } else {
      FG_ASSIGN_OR_RETURN(hidden_, e->OutputF32("result_norm"));
      if (request.kind == LogitsRequest::Kind::kRows) {
        FG_RETURN_IF_ERROR(RowLogits(request.rows));
        ++head_stats_.sparse;
        head_stats_.sparse_rows += static_cast<int64_t>(request.rows.size());
      } else {
        ++head_stats_.none;
      }
    }
  }
  return OkStatus();
}

Status Session::RowLogits(std::span<const int32_t> rows) {
  const gguf::TensorInfo* head = model_.weights().output;
  kernels::WeightMatrix w;
  w.type = head->type;
  w.data = head->data;
  w.rows = head->shape[0];
  w.cols = head->shape[1];
  auto row_bytes = tensor::RowBytes(head->type, w.cols);
  if (!row_bytes || static_cast<int64_t>(hidden_.size()) != w.cols) {
    return InternalError("session: the LM head does not fit the hidden state");
  }
  w.row_bytes = static_cast<size_t>(*row_bytes);
  row_logits_.resize(rows.size());
  if (options_.reference) {
    // The reference matmul, one row at a time: the same numbers the reference head gives.
    for (size_t j = 0; j < rows.size(); ++j) {
      kernels::WeightMatrix one = w;
      one.data = w.row(rows[j]);
      one.rows = 1;
      kernels::MatMulReference(one, hidden_.data(), 1, &row_logits_[j], 1);
    }
  } else {
    kernels::MatVecRows(w, hidden_.data(), rows, row_logits_.data(), options_.pool);
  }
  return OkStatus();
}

Session::Snapshot Session::Save() const {
  Snapshot s;
  s.position = position_;
  s.logits.assign(logits_.begin(), logits_.end());
  s.k.resize(k_.size());
  s.v.resize(v_.size());
  for (size_t l = 0; l < k_.size(); ++l) {
    const std::span<const float> k = cached_k(static_cast<int64_t>(l));
    const std::span<const float> v = cached_v(static_cast<int64_t>(l));
    s.k[l].assign(k.begin(), k.end());
    s.v[l].assign(v.begin(), v.end());
  }
  return s;
}

// Global caches: rows 0..position-1; rings: all rows once wrapped.
std::span<const float> Session::cached_k(int64_t layer) const {
  const int64_t rows = std::min<int64_t>(position_, CacheRows(layer));
  return k_[layer].first(static_cast<size_t>(rows * model_.config().kv_dim()));
}

std::span<const float> Session::cached_v(int64_t layer) const {
  const int64_t rows = std::min<int64_t>(position_, CacheRows(layer));
  return v_[layer].first(static_cast<size_t>(rows * model_.config().kv_dim()));
}

Status Session::Restore(const Snapshot& s) {
  std::vector<std::span<const float>> k(s.k.begin(), s.k.end()), v(s.v.begin(), s.v.end());
  FG_RETURN_IF_ERROR(Restore(s.position, k, v));
  owned_logits_ = s.logits;
  logits_ = owned_logits_;
  return OkStatus();
}

Status Session::Restore(int64_t position, std::span<const std::span<const float>> k,
                        std::span<const std::span<const float>> v) {
  const int64_t kv = model_.config().kv_dim();
  if (k.size() != k_.size() || v.size() != v_.size() || position < 0 ||
      position > options_.context) {
    return InvalidArgumentError("session: snapshot does not fit this session");
  }
  for (size_t l = 0; l < k_.size(); ++l) {
    const int64_t rows = std::min<int64_t>(position, CacheRows(static_cast<int64_t>(l)));
    if (static_cast<int64_t>(k[l].size()) != rows * kv ||
        static_cast<int64_t>(v[l].size()) != rows * kv) {
      return InvalidArgumentError("session: snapshot layer " + std::to_string(l) +
                                  " has the wrong size");
    }
  }
  for (size_t l = 0; l < k_.size(); ++l) {
    std::copy(k[l].begin(), k[l].end(), k_[l].begin());
    std::copy(v[l].begin(), v[l].end(), v_[l].begin());
  }
  Unpin();
  position_ = position;
  owned_logits_.clear();
  logits_ = {};
  hidden_ = {};
  row_logits_.clear();
  return OkStatus();
}

void Session::Reset() {
  Unpin();
  position_ = 0;
  logits_ = {};
  hidden_ = {};
  row_logits_.clear();
}

Status Session::Truncate(int64_t position) {
  if (position < 0 || position > position_) {
    return InvalidArgumentError("session: cannot truncate to " + std::to_string(position) +
                                " (position is " + std::to_string(position_) + ")");
  }
  if (position == pin_) {
    // Every ring row of a position in [PinLow(), pin_) that a run after the pin overwrote was
    // copied aside first (SavePinnedRows), so putting those back makes the ring hold exactly
    // what it held at the pin for every position a query at pin_ or later reads; rows of other
    // positions are never read again before being rewritten. Global layers keep position p at
    // row p, which only a run at p writes, so rows below pin_ are untouched.
    const int64_t kv = model_.config().kv_dim();
    const int64_t low = PinLow();
    for (size_t l = 0; l < k_.size(); ++l) {
      if (model_.config().IsGlobal(static_cast<int64_t>(l))) continue;
      for (int64_t q = low; q < pin_saved_; ++q) {
        const size_t src = static_cast<size_t>((q - low) * kv);
        const size_t dst = static_cast<size_t>((q % local_rows_) * kv);
        std::memcpy(&k_[l][dst], &pin_k_[l][src], kv * sizeof(float));
        std::memcpy(&v_[l][dst], &pin_v_[l][src], kv * sizeof(float));
      }
      pin_k_[l].clear();
      pin_v_[l].clear();
    }
    pin_saved_ = low;
  } else {
    // A sliding layer keeps position p at ring row p % local_rows_; the next query (at
    // `position`) reads keys from position - window + 1 on. The oldest of them is intact iff no
    // later position written so far (< position_) landed on its row.
    const int64_t window = model_.config().sliding_window;
    const int64_t oldest = std::max<int64_t>(0, position - window + 1);
    if (position > 0 && position < position_ && oldest + local_rows_ < position_) {
      return FailedPreconditionError("session: cannot rewind from " + std::to_string(position_) +
                                     " to " + std::to_string(position) +
                                     ": the sliding-window cache has moved on");
    }
    if (position < pin_) Unpin();
  }
  position_ = position;
  logits_ = {};
  hidden_ = {};
  row_logits_.clear();
  return OkStatus();
}

int64_t Session::PinLow() const {
  return std::max<int64_t>(0, pin_ - model_.config().sliding_window + 1);
}

void Session::Pin() {
  Unpin();
  pin_ = position_;
  pin_saved_ = PinLow();
}

void Session::Unpin() {
  pin_ = -1;
  pin_saved_ = 0;
  for (auto& p : pin_k_) std::vector<float>().swap(p);
  for (auto& p : pin_v_) std::vector<float>().swap(p);
}

void Session::SavePinnedRows(int64_t start, int64_t n) {
  // Writing position p overwrites ring row p % local_rows_, which held p - local_rows_. Every
  // position from pin_ to position_ was written through here since the pin (Restore drops it),
  // so the rows of [PinLow(), pin_saved_) were saved before their first overwrite and those of
  // [pin_saved_, pin_) still hold their pinned positions: the first of them that this run
  // reaches is pin_saved_ itself.
  const int64_t from = std::max(pin_saved_, start - local_rows_);
  const int64_t to = std::min(pin_, start + n - local_rows_);
  if (to <= from) return;
  const int64_t kv = model_.config().kv_dim();
  const int64_t low = PinLow();
  for (size_t l = 0; l < k_.size(); ++l) {
    if (model_.config().IsGlobal(static_cast<int64_t>(l))) continue;
    pin_k_[l].resize(static_cast<size_t>((to - low) * kv));
    pin_v_[l].resize(static_cast<size_t>((to - low) * kv));
    for (int64_t q = from; q < to; ++q) {
      const size_t src = static_cast<size_t>((q % local_rows_) * kv);
      const size_t dst = static_cast<size_t>((q - low) * kv);
      std::memcpy(&pin_k_[l][dst], &k_[l][src], kv * sizeof(float));
      std::memcpy(&pin_v_[l][dst], &v_[l][src], kv * sizeof(float));
    }
  }
  pin_saved_ = to;
}

void Session::SetDump(exec::DumpFn fn) {
  dump_ = std::move(fn);
  for (auto& [n, e] : executors_) e->SetDump(dump_);
}

size_t Session::cache_bytes() const {
  size_t b = 0;
  for (size_t l = 0; l < k_.size(); ++l) {
    b += (k_[l].size() + v_[l].size() + pin_k_[l].size() + pin_v_[l].size()) * sizeof(float);
  }
  return b;
}

size_t Session::scratch_bytes() const {
  return arena_capacity_;
}

}  // namespace fg::runtime
