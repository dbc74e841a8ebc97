// LoRA adapters in llama.cpp's GGUF format (docs/adapters.md): loaded, validated against the
// base model, and applied by the forward graph as y = W x + s B (A x).
//
// An adapter file holds general.type "adapter", general.architecture = the base's,
// adapter.type "lora", adapter.lora.alpha (f32; absent = 0) and, per adapted matrix W, the
// tensors "<W's name>.lora_a" {r, n_in} and "<W's name>.lora_b" {n_out, r} (outermost-first;
// ggml's ne are [n_in, r] and [r, n_out]). token_embd's pair is {vocab, r} and {hidden, r}: A's
// row of each token is looked up and B applied to it (llama.cpp's build_inp_embd). Pairs of
// "*_norm.weight" are skipped, as llama.cpp does. ref: llama.cpp src/llama-adapter.cpp.
#ifndef FGEMMA_MODEL_GEMMA3_LORA_H_
#define FGEMMA_MODEL_GEMMA3_LORA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fgemma/status.h"
#include "src/gguf/reader.h"
#include "src/gguf_tools/requantize.h"
#include "src/gguf/writer.h"

namespace fg::model {

// The projections a LoRA may adapt, by the part of the GGUF name after "blk.N." (and the
// token embedding, as the input lookup only: the tied LM head keeps the base weights).
inline constexpr const char* kLoraModules[] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                               "ffn_gate", "ffn_up", "ffn_down"};

struct LoraPair {
  std::string base;                   // the adapted tensor's name, "blk.3.attn_q.weight"
  const gguf::TensorInfo* a = nullptr;  // {r, n_in}; token_embd: {vocab, r}
  const gguf::TensorInfo* b = nullptr;  // {n_out, r}; token_embd: {hidden, r}
  int64_t rank = 0;
};

class LoraAdapter {
 public:
  // Opens and validates `path` against the base model's file. Errors (InvalidArgument, naming
  // the file and the tensor): not an adapter, another architecture, not a LoRA, non-finite
  // alpha, a tensor that is neither .lora_a nor .lora_b, a pair missing a half, an unknown or
  // non-adaptable base tensor, shapes that do not match the base (both shapes named), a type
  // other than F32, F16, BF16 or Q8_0, non-finite values.
  static StatusOr<std::unique_ptr<LoraAdapter>> Open(const std::string& path,
                                                     const gguf::File& base);
  static StatusOr<std::unique_ptr<LoraAdapter>> FromFile(std::unique_ptr<gguf::File> file,
                                                         const gguf::File& base,
                                                         std::string path = "<memory>");

  const std::string& path() const { return path_; }
  const gguf::File& file() const { return *file_; }
  float alpha() const { return alpha_; }
  // Trained by `fgemma tune` with the base model's catalog prefix (metadata
  // fgemma.lora.prefix = "base"): applied from the end of the catalog prefix on, not before.
  bool after_prefix() const { return after_prefix_; }
  // Trained by `fgemma tune --objective both|channel` to predict a request after a tool's
  // channel text (metadata fgemma.lora.channel = "adapted"): the tool prior then runs the
  // request's tokens with the adapter (call::ToolChannel); without it, with the base model.
  bool channel() const { return channel_; }
  // Sorted by base name.
  const std::vector<LoraPair>& pairs() const { return pairs_; }
  const LoraPair* Find(std::string_view base) const;
  // s = user_scale * alpha / rank, or user_scale when alpha is 0 (llama.cpp's get_scale).
  float Scale(const LoraPair& p, float user_scale) const;

 private:
  LoraAdapter() = default;
  std::string path_;
  std::unique_ptr<gguf::File> file_;
  float alpha_ = 0.0f;
  bool after_prefix_ = false;
  bool channel_ = false;
  std::vector<LoraPair> pairs_;
};

// An adapter applied with a user scale (--lora-scaled FILE S; --lora FILE is scale 1). The
// adapter must outlive the graphs built with it.
struct LoraUse {
  const LoraAdapter* adapter = nullptr;
  float scale = 1.0f;
};

// One tensor of an adapter to write: its full name ("blk.0.attn_q.weight.lora_a"),
// outermost-first shape and values (row-major), stored as `type`.
struct LoraTensorValues {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
  tensor::DType type = tensor::DType::kF32;
};

// A writer for an adapter in llama.cpp's format: the metadata (general.type "adapter",
// general.architecture `arch`, adapter.type "lora", adapter.lora.alpha) and the tensors, each
// quantized to its type (Q8_0 rows must be multiples of 32).
StatusOr<gguf::Writer> LoraWriter(std::string_view arch, float alpha,
                                  const std::vector<LoraTensorValues>& tensors);

// A random adapter for `base` (tests and benchmarks): rank `rank` pairs for `modules` (names in
// kLoraModules, or "token_embd") of every layer, values uniform in +-`amplitude` from `seed`.
// A row that does not fit `type`'s blocks (Q8_0 and rank 16) is stored as F16, as llama.cpp's
// converter does.
struct SyntheticLoraSpec {
  int64_t rank = 8;
  float alpha = 16.0f;
  std::vector<std::string> modules = {"attn_q", "attn_k", "attn_v", "attn_output",
                                      "ffn_gate", "ffn_up", "ffn_down"};
  tensor::DType type = tensor::DType::kF32;
  float amplitude = 0.05f;
  uint64_t seed = 1;
};
StatusOr<gguf::Writer> SyntheticLora(const gguf::File& base, const SyntheticLoraSpec& spec);

// The base model with the adapters folded into its weights (llama-export-lora): every adapted
// tensor is dequantized, W += s B A added row by row, and quantized again to its own type (or
// per `spec`: keep_types false and type/overrides as for `fgemma quantize`); the others are
// copied byte for byte. A token_embd adapter is refused when the LM head is tied to token_embd
// (merging would change the head, which the runtime leaves as it is). `base` and the adapters
// must outlive the writer.
StatusOr<gguf::Writer> BuildMerged(const gguf::File& base, const std::vector<LoraUse>& loras,
                                   gguf::RequantizeSpec spec);

// The value of one of fgemma's "base"|"adapted" adapter keys (fgemma.lora.prefix,
// fgemma.lora.channel): "base" or "adapted", `absent` when the key is missing; InvalidArgument
// for anything else. LoraAdapter reads its after_prefix() and channel() with it.
StatusOr<std::string_view> LoraMode(const gguf::File& f, std::string_view key,
                                    std::string_view absent);

// The values of an adapter tensor as f32, row-major, transposed when asked ({cols, rows}).
StatusOr<std::vector<float>> LoraValues(const gguf::TensorInfo& t, bool transposed);

// The graph weight name of the f32 transpose of adapter `index`'s lora_b `name` ({r, n_out}),
// the form the graph's low_rank op reads; runtime::Model makes it when an adapter is added.
std::string LoraTransposedName(std::string_view name, size_t index);

// The graph weight name of adapter `index`'s tensor `name`: the name itself for the first
// adapter, "<name>@<index>" after it (two adapters may adapt the same matrix).
std::string LoraWeightName(std::string_view name, size_t index);

}  // namespace fg::model

#endif  // FGEMMA_MODEL_GEMMA3_LORA_H_
