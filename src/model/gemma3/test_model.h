// Test helper: a small deterministic random Gemma 3 GGUF with F32 weights, every size
// chosen by the test (layers, heads, window...). Used by the config/weights tests (which then
// corrupt it) and the reference tests. For the fixed presets shared by every module see
// src/gguf_tools/synthetic.h.
#ifndef FGEMMA_MODEL_GEMMA3_TEST_MODEL_H_
#define FGEMMA_MODEL_GEMMA3_TEST_MODEL_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/base/check.h"
#include "src/gguf/writer.h"
#include "src/kernels/quant.h"
#include "src/tensor/half.h"

namespace fg::model::testing {

struct TestModelSpec {
  int64_t n_layers = 1;
  int64_t hidden = 32;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 2;
  int64_t head_dim = 8;
  int64_t ffn = 48;
  int64_t vocab = 40;
  int64_t context_length = 256;
  int64_t sliding_window = 4;
  float rms_eps = 1e-6f;
  double rope_base = 1e6;
  std::optional<double> rope_base_swa;  // written as gemma3.rope.freq_base_swa when set
  uint64_t seed = 1;
};

// Uniform floats in [-1, 1) from splitmix64: the same numbers on every platform.
class TestRng {
 public:
  explicit TestRng(uint64_t seed) : state_(seed) {}
  float Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<float>(static_cast<double>(z >> 40) / static_cast<double>(1ull << 23) - 1.0);
  }

 private:
  uint64_t state_;
};

inline std::vector<uint8_t> F32Bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// One tensor about to be written; an edit hook may rename it, retype it (values are
// converted: F16/BF16 exactly-rounded, block types through kernels::QuantizeRow, I32 as raw
// bits), reshape it (values are generated for the new shape) or drop it.
struct TensorSpec {
  std::string name;
  tensor::DType type = tensor::DType::kF32;
  std::vector<int64_t> shape;
  bool skip = false;
};
using TensorEdit = std::function<void(TensorSpec&)>;

// Writer for `spec`: metadata + tensors in GGUF order. Matrices have entries of variance
// 1/cols (outputs keep unit scale); norms are 1 + w with |w| < 0.25 (as GGUF stores them).
inline gguf::Writer MakeTestModel(const TestModelSpec& s, const TensorEdit& edit = nullptr) {
  gguf::Writer w;
  w.SetString("general.architecture", "gemma3");
  w.SetUint32("gemma3.context_length", static_cast<uint32_t>(s.context_length));
  w.SetUint32("gemma3.embedding_length", static_cast<uint32_t>(s.hidden));
  w.SetUint32("gemma3.block_count", static_cast<uint32_t>(s.n_layers));
  w.SetUint32("gemma3.feed_forward_length", static_cast<uint32_t>(s.ffn));
  w.SetUint32("gemma3.attention.head_count", static_cast<uint32_t>(s.n_heads));
  w.SetUint32("gemma3.attention.head_count_kv", static_cast<uint32_t>(s.n_kv_heads));
  w.SetUint32("gemma3.attention.key_length", static_cast<uint32_t>(s.head_dim));
  w.SetUint32("gemma3.attention.value_length", static_cast<uint32_t>(s.head_dim));
  w.SetFloat32("gemma3.attention.layer_norm_rms_epsilon", s.rms_eps);
  w.SetFloat32("gemma3.rope.freq_base", static_cast<float>(s.rope_base));
  if (s.rope_base_swa) {
    w.SetFloat32("gemma3.rope.freq_base_swa", static_cast<float>(*s.rope_base_swa));
  }
  w.SetUint32("gemma3.attention.sliding_window", static_cast<uint32_t>(s.sliding_window));

  TestRng rng(s.seed);
  // is_norm: 1 + 0.25 u; otherwise u * sqrt(3 / cols) (variance 1/cols).
  auto add = [&](const std::string& name, std::vector<int64_t> shape, bool is_norm) {
    TensorSpec t{name, tensor::DType::kF32, std::move(shape), false};
    if (edit) edit(t);
    if (t.skip) return;
    int64_t count = 1;
    for (int64_t d : t.shape) count *= d;
    const int64_t cols = t.shape.empty() ? 1 : t.shape.back();
    std::vector<float> v(static_cast<size_t>(count));
    const float scale = std::sqrt(3.0f / static_cast<float>(cols));
    for (float& x : v) x = is_norm ? 1.0f + 0.25f * rng.Next() : rng.Next() * scale;
    std::vector<uint8_t> bytes;
    const tensor::DTypeInfo& info = tensor::Info(t.type);
    if (t.type == tensor::DType::kF32 || t.type == tensor::DType::kI32) {
      bytes = F32Bytes(v);
    } else if (t.type == tensor::DType::kF16 || t.type == tensor::DType::kBF16) {
      bytes.resize(v.size() * 2);
      for (size_t i = 0; i < v.size(); ++i) {
        const uint16_t h =
            t.type == tensor::DType::kF16 ? tensor::Fp32ToFp16(v[i]) : tensor::Fp32ToBf16(v[i]);
        std::memcpy(&bytes[2 * i], &h, 2);
      }
    } else {
      const int64_t row_bytes = cols / info.block_elems * info.block_bytes;
      const int64_t rows = count / cols;
      bytes.resize(static_cast<size_t>(rows * row_bytes));
      for (int64_t r = 0; r < rows; ++r) {
        FG_CHECK(kernels::QuantizeRow(t.type, &v[r * cols], &bytes[r * row_bytes], cols).ok());
      }
    }
    FG_CHECK(w.AddTensor(t.name, t.type, t.shape, std::move(bytes)).ok());
  };
  add("token_embd.weight", {s.vocab, s.hidden}, false);
  add("output_norm.weight", {s.hidden}, true);
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", {s.hidden}, true);
    add(p + "attn_q.weight", {s.n_heads * s.head_dim, s.hidden}, false);
    add(p + "attn_k.weight", {s.n_kv_heads * s.head_dim, s.hidden}, false);
    add(p + "attn_v.weight", {s.n_kv_heads * s.head_dim, s.hidden}, false);
    add(p + "attn_q_norm.weight", {s.head_dim}, true);
    add(p + "attn_k_norm.weight", {s.head_dim}, true);
    add(p + "attn_output.weight", {s.hidden, s.n_heads * s.head_dim}, false);
    add(p + "post_attention_norm.weight", {s.hidden}, true);
    add(p + "ffn_norm.weight", {s.hidden}, true);
    add(p + "ffn_gate.weight", {s.ffn, s.hidden}, false);
    add(p + "ffn_up.weight", {s.ffn, s.hidden}, false);
    add(p + "ffn_down.weight", {s.hidden, s.ffn}, false);
    add(p + "post_ffw_norm.weight", {s.hidden}, true);
  }
  return w;
}

}  // namespace fg::model::testing

#endif  // FGEMMA_MODEL_GEMMA3_TEST_MODEL_H_
