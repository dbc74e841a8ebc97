#include "src/runtime/step_batcher.h"

#include <algorithm>
#include <string>
#include <utility>

#include "src/model/gemma3/forward.h"

namespace fg::runtime {

namespace {

using Clock = std::chrono::steady_clock;

// The graph a batch needs: the cache geometry, then (tokens, head rows) per sequence in order.
std::vector<int64_t> ExecutorKey(std::span<StepBatcher::Item* const> batch) {
  std::vector<int64_t> key = {batch[0]->cache->context(), batch[0]->cache->local_rows()};
  for (const StepBatcher::Item* it : batch) {
    key.push_back(static_cast<int64_t>(it->tokens.size()));
    key.push_back(it->head_rows);
  }
  return key;
}

bool SameGeometry(const StepBatcher::Item& a, const StepBatcher::Item& b) {
  return a.cache->context() == b.cache->context() &&
         a.cache->local_rows() == b.cache->local_rows();
}

}  // namespace

StatusOr<std::unique_ptr<StepBatcher>> StepBatcher::Create(const Model& model, Options options) {
  if (options.max_tokens < 1) return InvalidArgumentError("batcher: max_tokens must be >= 1");
  if (options.wait.count() < 0) return InvalidArgumentError("batcher: wait must be >= 0");
  std::unique_ptr<StepBatcher> b(new StepBatcher(model, options));
  b->free_since_ = Clock::now();
  return b;
}

StepBatcher::~StepBatcher() = default;

void StepBatcher::Enter() {
  std::lock_guard<std::mutex> l(mu_);
  ++participants_;
}

void StepBatcher::Exit() {
  std::lock_guard<std::mutex> l(mu_);
  --participants_;
  cv_.notify_all();  // the others may be all there is now
}

StepBatcher::Stats StepBatcher::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

Status StepBatcher::Run(Item* item) {
  if (item->tokens.empty() || item->cache == nullptr ||
      item->cache->layers() != model_.config().n_layers || item->head_rows < 0 ||
      item->head_rows > static_cast<int64_t>(item->tokens.size()) ||
      (item->head_rows > 0 && item->logits == nullptr) ||
      (item->head_rows == 0 && item->hidden == nullptr)) {
    return InvalidArgumentError("batcher: malformed chunk");
  }
  item->done = false;
  item->arrived = Clock::now();
  std::unique_lock<std::mutex> l(mu_);
  pending_.push_back(item);
  cv_.notify_all();
  while (!item->done) {
    if (running_ || pending_.empty()) {
      cv_.wait(l);
      continue;
    }
    // Wait for every participant, but not longer than `wait` from when the oldest chunk came
    // or the last batch ended (so the chunks that came while a batch ran wait for the ones it
    // answered to come back, instead of running as a half batch).
    const Clock::time_point deadline =
        std::max(pending_.front()->arrived, free_since_) + options_.wait;
    const bool everyone = static_cast<int>(pending_.size()) >= participants_;
    if (!everyone && Clock::now() < deadline) {
      cv_.wait_until(l, deadline);
      continue;
    }
    // Take the oldest chunk and the others of its cache geometry, up to max_tokens.
    std::vector<Item*> batch;
    int64_t tokens = 0;
    size_t kept = 0;
    for (size_t i = 0; i < pending_.size(); ++i) {
      Item* it = pending_[i];
      const int64_t n = static_cast<int64_t>(it->tokens.size());
      if (batch.empty() ||
          (SameGeometry(*batch[0], *it) && tokens + n <= options_.max_tokens)) {
        batch.push_back(it);
        tokens += n;
      } else {
        pending_[kept++] = it;
      }
    }
    pending_.resize(kept);
    running_ = true;
    l.unlock();
    const Clock::time_point start = Clock::now();
    const Status s = RunBatch(batch);
    const Clock::time_point end = Clock::now();
    l.lock();
    stats_.run_seconds += std::chrono::duration<double>(end - start).count();
    for (Item* it : batch) {
      it->status = s;
      it->done = true;
    }
    ++stats_.steps;
    stats_.sequences += static_cast<int64_t>(batch.size());
    stats_.max_sequences = std::max<int64_t>(stats_.max_sequences,
                                             static_cast<int64_t>(batch.size()));
    stats_.graphs = graphs_built_;
    running_ = false;
    free_since_ = end;
    cv_.notify_all();
  }
  return item->status;
}

StatusOr<exec::Executor*> StepBatcher::ExecutorFor(std::span<Item* const> batch) {
  std::vector<int64_t> key = ExecutorKey(batch);
  ++clock_;
  auto it = executors_.find(key);
  if (it != executors_.end()) {
    it->second.used = clock_;
    return it->second.executor.get();
  }
  // A few dozen graphs (each a plan over the shared arena: kilobytes); the least recently
  // used goes first.
  if (executors_.size() >= 64) {
    auto oldest = executors_.begin();
    for (auto e = executors_.begin(); e != executors_.end(); ++e) {
      if (e->second.used < oldest->second.used) oldest = e;
    }
    executors_.erase(oldest);
  }
  model::BatchForwardSpec spec;
  spec.global_cache_rows = batch[0]->cache->context();
  spec.local_cache_rows = batch[0]->cache->local_rows();
  for (const Item* b : batch) {
    spec.sequences.push_back({static_cast<int64_t>(b->tokens.size()), b->head_rows});
  }
  FG_ASSIGN_OR_RETURN(graph::Graph g,
                      model::BuildBatchedForward(model_.config(), model_.weights(), spec));
  exec::ExecOptions eo;
  eo.external_arena = true;
  FG_ASSIGN_OR_RETURN(std::unique_ptr<exec::Executor> e,
                      exec::Executor::Create(std::move(g), model_.resolver(), options_.pool, eo));
  std::vector<exec::Executor*> all;
  for (auto& [k, other] : executors_) all.push_back(other.executor.get());
  FG_RETURN_IF_ERROR(arena_.Fit(*e, all));
  ++graphs_built_;
  exec::Executor* raw = e.get();
  executors_[key] = {std::move(e), clock_};
  return raw;
}

Status StepBatcher::RunBatch(std::span<Item* const> in) {
  // Sequences in a canonical order (by shape), so that batches of the same shapes share a
  // graph; the order changes no row's numbers.
  std::vector<Item*> batch(in.begin(), in.end());
  std::stable_sort(batch.begin(), batch.end(), [](const Item* a, const Item* b) {
    return std::make_pair(a->tokens.size(), a->head_rows) <
           std::make_pair(b->tokens.size(), b->head_rows);
  });
  FG_ASSIGN_OR_RETURN(exec::Executor * e, ExecutorFor(batch));
  tokens_.clear();
  pos_.clear();
  logit_rows_.clear();
  full_rows_.clear();
  const int64_t layers = model_.config().n_layers;
  while (state_names_.size() < batch.size()) {
    const auto i = static_cast<int64_t>(state_names_.size());
    auto& names = state_names_.emplace_back();
    for (int64_t l = 0; l < layers; ++l) {
      names.emplace_back(model::BatchKCacheName(l, i), model::BatchVCacheName(l, i));
    }
  }
  int64_t at = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const Item& it = *batch[i];
    const int64_t n = static_cast<int64_t>(it.tokens.size());
    tokens_.insert(tokens_.end(), it.tokens.begin(), it.tokens.end());
    for (int64_t p = it.position; p < it.position + n; ++p) {
      pos_.push_back(static_cast<int32_t>(p));
    }
    for (int64_t r = n - std::max<int64_t>(1, it.head_rows); r < n; ++r) {
      if (it.head_rows > 0) full_rows_.push_back(static_cast<int32_t>(logit_rows_.size()));
      logit_rows_.push_back(static_cast<int32_t>(at + r));
    }
    for (int64_t l = 0; l < layers; ++l) {
      const auto& [k_name, v_name] = state_names_[i][static_cast<size_t>(l)];
      const std::span<float> k = it.cache->k(l), v = it.cache->v(l);
      FG_RETURN_IF_ERROR(e->BindState(k_name, k.data(), k.size()));
      FG_RETURN_IF_ERROR(e->BindState(v_name, v.data(), v.size()));
    }
    at += n;
  }
  FG_RETURN_IF_ERROR(e->SetInput("tokens", std::span<const int32_t>(tokens_)));
  FG_RETURN_IF_ERROR(e->SetInput("pos", std::span<const int32_t>(pos_)));
  FG_RETURN_IF_ERROR(e->SetInput("logit_rows", std::span<const int32_t>(logit_rows_)));
  if (!full_rows_.empty()) {
    FG_RETURN_IF_ERROR(e->SetInput("full_rows", std::span<const int32_t>(full_rows_)));
  }
  FG_RETURN_IF_ERROR(e->Run());
  FG_ASSIGN_OR_RETURN(std::span<const float> norm, e->OutputF32("result_norm"));
  std::span<const float> logits;
  if (!full_rows_.empty()) {
    FG_ASSIGN_OR_RETURN(logits, e->OutputF32("result_output"));
  }
  const int64_t hidden = model_.config().hidden;
  const int64_t vocab = model_.config().vocab;
  int64_t row = 0, full = 0;
  for (Item* it : batch) {
    const int64_t rows = std::max<int64_t>(1, it->head_rows);
    if (it->hidden != nullptr) {
      const float* last = norm.data() + (row + rows - 1) * hidden;
      it->hidden->assign(last, last + hidden);
    }
    if (it->head_rows > 0) {
      const float* first = logits.data() + full * vocab;
      it->logits->assign(first, first + it->head_rows * vocab);
      full += it->head_rows;
    }
    row += rows;
  }
  return OkStatus();
}

}  // namespace fg::runtime
