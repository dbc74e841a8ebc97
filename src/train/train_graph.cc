#include "src/train/train_graph.h"

#include <algorithm>
#include <cstring>

#include "src/graph/backward.h"
#include "src/kernels/quant.h"
#include "src/model/gemma3/forward.h"
#include "src/model/gemma3/lora.h"

namespace fg::train {

std::vector<std::string> TrainedNames(const model::Weights& weights) {
  std::vector<std::string> names;
  if (weights.loras.empty()) return names;
  for (const model::LoraPair& p : weights.loras[0].adapter->pairs()) {
    names.push_back(model::LoraWeightName(p.a->name, 0));
    names.push_back(model::LoraTransposedName(p.b->name, 0));
  }
  return names;
}

StatusOr<graph::Graph> BuildTrainGraph(const model::Config& config, const model::Weights& weights,
                                       const TrainGraphSpec& spec) {
  if (weights.loras.empty()) return InvalidArgumentError("train: no adapter to train");
  const int64_t R = spec.n_target_rows, Rc = spec.n_candidate_rows;
  if (R < 0 || Rc < 0 || R + Rc < 1 || R > spec.n_tokens || Rc > spec.n_tokens ||
      (Rc > 0 && spec.n_candidates < 1)) {
    return InvalidArgumentError(
        "train: target rows must be in [0, n_tokens], at least one in all, and candidate rows "
        "need candidates");
  }
  model::ForwardSpec fs;
  fs.n_tokens = spec.n_tokens;
  fs.n_logit_rows = 0;  // the last hidden state of every row: the heads below pick their rows
  fs.global_cache_rows = spec.global_cache_rows;
  fs.local_cache_rows = spec.local_cache_rows;
  FG_ASSIGN_OR_RETURN(graph::Graph fwd, model::BuildForward(config, weights, fs));
  graph::Builder b(std::move(fwd));
  const graph::ValueId hidden(b.graph().outputs().back());
  const graph::ValueId embd = b.graph().Find(weights.token_embd->name);
  if (!embd.valid()) return InternalError("train: the forward graph has no token embedding");
  const graph::ValueId head = model::LmHeadValue(b, weights, embd);
  const graph::ValueId norm = b.Weight(std::string(weights.output_norm->name),
                                       weights.output_norm->shape, weights.output_norm->type);
  // The rows of `hidden` listed in input `rows_name`, through the final norm.
  auto normed_rows = [&](const std::string& rows_name, const std::string& prefix, int64_t n) {
    const graph::ValueId rows = b.Input(rows_name, {n}, graph::ValueType::kI32);
    const graph::ValueId x = b.SelectRows(prefix + "_rows", hidden, rows);
    return b.RmsNorm(prefix + "_norm", x, norm, config.rms_eps);
  };
  graph::ValueId loss_full, loss_cand;
  if (R > 0) {
    const graph::ValueId x = normed_rows("logit_rows", "result", R);
    const graph::ValueId logits = b.MatMul("result_output", x, head);
    const graph::ValueId targets = b.Input("targets", {R}, graph::ValueType::kI32);
    loss_full = b.CrossEntropy(Rc > 0 ? "loss_full" : "loss", logits, targets);
  }
  if (Rc > 0) {
    const graph::ValueId x = normed_rows("cand_rows", "cand_result", Rc);
    const graph::ValueId ids =
        b.Input("candidates", {Rc, spec.n_candidates}, graph::ValueType::kI32);
    const graph::ValueId logits = b.CandidateLogits("cand_output", x, head, ids);
    const graph::ValueId targets = b.Input("cand_targets", {Rc}, graph::ValueType::kI32);
    loss_cand = b.CrossEntropy(R > 0 ? "loss_cand" : "loss", logits, targets);
  }
  graph::BackwardSpec bs;
  bs.seed = b.Input("loss_weights", {R + Rc}, graph::ValueType::kF32);
  bs.loss = R == 0 ? loss_cand : Rc == 0 ? loss_full : b.Concat("loss", loss_full, loss_cand, 0);
  b.MarkOutput(bs.loss);
  FG_RETURN_IF_ERROR(b.status());
  for (const std::string& name : TrainedNames(weights)) {
    const graph::ValueId id = b.graph().Find(name);
    if (!id.valid()) return InternalError("train: the graph does not use '" + name + "'");
    bs.wrt.push_back(id);
  }
  const tensor::DType type = spec.transposed_type;
  bs.transposed = [type](const graph::Value& w) { return graph::TransposedName(w, type); };
  if (spec.head_threshold > 0.0f) {
    bs.sparse_head.threshold = spec.head_threshold;
    bs.sparse_head.max_tokens = spec.head_max_tokens;
    bs.sparse_head.mean = [](const graph::Value& w) { return HeadMeanName(w.name); };
  }
  FG_RETURN_IF_ERROR(graph::AddBackward(b, bs).status());
  return b.Finish();
}

namespace {
constexpr std::string_view kMeanSuffix = "^mean", kTransposedSuffix = "^T";
}  // namespace

std::string HeadMeanName(const std::string& weight) { return weight + std::string(kMeanSuffix); }

StatusOr<std::unique_ptr<TransposedWeights>> TransposedWeights::Make(
    const graph::Graph& g, const exec::WeightResolver& base, tensor::DType type) {
  auto t = std::unique_ptr<TransposedWeights>(new TransposedWeights());
  auto has = [](const std::string& name, std::string_view suffix) {
    return name.size() > suffix.size() && name.ends_with(suffix);
  };
  for (int id : g.weights()) {
    const std::string& name = g.value(id).name;
    const bool mean = has(name, kMeanSuffix);
    if (!mean && !has(name, kTransposedSuffix)) continue;
    const std::string src_name =
        name.substr(0, name.size() - (mean ? kMeanSuffix : kTransposedSuffix).size());
    FG_ASSIGN_OR_RETURN(exec::WeightData w, base(src_name));
    if (w.shape.size() != 2) return InvalidArgumentError("train: '" + src_name + "' is not 2-D");
    const int64_t N = w.shape[0], K = w.shape[1];
    const auto in_row = tensor::RowBytes(w.type, K);
    const auto out_row = tensor::RowBytes(type, N);
    if (!in_row || (!mean && !out_row)) {
      return InvalidArgumentError("train: '" + src_name + "' (" + graph::ShapeString(w.shape) +
                                  ") cannot be " +
                                  (mean ? std::string("read as rows")
                                        : "transposed to " + std::string(tensor::DTypeName(type)) +
                                              " rows of " + std::to_string(N)));
    }
    std::vector<float> row(static_cast<size_t>(K));
    auto read_row = [&](int64_t n) {
      return kernels::DequantizeRow(w.type, static_cast<const uint8_t*>(w.data) + *in_row * n,
                                    row.data(), K);
    };
    Tensor out;
    if (mean) {  // the mean row, f32 [K], summed in double
      std::vector<double> sum(static_cast<size_t>(K), 0.0);
      for (int64_t n = 0; n < N; ++n) {
        FG_RETURN_IF_ERROR(read_row(n));
        for (int64_t k = 0; k < K; ++k) sum[k] += row[k];
      }
      out = Tensor{{K}, tensor::DType::kF32, std::vector<uint8_t>(static_cast<size_t>(K) * 4)};
      for (int64_t k = 0; k < K; ++k) {
        const float m = static_cast<float>(sum[k] / static_cast<double>(N));
        std::memcpy(out.data.data() + k * 4, &m, 4);
      }
    } else {
      // 64 columns of W at a time (a band of W^T's rows, 64 x N f32: 64 MiB for the 262144-row
      // LM head, never the whole f32 matrix): each row of W dequantized once per band.
      constexpr int64_t kBand = 64;
      out = Tensor{{K, N}, type, std::vector<uint8_t>(static_cast<size_t>(*out_row * K))};
      std::vector<float> band(static_cast<size_t>(std::min(kBand, K) * N));
      for (int64_t k0 = 0; k0 < K; k0 += kBand) {
        const int64_t kn = std::min(kBand, K - k0);
        for (int64_t n = 0; n < N; ++n) {
          FG_RETURN_IF_ERROR(read_row(n));
          for (int64_t k = 0; k < kn; ++k) band[k * N + n] = row[k0 + k];
        }
        for (int64_t k = 0; k < kn; ++k) {
          FG_RETURN_IF_ERROR(kernels::QuantizeRow(type, band.data() + k * N,
                                                  out.data.data() + *out_row * (k0 + k), N));
        }
      }
    }
    t->bytes_ += out.data.size();
    t->tensors_.emplace(name, std::move(out));
  }
  return t;
}

exec::WeightResolver TransposedWeights::Resolver(exec::WeightResolver next) const {
  const auto* tensors = &tensors_;
  return [tensors, next = std::move(next)](std::string_view name) -> StatusOr<exec::WeightData> {
    auto it = tensors->find(std::string(name));
    if (it == tensors->end()) return next(name);
    exec::WeightData w;
    w.type = it->second.type;
    w.shape = it->second.shape;
    w.data = it->second.data.data();
    w.size_bytes = it->second.data.size();
    return w;
  };
}

}  // namespace fg::train
