#include "src/runtime/session.h"

#include <algorithm>
#include <new>

#include "src/kernels/matmul.h"
#include "src/model/gemma3/forward.h"
#include "src/runtime/step_batcher.h"
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
  if (options.batcher != nullptr && &options.batcher->model() != &model) {
    return InvalidArgumentError("session: the batcher runs another model");
  }
  std::unique_ptr<Session> s(new Session(model, options));
  FG_ASSIGN_OR_RETURN(s->cache_, KvCache::Create(c, model::LocalCacheRows(c, options.max_chunk,
                                                                          options.context),
                                                  options.context));
  return s;
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
  spec.n_logit_rows = head_rows > 0 ? head_rows : std::max<int64_t>(1, -head_rows);
  spec.lm_head = head_rows > 0;
  spec.global_cache_rows = options_.context;
  spec.local_cache_rows = cache_.local_rows();
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
  // Every executor shares one arena (none holds results anyone reads while a new one is made:
  // Append clears its views before making or running an executor).
  std::vector<exec::Executor*> all;
  for (auto& [k, other] : executors_) all.push_back(other.get());
  FG_RETURN_IF_ERROR(arena_.Fit(*e, all));
  for (int64_t l = 0; l < model_.config().n_layers; ++l) {
    FG_RETURN_IF_ERROR(
        e->BindState(model::KCacheName(l), cache_.k(l).data(), cache_.k(l).size()));
    FG_RETURN_IF_ERROR(
        e->BindState(model::VCacheName(l), cache_.v(l).data(), cache_.v(l).size()));
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
  if (request.kind == LogitsRequest::Kind::kFull || request.kind == LogitsRequest::Kind::kHidden) {
    int64_t last_chunk = 0;
    for (int64_t p = position_, left = static_cast<int64_t>(tokens.size()); left > 0;) {
      last_chunk = ChunkAt(p, left);
      p += last_chunk;
      left -= last_chunk;
    }
    if (request.count < 1 || request.count > last_chunk) {
      return InvalidArgumentError(
          std::string("session: ") +
          (request.kind == LogitsRequest::Kind::kFull ? "logits" : "hidden states") +
          " of the last " + std::to_string(request.count) +
          " tokens asked, but the last chunk of this Append has " + std::to_string(last_chunk));
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
    // > 0: logits of the last head_rows tokens; <= 0: the final-norm hidden states of the last
    // max(1, -head_rows) (ExecutorFor, RunAlone).
    const int64_t head_rows = lm_head ? request.count
                              : last && request.kind == LogitsRequest::Kind::kHidden
                                  ? -request.count
                                  : 0;
    const bool base = position_ < options_.lora_from && !model_.weights().loras.empty();
    const std::span<const int32_t> chunk = tokens.subspan(done, n);
    cache_.BeforeWrite(position_, n);
    // The chunk's result: the logits of its last head_rows tokens, else its last hidden
    // state(s). (The batcher gives only the last token's: several run alone.)
    std::span<const float> out;
    if (options_.batcher != nullptr && !base && !options_.reference && !dump_ && head_rows >= -1) {
      FG_RETURN_IF_ERROR(RunBatched(chunk, std::max<int64_t>(0, head_rows)));
      out = head_rows > 0 ? std::span<const float>(owned_logits_) : owned_hidden_;
    } else {
      FG_ASSIGN_OR_RETURN(out, RunAlone(chunk, head_rows, base));
    }
    position_ += n;
    done += n;
    if (!last) continue;
    if (lm_head) {
      logits_ = out;
      ++head_stats_.full;
    } else {
      hidden_ = out;
      FG_RETURN_IF_ERROR(CountHead(request));
    }
  }
  return OkStatus();
}

Status Session::CountHead(const LogitsRequest& request) {
  if (request.kind == LogitsRequest::Kind::kRows) {
    FG_RETURN_IF_ERROR(RowLogits(request.rows));
    ++head_stats_.sparse;
    head_stats_.sparse_rows += static_cast<int64_t>(request.rows.size());
  } else {
    ++head_stats_.none;
  }
  return OkStatus();
}

StatusOr<std::span<const float>> Session::RunAlone(std::span<const int32_t> chunk,
                                                  int64_t head_rows, bool base) {
  const auto n = static_cast<int64_t>(chunk.size());
  FG_ASSIGN_OR_RETURN(exec::Executor * e, ExecutorFor(n, head_rows, base));
  pos_buf_.resize(n);
  for (int64_t i = 0; i < n; ++i) pos_buf_[i] = static_cast<int32_t>(position_ + i);
  // The rows whose final hidden state goes on: the last one, or the last `count`.
  logit_rows_.clear();
  const int64_t rows = head_rows > 0 ? head_rows : std::max<int64_t>(1, -head_rows);
  for (int64_t i = n - rows; i < n; ++i) {
    logit_rows_.push_back(static_cast<int32_t>(i));
  }
  FG_RETURN_IF_ERROR(e->SetInput("tokens", chunk));
  FG_RETURN_IF_ERROR(e->SetInput("pos", std::span<const int32_t>(pos_buf_)));
  FG_RETURN_IF_ERROR(e->SetInput("logit_rows", std::span<const int32_t>(logit_rows_)));
  FG_RETURN_IF_ERROR(e->Run());
  // A view: the executor keeps its outputs until it runs again (it is never evicted while a
  // view points into it: Append clears its views before any executor is made or run).
  return e->OutputF32(head_rows > 0 ? "result_output" : "result_norm");
}

Status Session::RunBatched(std::span<const int32_t> chunk, int64_t head_rows) {
  StepBatcher::Item item;
  item.tokens = chunk;
  item.position = position_;
  item.cache = &cache_;
  item.head_rows = head_rows;
  item.logits = &owned_logits_;
  item.hidden = &owned_hidden_;
  return options_.batcher->Run(&item);
}

Status Session::RowLogits(std::span<const int32_t> rows) {
  const StatusOr<kernels::WeightMatrix> head = WeightMatrixOf(*model_.weights().output);
  if (!head.ok() || static_cast<int64_t>(hidden_.size()) != head->cols) {
    return InternalError("session: the LM head does not fit the hidden state");
  }
  const kernels::WeightMatrix& w = *head;
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
  s.k.resize(static_cast<size_t>(cache_.layers()));
  s.v.resize(static_cast<size_t>(cache_.layers()));
  for (size_t l = 0; l < s.k.size(); ++l) {
    const std::span<const float> k = cached_k(static_cast<int64_t>(l));
    const std::span<const float> v = cached_v(static_cast<int64_t>(l));
    s.k[l].assign(k.begin(), k.end());
    s.v[l].assign(v.begin(), v.end());
  }
  return s;
}

// Global caches: rows 0..position-1; rings: all rows once wrapped.
std::span<const float> Session::cached_k(int64_t layer) const {
  return cache_.filled_k(layer, position_);
}

std::span<const float> Session::cached_v(int64_t layer) const {
  return cache_.filled_v(layer, position_);
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
  const size_t layers = static_cast<size_t>(cache_.layers());
  if (k.size() != layers || v.size() != layers || position < 0 ||
      position > options_.context) {
    return InvalidArgumentError("session: snapshot does not fit this session");
  }
  for (size_t l = 0; l < layers; ++l) {
    const int64_t rows = std::min<int64_t>(position, cache_.rows(static_cast<int64_t>(l)));
    if (static_cast<int64_t>(k[l].size()) != rows * kv ||
        static_cast<int64_t>(v[l].size()) != rows * kv) {
      return InvalidArgumentError("session: snapshot layer " + std::to_string(l) +
                                  " has the wrong size");
    }
  }
  for (size_t l = 0; l < layers; ++l) {
    std::copy(k[l].begin(), k[l].end(), cache_.k(static_cast<int64_t>(l)).begin());
    std::copy(v[l].begin(), v[l].end(), cache_.v(static_cast<int64_t>(l)).begin());
  }
  cache_.Unpin();
  position_ = position;
  owned_logits_.clear();
  logits_ = {};
  hidden_ = {};
  row_logits_.clear();
  return OkStatus();
}

void Session::Reset() {
  cache_.Unpin();
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
  if (position == cache_.pinned()) {
    cache_.RewindToPin();
  } else {
    if (!cache_.CanRewind(position_, position)) {
      return FailedPreconditionError("session: cannot rewind from " + std::to_string(position_) +
                                     " to " + std::to_string(position) +
                                     ": the sliding-window cache has moved on");
    }
    if (position < cache_.pinned()) cache_.Unpin();
  }
  position_ = position;
  logits_ = {};
  hidden_ = {};
  row_logits_.clear();
  return OkStatus();
}

void Session::Pin() { cache_.Pin(position_); }

Status Session::SetBatcher(StepBatcher* batcher) {
  if (batcher != nullptr && &batcher->model() != &model_) {
    return InvalidArgumentError("session: the batcher runs another model");
  }
  options_.batcher = batcher;
  return OkStatus();
}

void Session::SetDump(exec::DumpFn fn) {
  dump_ = std::move(fn);
  for (auto& [n, e] : executors_) e->SetDump(dump_);
}

size_t Session::cache_bytes() const { return cache_.bytes(); }

size_t Session::scratch_bytes() const { return arena_.capacity(); }

}  // namespace fg::runtime
