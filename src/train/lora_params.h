// The trainable LoRA of `fgemma tune`: per adapted projection W [N, K], A [r, K] and B^T [r, N]
// in f32, as the training graph reads them (model::LoraWeightName / LoraTransposedName of
// adapter 0), plus the model::LoraAdapter that gives the graph their names and shapes.
//
// Initial values as PEFT's: A uniform in +-1/sqrt(K) (kaiming_uniform with a = sqrt(5)), B = 0,
// so the adapted model starts as the base model. Random numbers come from SplitMix64 over the
// seed: the same seed gives the same bytes on every machine.
#ifndef FGEMMA_TRAIN_LORA_PARAMS_H_
#define FGEMMA_TRAIN_LORA_PARAMS_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fgemma/status.h"
#include "src/exec/executor.h"
#include "src/gguf/reader.h"
#include "src/gguf/writer.h"
#include "src/model/gemma3/lora.h"

namespace fg::train {

struct LoraTrainSpec {
  int64_t rank = 16;
  float alpha = 32.0f;
  // Names from model::kLoraModules (attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up,
  // ffn_down).
  std::vector<std::string> modules = {"attn_q", "attn_k", "attn_v", "attn_output",
                                      "ffn_gate", "ffn_up", "ffn_down"};
  uint64_t seed = 1;
};

// "attn_o" is accepted for "attn_output"; anything else not in kLoraModules is an error.
StatusOr<std::vector<std::string>> ParseModules(const std::string& csv);

class LoraParams {
 public:
  struct Tensor {
    std::string name;  // the graph weight name
    std::vector<int64_t> shape;
    std::vector<float> values;
    bool is_b = false;  // B^T (else A)
  };

  static StatusOr<std::unique_ptr<LoraParams>> Create(const gguf::File& base,
                                                      const LoraTrainSpec& spec);
  // An adapter file's values (a checkpoint or an adapter to go on training); F32/F16/BF16/Q8_0.
  static StatusOr<std::unique_ptr<LoraParams>> FromAdapter(const gguf::File& base,
                                                           const std::string& path);

  const model::LoraAdapter& adapter() const { return *adapter_; }
  std::vector<Tensor>& tensors() { return tensors_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  int64_t parameters() const;
  // Serves the tensors by graph name (the values are read in place: updates are seen by the
  // next run), else asks `next`.
  exec::WeightResolver Resolver(exec::WeightResolver next) const;
  // The adapter in llama.cpp's format, f32 (B = the stored B^T transposed back); the caller
  // may add metadata before writing. `values` (one per tensor, in tensors() order) replaces the
  // current values, e.g. a kept best epoch's. With `averaged` (other adapters' values of the
  // same shapes, each in tensors() order): the average of those and this one, exactly: the N
  // adapters' A stacked and their B side by side in that order, rank N x r at the same alpha,
  // so that its product (alpha / (N r)) sum_i B_i A_i is the mean of theirs.
  StatusOr<gguf::Writer> ToWriter(
      const std::vector<std::vector<float>>* values = nullptr,
      std::span<const std::vector<std::vector<float>>> averaged = {}) const;

 private:
  LoraParams() = default;
  static StatusOr<std::unique_ptr<LoraParams>> Build(const gguf::File& base,
                                                     std::vector<uint8_t> adapter_bytes);
  std::vector<uint8_t> adapter_bytes_;  // the adapter file the LoraAdapter reads
  std::unique_ptr<model::LoraAdapter> adapter_;
  std::vector<Tensor> tensors_;
  std::string arch_;
};

}  // namespace fg::train

#endif  // FGEMMA_TRAIN_LORA_PARAMS_H_
