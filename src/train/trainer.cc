#include "src/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <new>
#include <set>
#include <span>
#include <tuple>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "src/base/thread_pool.h"
#include "src/exec/executor.h"
#include "src/gguf/reader.h"
#include "src/gguf/writer.h"
#include "src/model/gemma3/forward.h"
#include "src/graph/graph.h"
#include "src/text/call_grammar.h"
#include "src/base/splitmix.h"
#include "src/train/prefix_store.h"
#include "src/train/train_graph.h"

namespace fg::train {

namespace {

int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// An example's trained tokens are padded to a multiple of this (executors are cached per
// shape): for evenly spread lengths that is (8 - 1) / 2 = 3.5 padding tokens an example on
// average, against ~32 trained ones in the corpus; 16 would be 7.5.
constexpr int64_t kTokenRound = 8;

constexpr const char* kCheckpointType = "fgemma-tune-checkpoint";

}  // namespace

const char* PrefixModeName(PrefixMode m) { return m == PrefixMode::kBase ? "base" : "adapted"; }

struct Trainer::Impl {
  const runtime::Model* model = nullptr;
  TuneOptions opt;
  std::vector<call::TrainingTokens> data;
  std::vector<std::string> keys;  // catalog_key of each example
  std::vector<bool> is_channel;   // per example: a tool prior example (call::ChannelExamples)
  std::string given_arguments;    // call::GivenArguments of the examples ("": none to record)
  // Per example: the data indices of its contrast (channel_negatives), rendered after the
  // examples; with them its loss is -log softmax of the channel scores (RunGroup).
  std::vector<std::vector<int>> negatives;
  std::vector<std::vector<std::vector<float>>> member_grad;  // RunGroup's, one per member
  // Per example: the indices i whose row predicts a trained target token i + 1, and per such
  // row the tokens its softmax covers (empty: the whole vocabulary).
  std::vector<std::vector<int32_t>> loss_rows;
  std::vector<std::vector<std::vector<int32_t>>> candidates;
  // Per example, with LeaveOutLoss::kAnchor (else empty: every row its own token, weight 1): per
  // row its target (the index in its candidates; -1: the example's own next token) and its weight.
  // An anchored position runs one candidate row per token the grammar allows there, weighted by the
  // starting adapter's probability of that token (anchors: the first row and the count).
  std::vector<std::vector<int32_t>> row_target;
  std::vector<std::vector<float>> row_weight;
  std::vector<std::vector<std::pair<size_t, size_t>>> anchors;
  int64_t cached_prefix = -1;     // the example whose prefix K/V the caches hold (kBase)
  std::unique_ptr<PrefixStore> store;  // every prefix computed (kBase), when on
  int64_t prefixes_computed = 0, prefixes_read = 0;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<LoraParams> params;
  model::Weights lora_weights, base_weights;
  std::unique_ptr<TransposedWeights> transposed;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, std::unique_ptr<exec::Executor>>
      train_exec;
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<exec::Executor>> prefix_exec;
  std::unique_ptr<uint8_t[]> arena;
  size_t arena_bytes = 0;
  uint8_t* arena_base = nullptr;
  std::vector<std::vector<float>> kcache, vcache;  // per layer, max_rows * KV * D
  int64_t max_rows = 0;
  std::vector<std::vector<int>> batches;  // example indices, every step of every epoch
  std::vector<int64_t> batch_epoch;       // the epoch of each step
  std::vector<std::vector<float>> grad, m, v;
  int64_t step = 0;
  // Validation: the best epoch's adapter values and score, the epochs so far.
  double best_score = -1;
  int64_t best_epoch = -1;
  std::vector<std::vector<float>> best;
  std::vector<EpochResult> epochs;
  // FGEMMA_TUNE_PROFILE=1: seconds per op kind (the time between the executor's per-node dump
  // callbacks), printed to stderr when the trainer goes away; =2: matmuls also by weight name.
  bool profile = std::getenv("FGEMMA_TUNE_PROFILE") != nullptr;
  bool detail = profile && std::string_view(std::getenv("FGEMMA_TUNE_PROFILE")) == "2";
  std::map<std::string, double> op_seconds;
  std::chrono::steady_clock::time_point last_node;
  void Profile(exec::Executor& e) {
    if (!profile) return;
    const graph::Graph* g = &e.graph();
    e.SetDump([this, g](std::string_view name, const std::vector<int64_t>&, std::span<const float>) {
      const auto now = std::chrono::steady_clock::now();
      const int id = g->Find(name);
      const std::string op = id >= 0 ? std::string(graph::OpName(g->nodes()[g->value(id).producer].op)) : "?";
      std::string key = op;
      if (detail && op == "matmul") {  // FGEMMA_TUNE_PROFILE=2: matmuls by name, layers merged
        key += " ";
        for (char ch : name) key += std::isdigit(static_cast<unsigned char>(ch)) ? '#' : ch;
      }
      op_seconds[(g->Find("loss") >= 0 ? "train " : "prefix ") + key] +=
          std::chrono::duration<double>(now - last_node).count();
      last_node = now;
    });
  }
  ~Impl() {
    for (const auto& [op, sec] : op_seconds) std::fprintf(stderr, "profile: %-28s %8.3f s\n", op.c_str(), sec);
  }
  double epoch_loss_sum = 0;
  int64_t epoch_targets = 0;

  int64_t Start(const call::TrainingTokens& t) const {
    return opt.prefix == PrefixMode::kBase ? t.prefix_len : 0;
  }
  int64_t Trained(const call::TrainingTokens& t) const {
    return static_cast<int64_t>(t.tokens.size()) - Start(t);
  }
  // The positions an example's loss is averaged over (an anchored position's rows count once).
  int64_t Targets(int index) const {
    int64_t n = static_cast<int64_t>(loss_rows[index].size());
    for (const auto& [first, count] : anchors[index]) n -= static_cast<int64_t>(count) - 1;
    return n;
  }
  // An example's trained tokens with its contrast's.
  int64_t GroupTrained(int index) const {
    int64_t n = Trained(data[index]);
    if (static_cast<size_t>(index) < negatives.size()) {
      for (int j : negatives[index]) n += Trained(data[j]);
    }
    return n;
  }

  Status EnsureArena(size_t bytes) {
    if (bytes <= arena_bytes) return OkStatus();
    arena.reset(new (std::nothrow) uint8_t[bytes + 64]);
    if (!arena) return ResourceExhaustedError("tune: cannot allocate " + std::to_string(bytes) + " bytes of activations");
    arena_bytes = bytes;
    arena_base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(arena.get()) + 63) / 64 * 64);
    return OkStatus();
  }

  Status BindCaches(exec::Executor& e, int64_t rows) {
    const model::Config& c = model->config();
    const size_t n = static_cast<size_t>(rows * c.n_kv_heads * c.head_dim);
    for (int64_t l = 0; l < c.n_layers; ++l) {
      FG_RETURN_IF_ERROR(e.BindState(model::KCacheName(l), kcache[l].data(), n));
      FG_RETURN_IF_ERROR(e.BindState(model::VCacheName(l), vcache[l].data(), n));
    }
    return OkStatus();
  }

  // S trained tokens, R whole-vocabulary rows, Rc candidate rows, C cache rows.
  StatusOr<exec::Executor*> TrainExec(int64_t S, int64_t R, int64_t Rc, int64_t C) {
    auto key = std::make_tuple(S, R, Rc, C);
    if (auto it = train_exec.find(key); it != train_exec.end()) return it->second.get();
    TrainGraphSpec spec;
    spec.n_tokens = S;
    spec.n_target_rows = R;
    spec.n_candidate_rows = Rc;
    spec.n_candidates = kMaxCandidates;
    spec.global_cache_rows = C;
    spec.local_cache_rows = C;
    spec.transposed_type = opt.transposed_type;
    spec.head_threshold = opt.head_grad_threshold;
    spec.head_max_tokens = opt.head_grad_max_tokens;
    FG_ASSIGN_OR_RETURN(graph::Graph g, BuildTrainGraph(model->config(), lora_weights, spec));
    if (!transposed) {
      // Made once, from a graph with a whole-vocabulary row: it holds every transpose any
      // step's graph uses (the LM head's too, which a graph of candidate rows only lacks).
      graph::Graph full;
      if (R == 0) {
        TrainGraphSpec fs = spec;
        fs.n_target_rows = 1;
        FG_ASSIGN_OR_RETURN(full, BuildTrainGraph(model->config(), lora_weights, fs));
      }
      FG_ASSIGN_OR_RETURN(transposed, TransposedWeights::Make(R == 0 ? full : g, model->resolver(),
                                                              opt.transposed_type));
    }
    exec::ExecOptions eo;
    eo.external_arena = true;
    FG_ASSIGN_OR_RETURN(auto e, exec::Executor::Create(std::move(g),
                                                       params->Resolver(transposed->Resolver(model->resolver())),
                                                       pool.get(), eo));
    FG_RETURN_IF_ERROR(EnsureArena(e->arena_bytes()));
    Profile(*e);
    return (train_exec[key] = std::move(e)).get();
  }

  StatusOr<exec::Executor*> PrefixExec(int64_t P, int64_t C) {
    auto key = std::make_pair(P, C);
    if (auto it = prefix_exec.find(key); it != prefix_exec.end()) return it->second.get();
    model::ForwardSpec fs;
    fs.n_tokens = P;
    fs.n_logit_rows = 0;
    fs.global_cache_rows = C;
    fs.local_cache_rows = C;
    FG_ASSIGN_OR_RETURN(graph::Graph g, model::BuildForward(model->config(), base_weights, fs));
    exec::ExecOptions eo;
    eo.external_arena = true;
    FG_ASSIGN_OR_RETURN(auto e, exec::Executor::Create(std::move(g), model->resolver(), pool.get(), eo));
    FG_RETURN_IF_ERROR(EnsureArena(e->arena_bytes()));
    Profile(*e);
    return (prefix_exec[key] = std::move(e)).get();
  }

  float RowWeight(int index, size_t row) const {
    return row_weight[index].empty() ? 1.0f : row_weight[index][row];
  }
  int32_t RowTarget(int index, size_t row) const {
    return row_target[index].empty() ? -1 : row_target[index][row];
  }

  // LeaveOutLoss::kAnchor: each anchored position's row weights become the current adapter's
  // (the starting one's) probabilities of the tokens its rows target, over those tokens.
  Status ComputeAnchors() {
    std::vector<std::vector<float>> scratch(grad.size());
    for (size_t i = 0; i < grad.size(); ++i) scratch[i].assign(grad[i].size(), 0.0f);
    std::vector<float> row_loss;
    for (size_t index = 0; index < anchors.size(); ++index) {
      if (anchors[index].empty()) continue;
      FG_RETURN_IF_ERROR(RunExample(static_cast<int>(index), 0.0f, &scratch, &row_loss).status());
      for (const auto& [first, count] : anchors[index]) {
        double z = 0;
        for (size_t r = first; r < first + count; ++r)
          z += std::exp(-static_cast<double>(row_loss[r]));
        if (!(z > 0) || !std::isfinite(z)) {
          return InternalError(
              "tune: the starting adapter's distribution at an anchored token is not finite");
        }
        for (size_t r = first; r < first + count; ++r) {
          row_weight[index][r] =
              static_cast<float>(std::exp(-static_cast<double>(row_loss[r])) / z);
        }
      }
    }
    return OkStatus();
  }

  int64_t Rows(const call::TrainingTokens& t) const {
    const int64_t start = Start(t);
    const int64_t S = RoundUp(Trained(t), kTokenRound);
    const int64_t P = start > 0 ? RoundUp(start, 64) : 0;
    return RoundUp(std::max(start + S, P), 128);
  }

  // Runs one example: adds its gradient (weighted) into `into` (nullptr: `grad`); returns its
  // loss summed over its positions (unweighted by `weight`; an anchored position's rows by their
  // row weights: the cross-entropy against the starting adapter's distribution). `row_loss`:
  // each row's own -log p(target), in loss_rows order.
  StatusOr<double> RunExample(int index, float weight,
                              std::vector<std::vector<float>>* into = nullptr,
                              std::vector<float>* row_loss = nullptr) {
    const call::TrainingTokens& t = data[index];
    const int64_t n = static_cast<int64_t>(t.tokens.size());
    const int64_t start = Start(t);
    const int64_t C = Rows(t);
    // The caches keep rows below the prefix's end across examples (rows are positions: no
    // ring wraps at C rows), so the same prefix is not computed again.
    const bool same = cached_prefix >= 0 && keys[cached_prefix] == keys[index] &&
                      data[cached_prefix].prefix_len == t.prefix_len;
    const model::Config& mc = model->config();
    const int64_t row_floats = mc.n_kv_heads * mc.head_dim;
    bool read = false;
    if (start > 0 && !same && store) {
      // Rows 0 .. start-1 as computed before; the rows after are the example's own.
      FG_ASSIGN_OR_RETURN(read, store->Get(keys[index], start, row_floats, kcache, vcache));
      if (read) {
        cached_prefix = index;
        ++prefixes_read;
      }
    }
    if (start > 0 && !same && !read) {
      cached_prefix = index;
      ++prefixes_computed;
      const int64_t P = RoundUp(start, 64);
      FG_ASSIGN_OR_RETURN(exec::Executor * pe, PrefixExec(P, C));
      FG_RETURN_IF_ERROR(pe->UseArena(arena_base, arena_bytes));
      std::vector<int32_t> tok(P, 0), pos(P);
      for (int64_t i = 0; i < P; ++i) pos[i] = static_cast<int32_t>(i);
      std::copy(t.tokens.begin(), t.tokens.begin() + start, tok.begin());
      FG_RETURN_IF_ERROR(pe->SetInput("tokens", tok));
      FG_RETURN_IF_ERROR(pe->SetInput("pos", pos));
      FG_RETURN_IF_ERROR(BindCaches(*pe, C));
      last_node = std::chrono::steady_clock::now();
      FG_RETURN_IF_ERROR(pe->Run());
      if (store) store->Put(keys[index], start, row_floats, kcache, vcache);
    }
    const int64_t S = RoundUp(n - start, kTokenRound);
    // The whole-vocabulary rows and the candidate rows, each padded to a multiple of 8 (a
    // padding row has no target: no loss, no gradient).
    std::vector<int64_t> full, cand;
    for (size_t r = 0; r < loss_rows[index].size(); ++r) {
      (candidates[index][r].empty() ? full : cand).push_back(static_cast<int64_t>(r));
    }
    const int64_t R = RoundUp(static_cast<int64_t>(full.size()), 8);
    const int64_t Rc = RoundUp(static_cast<int64_t>(cand.size()), 8);
    FG_ASSIGN_OR_RETURN(exec::Executor * e, TrainExec(S, R, Rc, C));
    FG_RETURN_IF_ERROR(e->UseArena(arena_base, arena_bytes));
    std::vector<int32_t> tok(S, 0), pos(S);
    for (int64_t i = 0; i < S; ++i) pos[i] = static_cast<int32_t>(start + i);
    std::copy(t.tokens.begin() + start, t.tokens.end(), tok.begin());
    std::vector<float> w(R + Rc, 0.0f);
    FG_RETURN_IF_ERROR(e->SetInput("tokens", tok));
    FG_RETURN_IF_ERROR(e->SetInput("pos", pos));
    if (R > 0) {
      std::vector<int32_t> rows(R, 0), targets(R, -1);
      for (size_t k = 0; k < full.size(); ++k) {
        const int64_t i = loss_rows[index][full[k]];  // row i predicts token i + 1
        rows[k] = static_cast<int32_t>(i - start);
        targets[k] = t.tokens[i + 1];
        w[k] = weight * RowWeight(index, full[k]);
      }
      FG_RETURN_IF_ERROR(e->SetInput("logit_rows", rows));
      FG_RETURN_IF_ERROR(e->SetInput("targets", targets));
    }
    if (Rc > 0) {
      std::vector<int32_t> rows(Rc, 0), targets(Rc, -1), ids(Rc * kMaxCandidates, -1);
      for (size_t k = 0; k < cand.size(); ++k) {
        const int64_t i = loss_rows[index][cand[k]];
        const std::vector<int32_t>& c = candidates[index][cand[k]];
        rows[k] = static_cast<int32_t>(i - start);
        std::copy(c.begin(), c.end(), ids.begin() + static_cast<int64_t>(k) * kMaxCandidates);
        const int32_t own = RowTarget(index, cand[k]);
        targets[k] =
            own >= 0
                ? own
                : static_cast<int32_t>(std::find(c.begin(), c.end(), t.tokens[i + 1]) - c.begin());
        w[R + k] = weight * RowWeight(index, cand[k]);
      }
      FG_RETURN_IF_ERROR(e->SetInput("cand_rows", rows));
      FG_RETURN_IF_ERROR(e->SetInput("candidates", ids));
      FG_RETURN_IF_ERROR(e->SetInput("cand_targets", targets));
    }
    FG_RETURN_IF_ERROR(e->SetInput("loss_weights", w));
    FG_RETURN_IF_ERROR(BindCaches(*e, C));
    last_node = std::chrono::steady_clock::now();
    FG_RETURN_IF_ERROR(e->Run());
    FG_ASSIGN_OR_RETURN(auto loss, e->OutputF32("loss"));
    double sum = 0;
    if (row_loss != nullptr) row_loss->assign(loss_rows[index].size(), 0.0f);
    for (size_t k = 0; k < full.size(); ++k) {
      sum += static_cast<double>(RowWeight(index, full[k])) * loss[k];
      if (row_loss != nullptr) (*row_loss)[full[k]] = loss[k];
    }
    for (size_t k = 0; k < cand.size(); ++k) {
      sum += static_cast<double>(RowWeight(index, cand[k])) * loss[R + k];
      if (row_loss != nullptr) (*row_loss)[cand[k]] = loss[R + k];
    }
    auto& ts = params->tensors();
    for (size_t i = 0; i < ts.size(); ++i) {
      FG_ASSIGN_OR_RETURN(auto g, e->OutputF32("grad." + ts[i].name));
      float* acc = (into != nullptr ? *into : grad)[i].data();
      for (size_t k = 0; k < g.size(); ++k) acc[k] += g[k];
    }
    return sum;
  }

  // Runs a tool prior example with its contrast (negatives[index]): s_j, the log-likelihood
  // of the request after each member's tool text (what ToolChannel scores), and the loss
  // -log softmax(s)[the example's own tool]. Its gradient is sum_j (y_j - p_j) dCE_j, CE_j =
  // -s_j (the members' own gradients, run at weight 1, then combined); `weight` scales it.
  // Returns the loss (unweighted, as RunExample's sum).
  StatusOr<double> RunGroup(int index, float weight) {
    const std::vector<int>& neg = negatives[index];
    const size_t n = neg.size() + 1;
    member_grad.resize(std::max(member_grad.size(), n));
    std::vector<double> ce(n);
    for (size_t j = 0; j < n; ++j) {
      auto& mg = member_grad[j];
      if (mg.size() != grad.size()) {
        mg.resize(grad.size());
        for (size_t i = 0; i < grad.size(); ++i) mg[i].resize(grad[i].size());
      }
      for (auto& g : mg) std::fill(g.begin(), g.end(), 0.0f);
      FG_ASSIGN_OR_RETURN(ce[j], RunExample(j == 0 ? index : neg[j - 1], 1.0f, &mg));
    }
    double top = -ce[0];
    for (double c : ce) top = std::max(top, -c);
    double z = 0;
    for (double c : ce) z += std::exp(-c - top);
    double loss = 0;
    for (size_t j = 0; j < n; ++j) {
      const double p = std::exp(-ce[j] - top) / z;
      if (j == 0) loss = -std::log(std::max(p, 1e-300));
      const auto coef = static_cast<float>(weight * ((j == 0 ? 1.0 : 0.0) - p));
      for (size_t i = 0; i < grad.size(); ++i) {
        const float* src = member_grad[j][i].data();
        float* acc = grad[i].data();
        for (size_t k = 0; k < grad[i].size(); ++k) acc[k] += coef * src[k];
      }
    }
    return loss;
  }

  double LearningRate(int64_t s) const {
    const int64_t total = static_cast<int64_t>(batches.size());
    const int64_t warm = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(opt.warmup * total)));
    if (s < warm) return opt.lr * static_cast<double>(s + 1) / warm;
    const double p = total > warm ? static_cast<double>(s - warm) / (total - warm) : 1.0;
    return opt.lr * (opt.min_lr_ratio + (1 - opt.min_lr_ratio) * 0.5 * (1 + std::cos(M_PI * p)));
  }

  void AdamW(int64_t s) {
    double norm2 = 0;
    for (const auto& g : grad) {
      for (float x : g) norm2 += static_cast<double>(x) * x;
    }
    const double norm = std::sqrt(norm2);
    const double clip = opt.clip > 0 && norm > opt.clip ? opt.clip / norm : 1.0;
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    const double lr = LearningRate(s);
    const double c1 = 1 - std::pow(b1, s + 1), c2 = 1 - std::pow(b2, s + 1);
    auto& ts = params->tensors();
    // Every element's update is its own, so the threads' split (whole tensors: a LoRA's are
    // 10-33 K elements) does not change a bit.
    auto update = [&](int64_t t0, int64_t t1) {
      for (int64_t i = t0; i < t1; ++i) {
        float* p = ts[i].values.data();
        float* mi = m[i].data();
        float* vi = v[i].data();
        const float* g = grad[i].data();
        for (size_t k = 0; k < ts[i].values.size(); ++k) {
          const double gk = g[k] * clip;
          mi[k] = static_cast<float>(b1 * mi[k] + (1 - b1) * gk);
          vi[k] = static_cast<float>(b2 * vi[k] + (1 - b2) * gk * gk);
          const double upd = (mi[k] / c1) / (std::sqrt(vi[k] / c2) + eps) + opt.weight_decay * p[k];
          p[k] = static_cast<float>(p[k] - lr * upd);
        }
      }
    };
    const auto tensors = static_cast<int64_t>(ts.size());
    if (pool != nullptr && pool->size() > 1) {
      pool->ParallelFor(tensors, update);
    } else {
      update(0, tensors);
    }
  }

  std::string Fingerprint() const {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](uint64_t x) { h = (h ^ x) * 1099511628211ull; };
    for (const auto& t : data) {
      mix(t.tokens.size());
      mix(static_cast<uint64_t>(t.prefix_len));
      for (int32_t id : t.tokens) mix(static_cast<uint32_t>(id));
    }
    for (const auto& neg : negatives) {
      mix(neg.size());
      for (int j : neg) mix(static_cast<uint64_t>(j));
    }
    std::string s =
        "rank=" + std::to_string(opt.lora.rank) + " alpha=" + std::to_string(opt.lora.alpha) +
        " seed=" + std::to_string(opt.lora.seed) + " prefix=" + PrefixModeName(opt.prefix) +
        " lr=" + std::to_string(opt.lr) + " wd=" + std::to_string(opt.weight_decay) +
        " warmup=" + std::to_string(opt.warmup) +
        " batch_tokens=" + std::to_string(opt.batch_tokens) +
        " prefix_run=" + std::to_string(opt.prefix_run) + " epochs=" + std::to_string(opt.epochs) +
        " max_steps=" + std::to_string(opt.max_steps) + " init=" + opt.init_adapter +
        " free_only=" + std::to_string(opt.loss_free_tokens_only) +
        " softmax_allowed=" + std::to_string(opt.softmax_allowed) +
        " skip_leave_out=" + std::to_string(opt.loss_leave_out == LeaveOutLoss::kSkip) +
        (opt.loss_leave_out == LeaveOutLoss::kAnchor ? " anchor_leave_out=1" : "") +
        " head_grad=" + std::to_string(opt.head_grad_threshold) + "/" +
        std::to_string(opt.head_grad_max_tokens) +
        " prior_weight=" + std::to_string(opt.prior_weight) + " modules=";
    for (const auto& mname : opt.lora.modules) s += mname + ",";
    return s + " data=" + std::to_string(h);
  }

  Status SaveCheckpoint() const {
    if (opt.checkpoint.empty()) return OkStatus();
    gguf::Writer w;
    w.SetString("general.type", kCheckpointType);
    w.SetString("tune.fingerprint", Fingerprint());
    w.SetUint64("tune.step", static_cast<uint64_t>(step));
    w.SetFloat64("tune.best_score", best_score);
    w.SetInt64("tune.best_epoch", best_epoch);
    w.SetFloat64("tune.epoch_loss_sum", epoch_loss_sum);
    w.SetInt64("tune.epoch_targets", epoch_targets);
    std::vector<float> ep_loss, ep_val;
    for (const auto& e : epochs) {
      ep_loss.push_back(static_cast<float>(e.train_loss));
      ep_val.push_back(static_cast<float>(e.val_score));
    }
    w.SetFloat32Array("tune.epoch_loss", ep_loss);
    w.SetFloat32Array("tune.epoch_val", ep_val);
    const auto& ts = params->tensors();
    auto add = [&](const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& vals) {
      std::vector<uint8_t> bytes(vals.size() * sizeof(float));
      std::memcpy(bytes.data(), vals.data(), bytes.size());
      return w.AddTensor(name, tensor::DType::kF32, shape, std::move(bytes));
    };
    for (size_t i = 0; i < ts.size(); ++i) {
      FG_RETURN_IF_ERROR(add("p." + std::to_string(i), ts[i].shape, ts[i].values));
      FG_RETURN_IF_ERROR(add("m." + std::to_string(i), ts[i].shape, m[i]));
      FG_RETURN_IF_ERROR(add("v." + std::to_string(i), ts[i].shape, v[i]));
      if (!best.empty()) FG_RETURN_IF_ERROR(add("best." + std::to_string(i), ts[i].shape, best[i]));
    }
    return w.WriteFile(opt.checkpoint).WithContext("tune: checkpoint '" + opt.checkpoint + "'");
  }
};

Trainer::Trainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trainer::~Trainer() = default;
LoraParams& Trainer::params() { return *impl_->params; }
uint64_t Trainer::transposed_bytes() const {
  return impl_->transposed ? impl_->transposed->bytes() : 0;
}

int64_t Trainer::prefixes_computed() const { return impl_->prefixes_computed; }
int64_t Trainer::prefixes_read() const { return impl_->prefixes_read; }

bool Trainer::finished() const {
  return impl_->step == static_cast<int64_t>(impl_->batches.size());
}

int64_t Trainer::steps_per_epoch() const {
  int64_t n = 0;
  for (int64_t e : impl_->batch_epoch) n += e == 0;
  return n;
}

StatusOr<double> Trainer::ExampleLoss(int index, std::vector<std::vector<float>>* grad) {
  Impl& s = *impl_;
  if (index < 0 || static_cast<size_t>(index) >= s.negatives.size()) {
    return InvalidArgumentError("tune: no example " + std::to_string(index));
  }
  // RunExample and RunGroup add into s.grad: lend them the caller's buffer.
  grad->resize(s.grad.size());
  for (size_t i = 0; i < s.grad.size(); ++i) grad->at(i).assign(s.grad[i].size(), 0.0f);
  std::swap(*grad, s.grad);
  auto loss = s.negatives[static_cast<size_t>(index)].empty() ? s.RunExample(index, 1.0f)
                                                              : s.RunGroup(index, 1.0f);
  std::swap(*grad, s.grad);
  return loss;
}

int64_t Trainer::trained_tokens_per_epoch() const {
  int64_t n = 0;
  for (const auto& t : impl_->data) n += impl_->Trained(t);
  return n;
}

int64_t Trainer::loss_rows_per_epoch() const {
  int64_t n = 0;
  for (const auto& rows : impl_->loss_rows) n += static_cast<int64_t>(rows.size());
  return n;
}

StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const runtime::Model& model,
                                                   const text::Tokenizer& tokenizer,
                                                   std::vector<call::TrainingExample> examples,
                                                   const TuneOptions& options) {
  if (!model.weights().loras.empty()) return InvalidArgumentError("tune: the base model must have no adapters");
  if (examples.empty()) return InvalidArgumentError("tune: no training examples");
  if (options.epochs < 1) return InvalidArgumentError("tune: epochs must be >= 1");
  if (options.batch_tokens < 1) return InvalidArgumentError("tune: batch tokens must be >= 1");
  if (options.prefix_run < 1) return InvalidArgumentError("tune: prefix run must be >= 1");
  if (!(options.lr > 0) || !std::isfinite(options.lr)) return InvalidArgumentError("tune: lr must be > 0");
  auto impl = std::make_unique<Impl>();
  impl->model = &model;
  impl->opt = options;
  const int64_t context = model.config().context_length;
  auto add = [&](const call::TrainingExample& e) -> Status {
    FG_ASSIGN_OR_RETURN(call::TrainingTokens t, call::RenderTrainingExample(tokenizer, e));
    if (t.target_start < 1 || t.target_start >= static_cast<int64_t>(t.tokens.size())) {
      return InvalidArgumentError("tune: line " + std::to_string(e.line) + ": no call tokens");
    }
    std::vector<int32_t> rows;
    if (e.channel && options.prefix != PrefixMode::kBase) {
      return InvalidArgumentError(
          "tune: the tool prior's examples need --prefix base (the prior "
          "runs the base model over each tool's text)");
    }
    impl->is_channel.push_back(e.channel);
    // A tool prior example learns every request token over the whole vocabulary (no grammar).
    if (e.channel || (!options.loss_free_tokens_only && !options.softmax_allowed &&
                      options.loss_leave_out == LeaveOutLoss::kLearn)) {
      for (int64_t i = t.target_start; i < static_cast<int64_t>(t.tokens.size()); ++i) {
        rows.push_back(static_cast<int32_t>(i - 1));
      }
    }
    impl->candidates.emplace_back(rows.size());
    impl->row_target.emplace_back();
    impl->row_weight.emplace_back();
    impl->anchors.emplace_back();
    impl->loss_rows.push_back(std::move(rows));
    impl->data.push_back(std::move(t));
    impl->keys.push_back(e.catalog_key);
    if (impl->Rows(impl->data.back()) > context) {
      return InvalidArgumentError("tune: line " + std::to_string(e.line) + ": " +
                                  std::to_string(impl->data.back().tokens.size()) +
                                  " tokens do not fit the model's context");
    }
    impl->max_rows = std::max(impl->max_rows, impl->Rows(impl->data.back()));
    return OkStatus();
  };
  for (const call::TrainingExample& e : examples) FG_RETURN_IF_ERROR(add(e));
  impl->given_arguments = call::GivenArguments(examples);
  // A tool prior example's contrast: the same request after other tools' texts, kept after the
  // examples (never batched on their own: RunGroup runs them with their example).
  impl->negatives.resize(examples.size());
  for (size_t i = 0; i < examples.size(); ++i) {
    for (const std::string& name : examples[i].channel_negatives) {
      if (!examples[i].channel || examples[i].catalog->Find(name) == nullptr) {
        return InvalidArgumentError("tune: line " + std::to_string(examples[i].line) +
                                    ": a contrast tool '" + name +
                                    "' not of a tool prior example's catalog");
      }
      impl->negatives[i].push_back(static_cast<int>(impl->data.size()));
      FG_RETURN_IF_ERROR(add(call::ChannelNegative(examples[i], name)));
    }
  }
  const bool leave_out = options.loss_leave_out != LeaveOutLoss::kLearn;
  if (options.loss_free_tokens_only || options.softmax_allowed || leave_out) {
    // The rows of call tokens the grammar leaves to the model (every call token's without
    // loss_free_tokens_only) and the tokens it allows there: one grammar per catalog prompt
    // and number of calls at a time (a grammar holds megabytes of tables), handed back after.
    std::map<std::pair<std::string, size_t>, std::vector<size_t>> groups;
    for (size_t i = 0; i < examples.size(); ++i) {
      if (examples[i].channel) continue;
      groups[{examples[i].catalog_key, examples[i].calls.size()}].push_back(i);
    }
    // options.loss_leave_out: the arguments some example gives, per catalog and tool.
    std::set<std::tuple<const text::ToolCatalog*, std::string, std::string>> given;
    if (leave_out) {
      for (const call::TrainingExample& e : examples) {
        if (e.channel) continue;
        for (const auto& [name, args] : e.calls) {
          for (const auto& [arg, value] : args.items()) given.emplace(e.catalog.get(), name, arg);
        }
      }
    }
    for (const auto& [key, members] : groups) {
      text::GrammarOptions go;
      go.max_calls = static_cast<int>(key.second);
      FG_ASSIGN_OR_RETURN(auto g, text::CallGrammar::Create(*examples[members[0]].catalog, tokenizer, go));
      for (size_t i : members) {
        const call::TrainingTokens& t = impl->data[i];
        // kAnchor: every row gets a target and a weight (the rows so far: their own, 1).
        const bool per_row = options.loss_leave_out == LeaveOutLoss::kAnchor;
        auto& rt = impl->row_target[i];
        auto& rw = impl->row_weight[i];
        if (per_row) {
          rt.assign(impl->loss_rows[i].size(), -1);
          rw.assign(impl->loss_rows[i].size(), 1.0f);
        }
        // The tokens that leave out an argument no example of its tool gives.
        std::vector<int64_t> never_given;
        if (leave_out) {
          for (const auto& l : t.leave_out) {
            for (const std::string& arg : l.keys) {
              if (given.contains({examples[i].catalog.get(), l.tool, arg})) continue;
              never_given.push_back(l.index);
              break;
            }
          }
        }
        text::CallGrammar::State st = g->Start();
        for (int64_t k = t.target_start; k < static_cast<int64_t>(t.tokens.size()); ++k) {
          const bool done = g->Done(st);
          if (done && options.loss_free_tokens_only) break;
          const std::span<const int32_t> allowed =
              done ? std::span<const int32_t>() : g->Allowed(st);
          // A token that leaves out an argument no example gives, but not a number's end
          // (which the rows of every number teach).
          const bool leaves = !done && allowed.size() > 1 && !g->InNumber(st) &&
                              std::binary_search(never_given.begin(), never_given.end(), k);
          const bool skip = leaves && options.loss_leave_out == LeaveOutLoss::kSkip;
          if (leaves && per_row && static_cast<int64_t>(allowed.size()) <= kMaxCandidates) {
            // One candidate row per allowed token; ComputeAnchors weighs them.
            impl->anchors[i].emplace_back(impl->loss_rows[i].size(), allowed.size());
            for (size_t j = 0; j < allowed.size(); ++j) {
              impl->loss_rows[i].push_back(static_cast<int32_t>(k - 1));
              impl->candidates[i].emplace_back(allowed.begin(), allowed.end());
              rt.push_back(static_cast<int32_t>(j));
              rw.push_back(1.0f / static_cast<float>(allowed.size()));
            }
          } else if (!skip && (!options.loss_free_tokens_only || allowed.size() > 1)) {
            impl->loss_rows[i].push_back(static_cast<int32_t>(k - 1));
            // A forced token (--loss-tokens all) keeps the whole vocabulary: over itself
            // alone its loss would be 0.
            const bool few = options.softmax_allowed && allowed.size() > 1 &&
                             static_cast<int64_t>(allowed.size()) <= kMaxCandidates;
            impl->candidates[i].push_back(few ? std::vector<int32_t>(allowed.begin(), allowed.end())
                                              : std::vector<int32_t>());
            if (per_row) {
              rt.push_back(-1);
              rw.push_back(1.0f);
            }
          }
          if (done) continue;
          if (Status a = g->Advance(&st, t.tokens[k]); !a.ok()) {
            return InvalidArgumentError("tune: line " + std::to_string(examples[i].line) +
                                        ": the call's tokens do not follow the call grammar (" +
                                        a.message() + ")");
          }
        }
      }
    }
#if defined(__GLIBC__)
    malloc_trim(0);  // the grammars' tables, freed in small blocks glibc would keep
#endif
  }
  for (size_t i = 0; i < examples.size(); ++i) {
    if (impl->loss_rows[i].empty()) {
      return InvalidArgumentError("tune: line " + std::to_string(examples[i].line) +
                                  ": the grammar forces every token of the call: nothing to learn");
    }
  }
  const int threads = options.threads > 0 ? options.threads : static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  impl->pool = std::make_unique<ThreadPool>(threads);
  if (options.init_adapter.empty()) {
    FG_ASSIGN_OR_RETURN(impl->params, LoraParams::Create(model.file(), options.lora));
  } else {
    FG_ASSIGN_OR_RETURN(impl->params, LoraParams::FromAdapter(model.file(), options.init_adapter));
    if (impl->params->adapter().after_prefix() != (options.prefix == PrefixMode::kBase)) {
      return InvalidArgumentError("tune: '" + options.init_adapter + "' was trained with --prefix " +
                                  (impl->params->adapter().after_prefix() ? "base" : "adapted") +
                                  "; train it on with the same");
    }
  }
  if (options.prefix == PrefixMode::kBase && options.prefix_store_mib > 0) {
    FG_ASSIGN_OR_RETURN(impl->store,
                        PrefixStore::Create(static_cast<uint64_t>(options.prefix_store_mib) << 20));
  }
  impl->base_weights = model.weights();
  impl->lora_weights = model.weights();
  impl->lora_weights.loras = {model::LoraUse{&impl->params->adapter(), 1.0f}};
  const model::Config& c = model.config();
  const size_t cache = static_cast<size_t>(impl->max_rows * c.n_kv_heads * c.head_dim);
  impl->kcache.assign(c.n_layers, std::vector<float>(cache, 0.0f));
  impl->vcache.assign(c.n_layers, std::vector<float>(cache, 0.0f));
  // Every step of every epoch. Per epoch, from the seed: the examples of each catalog prefix
  // (catalog_key) shuffled and cut in runs of prefix_run, the runs shuffled, then cut into
  // batches of at least batch_tokens trained tokens. Examples that share a prefix come in runs,
  // so with PrefixMode::kBase the prefix's K/V are computed once per run, not once per example.
  const auto kRun = static_cast<size_t>(options.prefix_run);
  std::map<std::string, std::vector<int>> by_key;
  for (size_t i = 0; i < examples.size(); ++i) by_key[examples[i].catalog_key].push_back(static_cast<int>(i));
  for (int64_t ep = 0; ep < options.epochs; ++ep) {
    uint64_t state = options.lora.seed * 0x100000001B3ull + static_cast<uint64_t>(ep) + 1;
    auto shuffle = [&](auto& v) {
      for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i) {
        std::swap(v[i], v[SplitMix64(state) % static_cast<uint64_t>(i + 1)]);
      }
    };
    std::vector<std::vector<int>> runs;
    for (auto& [key, members] : by_key) {
      std::vector<int> m = members;
      shuffle(m);
      for (size_t i = 0; i < m.size(); i += kRun) {
        runs.emplace_back(m.begin() + i, m.begin() + std::min(m.size(), i + kRun));
      }
    }
    shuffle(runs);
    std::vector<int> batch;
    int64_t tokens = 0;
    std::vector<int> order;
    for (const auto& run : runs) order.insert(order.end(), run.begin(), run.end());
    for (size_t k = 0; k < order.size(); ++k) {
      batch.push_back(order[k]);
      tokens += impl->GroupTrained(order[k]);
      if (tokens >= options.batch_tokens || k + 1 == order.size()) {
        impl->batches.push_back(std::move(batch));
        impl->batch_epoch.push_back(ep);
        batch.clear();
        tokens = 0;
      }
    }
  }
  if (options.max_steps > 0 && static_cast<int64_t>(impl->batches.size()) > options.max_steps) {
    impl->batches.resize(options.max_steps);
    impl->batch_epoch.resize(options.max_steps);
  }
  for (const auto& t : impl->params->tensors()) {
    impl->grad.emplace_back(t.values.size(), 0.0f);
    impl->m.emplace_back(t.values.size(), 0.0f);
    impl->v.emplace_back(t.values.size(), 0.0f);
  }
  // From the starting adapter, before a checkpoint (Resume) replaces it.
  if (options.loss_leave_out == LeaveOutLoss::kAnchor) FG_RETURN_IF_ERROR(impl->ComputeAnchors());
  return std::unique_ptr<Trainer>(new Trainer(std::move(impl)));
}

Status Trainer::Resume(const std::string& path) {
  Impl& s = *impl_;
  FG_ASSIGN_OR_RETURN(auto file, gguf::File::Open(path));
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("tune: checkpoint '" + path + "': " + why);
  };
  auto type = file->GetString("general.type");
  if (!type.ok() || *type != kCheckpointType) return bad("not a tune checkpoint");
  FG_ASSIGN_OR_RETURN(std::string_view fp, file->GetString("tune.fingerprint"));
  if (fp != s.Fingerprint()) {
    return bad("written with other options or data (" + std::string(fp) + "; now " + s.Fingerprint() + ")");
  }
  FG_ASSIGN_OR_RETURN(uint64_t step, file->GetUint("tune.step"));
  if (step > s.batches.size()) return bad("step beyond the run");
  FG_ASSIGN_OR_RETURN(s.best_score, file->GetFloat("tune.best_score"));
  FG_ASSIGN_OR_RETURN(s.best_epoch, file->GetInt("tune.best_epoch"));
  FG_ASSIGN_OR_RETURN(s.epoch_loss_sum, file->GetFloat("tune.epoch_loss_sum"));
  FG_ASSIGN_OR_RETURN(s.epoch_targets, file->GetInt("tune.epoch_targets"));
  FG_ASSIGN_OR_RETURN(auto ep_loss, file->GetFloatArray("tune.epoch_loss"));
  FG_ASSIGN_OR_RETURN(auto ep_val, file->GetFloatArray("tune.epoch_val"));
  s.epochs.clear();
  for (size_t i = 0; i < ep_loss.size() && i < ep_val.size(); ++i) {
    s.epochs.push_back({static_cast<int64_t>(i), ep_loss[i], ep_val[i]});
  }
  auto& ts = s.params->tensors();
  auto read = [&](const std::string& name, std::vector<float>& out) -> Status {
    const gguf::TensorInfo* t = file->FindTensor(name);
    if (t == nullptr || t->type != tensor::DType::kF32 || t->size_bytes != out.size() * sizeof(float)) {
      return bad("tensor '" + name + "' is missing or has the wrong size");
    }
    std::memcpy(out.data(), t->data, t->size_bytes);
    for (float x : out) {
      if (!std::isfinite(x)) return bad("tensor '" + name + "' holds a non-finite value");
    }
    return OkStatus();
  };
  s.best.clear();
  for (size_t i = 0; i < ts.size(); ++i) {
    FG_RETURN_IF_ERROR(read("p." + std::to_string(i), ts[i].values));
    FG_RETURN_IF_ERROR(read("m." + std::to_string(i), s.m[i]));
    FG_RETURN_IF_ERROR(read("v." + std::to_string(i), s.v[i]));
    if (file->FindTensor("best." + std::to_string(i)) != nullptr) {
      s.best.resize(ts.size());
      s.best[i].resize(ts[i].values.size());
      FG_RETURN_IF_ERROR(read("best." + std::to_string(i), s.best[i]));
    }
  }
  s.step = static_cast<int64_t>(step);
  return OkStatus();
}

Status Trainer::Train(const std::function<void(const Progress&)>& progress,
                      const std::atomic<bool>* stop,
                      const std::function<StatusOr<double>(const std::string&)>& validate,
                      std::vector<EpochResult>* epochs) {
  Impl& s = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  double excluded_s = 0;  // validation time, not training
  int64_t tokens = 0;
  const int64_t start_step = s.step;
  const int64_t total = static_cast<int64_t>(s.batches.size());
  while (s.step < total) {
    if (s.opt.stop_after > 0 && s.step - start_step >= s.opt.stop_after) {
      FG_RETURN_IF_ERROR(s.SaveCheckpoint());
      break;
    }
    if (stop != nullptr && stop->load()) {
      FG_RETURN_IF_ERROR(s.SaveCheckpoint());
      return {StatusCode::kFailedPrecondition, "tune: interrupted at step " + std::to_string(s.step)};
    }
    const std::vector<int>& batch = s.batches[s.step];
    int64_t targets = 0, trained = 0;
    for (int i : batch) {
      targets += s.Targets(i);
      trained += s.GroupTrained(i);
    }
    for (auto& g : s.grad) std::fill(g.begin(), g.end(), 0.0f);
    double loss = 0;
    for (int i : batch) {
      const double w = s.is_channel[static_cast<size_t>(i)] ? s.opt.prior_weight : 1.0;
      const auto wt = static_cast<float>(w / static_cast<double>(targets));
      FG_ASSIGN_OR_RETURN(double l, s.negatives[static_cast<size_t>(i)].empty()
                                        ? s.RunExample(i, wt)
                                        : s.RunGroup(i, wt));
      loss += l;
    }
    if (!std::isfinite(loss)) {
      return InternalError("tune: the loss became " + std::to_string(loss) + " at step " +
                           std::to_string(s.step) + " (try a lower --lr)");
    }
    s.AdamW(s.step);
    s.epoch_loss_sum += loss;
    s.epoch_targets += targets;
    tokens += trained;
    const int64_t epoch = s.batch_epoch[s.step];
    ++s.step;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - excluded_s;
    if (progress) {
      Progress p;
      p.epoch = epoch;
      p.step = s.step;
      p.steps = total;
      p.loss = loss / static_cast<double>(targets);
      p.trained_tokens = tokens;
      p.elapsed_s = elapsed;
      p.tokens_per_s = elapsed > 0 ? tokens / elapsed : 0;
      p.eta_s = elapsed * static_cast<double>(total - s.step) / static_cast<double>(s.step - start_step);
      progress(p);
    }
    const bool epoch_end = s.step == total || s.batch_epoch[s.step] != epoch;
    if (epoch_end) {
      EpochResult r;
      r.epoch = epoch;
      r.train_loss = s.epoch_targets ? s.epoch_loss_sum / s.epoch_targets : 0;
      s.epoch_loss_sum = 0;
      s.epoch_targets = 0;
      if (validate) {
        const auto v0 = std::chrono::steady_clock::now();
        FG_ASSIGN_OR_RETURN(gguf::Writer w, AdapterWriter());
        const std::string path = (std::filesystem::temp_directory_path() /
                                  ("fgemma-tune-" + std::to_string(getpid()) + "-val.gguf")).string();
        FG_RETURN_IF_ERROR(w.WriteFile(path));
        auto score = validate(path);
        std::error_code ec;
        std::filesystem::remove(path, ec);
        FG_RETURN_IF_ERROR(score.status());
        r.val_score = *score;
        if (*score > s.best_score) {
          s.best_score = *score;
          s.best_epoch = epoch;
          s.best.clear();
          for (const auto& t : s.params->tensors()) s.best.push_back(t.values);
        }
        excluded_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - v0).count();
      }
      s.epochs.push_back(r);
    }
    if (s.opt.checkpoint_every > 0 && (s.step % s.opt.checkpoint_every == 0 || s.step == total)) {
      FG_RETURN_IF_ERROR(s.SaveCheckpoint());
    }
  }
  if (epochs != nullptr) *epochs = s.epochs;
  return OkStatus();
}

namespace {

// The best epoch's values when validation chose one (and every step is done), else null: the
// current ones.
const std::vector<std::vector<float>>* BestValues(const Trainer::Impl& s) {
  return !s.best.empty() && s.step == static_cast<int64_t>(s.batches.size()) ? &s.best : nullptr;
}

}  // namespace

std::vector<std::vector<float>> Trainer::AdapterValues() const {
  if (const auto* best = BestValues(*impl_)) return *best;
  std::vector<std::vector<float>> values;
  for (const auto& t : impl_->params->tensors()) values.push_back(t.values);
  return values;
}

StatusOr<gguf::Writer> Trainer::AdapterWriter(
    std::span<const std::vector<std::vector<float>>> averaged) const {
  const Impl& s = *impl_;
  const std::vector<std::vector<float>>* best = BestValues(s);
  auto w = s.params->ToWriter(best, averaged);
  FG_RETURN_IF_ERROR(w.status());
  if (!averaged.empty()) w->SetUint64("training.average", averaged.size() + 1);
  w->SetString("fgemma.lora.prefix", PrefixModeName(s.opt.prefix));
  // Trained for the tool prior in this run. An adapter trained on from a marked one without the
  // prior's examples is not marked: its weights moved for the calls alone, and the prior then
  // runs the base model (per-app tunes from the shipped adapter measured better so:
  // docs/tuning.md).
  if (std::find(s.is_channel.begin(), s.is_channel.end(), true) != s.is_channel.end()) {
    w->SetString("fgemma.lora.channel", "adapted");
  }
  // The arguments an app's examples give, for `fgemma call` to fill the others from the
  // starting adapter (FunctionCallerOptions::fill_arguments).
  if (!s.given_arguments.empty()) w->SetString(call::kGivenArgumentsKey, s.given_arguments);
  w->SetString("training.method", "fgemma tune");
  w->SetUint64("training.steps", static_cast<uint64_t>(s.step));
  w->SetUint64("training.examples", static_cast<uint64_t>(s.data.size()));
  w->SetUint64("training.seed", s.opt.lora.seed);
  if (best != nullptr) w->SetInt64("training.best_epoch", s.best_epoch);
  return w;
}

}  // namespace fg::train
