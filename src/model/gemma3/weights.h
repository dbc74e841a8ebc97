// The weight table of a Gemma 3 GGUF: every tensor the model reads, found by its GGUF name,
// with shape and type checked against the Config once at load. Pointers refer into the
// gguf::File (which must outlive the Weights). Shapes are outermost-first: attn_q.weight is
// {n_heads * head_dim, hidden}, i.e. one row per output feature.
#ifndef FGEMMA_MODEL_GEMMA3_WEIGHTS_H_
#define FGEMMA_MODEL_GEMMA3_WEIGHTS_H_

#include <vector>

#include "fgemma/status.h"
#include "src/gguf/reader.h"
#include "src/model/gemma3/config.h"
#include "src/model/gemma3/lora.h"

namespace fg::model {

struct LayerWeights {
  const gguf::TensorInfo* attn_norm = nullptr;            // {hidden}
  const gguf::TensorInfo* attn_q = nullptr;               // {n_heads*head_dim, hidden}
  const gguf::TensorInfo* attn_k = nullptr;               // {n_kv*head_dim, hidden}
  const gguf::TensorInfo* attn_v = nullptr;               // {n_kv*head_dim, hidden}
  const gguf::TensorInfo* attn_q_norm = nullptr;          // {head_dim}
  const gguf::TensorInfo* attn_k_norm = nullptr;          // {head_dim}
  const gguf::TensorInfo* attn_output = nullptr;          // {hidden, n_heads*head_dim}
  const gguf::TensorInfo* post_attention_norm = nullptr;  // {hidden}
  const gguf::TensorInfo* ffn_norm = nullptr;             // {hidden}
  const gguf::TensorInfo* ffn_gate = nullptr;             // {ffn, hidden}
  const gguf::TensorInfo* ffn_up = nullptr;               // {ffn, hidden}
  const gguf::TensorInfo* ffn_down = nullptr;             // {hidden, ffn}
  const gguf::TensorInfo* post_ffw_norm = nullptr;        // {hidden}
};

struct Weights {
  const gguf::TensorInfo* token_embd = nullptr;   // {vocab, hidden}
  const gguf::TensorInfo* output_norm = nullptr;  // {hidden}
  // LM head {vocab, hidden}: `output.weight` when the file has one, else token_embd (tied, the
  // Gemma 3 norm). ref: llama.cpp src/llama-model.cpp, LLM_ARCH_GEMMA3 (TENSOR_DUPLICATED).
  const gguf::TensorInfo* output = nullptr;
  std::vector<LayerWeights> layers;
  // LoRA adapters the forward graph applies, in order (empty: the base model). Their tensors
  // are graph weights named by LoraWeightName(name, index in this list).
  std::vector<LoraUse> loras;
};

// True for the element types norm weights may have (F32, F16, BF16): they are read as f32
// vectors, so block-quantized norms are refused.
bool IsNormType(tensor::DType t);

// Finds and checks every tensor. Errors name the tensor: missing, wrong rank or shape,
// unsupported type, or a norm stored in a block-quantized type.
StatusOr<Weights> BindWeights(const gguf::File& file, const Config& config);

}  // namespace fg::model

#endif  // FGEMMA_MODEL_GEMMA3_WEIGHTS_H_
