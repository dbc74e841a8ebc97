// A loaded Gemma 3 GGUF: the mapped file, its validated config and weight table, and the LoRA
// adapters its graphs apply. Immutable after Load, so any number of sessions (on any threads)
// can share one Model.
#ifndef FGEMMA_RUNTIME_MODEL_H_
#define FGEMMA_RUNTIME_MODEL_H_

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "fgemma/status.h"
#include "src/base/thread_pool.h"
#include "src/exec/executor.h"
#include "src/gguf/reader.h"
#include "src/kernels/matmul.h"
#include "src/model/gemma3/config.h"
#include "src/model/gemma3/lora.h"
#include "src/model/gemma3/weights.h"

namespace fg::runtime {

// A LoRA adapter file and its scale (llama.cpp's --lora FILE is scale 1, --lora-scaled FILE S).
struct LoraSpec {
  std::string path;
  float scale = 1.0f;
};

// A stored 2-D tensor as a matmul weight (rows = shape[0]); InvalidArgument when it is not 2-D
// or its type has no row layout.
StatusOr<kernels::WeightMatrix> WeightMatrixOf(const gguf::TensorInfo& t);

class Model {
 public:
  static StatusOr<std::unique_ptr<Model>> Load(const std::string& path,
                                               const std::vector<LoraSpec>& loras = {});
  // Takes an already opened file (tests build files in memory).
  static StatusOr<std::unique_ptr<Model>> FromFile(std::unique_ptr<gguf::File> file);
  // Another model over `base`'s mapped file (shared, not mapped again: its pages count once
  // in the resident set) with its own adapters `loras` (none of `base`'s). It shares `base`'s
  // prepacked panels too, those made before and after (PrepackPanels on either).
  static StatusOr<std::unique_ptr<Model>> Share(const Model& base,
                                                const std::vector<LoraSpec>& loras);
  // Adds an adapter (before any graph is built); the scale must be finite.
  Status AddLora(std::unique_ptr<model::LoraAdapter> adapter, float scale);
  Status AddLora(const LoraSpec& spec);

  const gguf::File& file() const { return *file_; }
  const model::Config& config() const { return config_; }
  const model::Weights& weights() const { return weights_; }
  // The adapters in the order they were added (weights().loras holds them with their scales).
  const std::vector<std::unique_ptr<model::LoraAdapter>>& adapters() const { return adapters_; }
  // The adapters apply after the catalog prefix only (LoraAdapter::after_prefix; all or none
  // of them).
  bool adapters_after_prefix() const { return !adapters_.empty() && adapters_[0]->after_prefix(); }
  // The adapters were trained for the tool prior too (LoraAdapter::channel; all or none of
  // them): call::ToolChannel runs the request's tokens with them.
  bool adapters_in_channel() const { return !adapters_.empty() && adapters_[0]->channel(); }
  // Resolves graph weights by GGUF tensor name (adapter tensors by model::LoraWeightName).
  exec::WeightResolver resolver() const;

  // Packs the panels (kernels::PackPanels) of every projection and of the LM head for the
  // active kernel set, once, so that matmuls of two tokens or more (batched decode steps,
  // forced runs, drafts, prefill chunks) run them instead of packing each panel again per call:
  // the same bits, with panel_bytes() more memory (the weights' types without panel kernels
  // pack nothing). The panels are the base weights', so the models of Share use them too.
  // Call before the graphs that should use them are built (executors made earlier keep
  // packing); not concurrently with building graphs on any model that shares them.
  Status PrepackPanels(ThreadPool* pool) const;
  size_t panel_bytes() const { return panels_->bytes; }

 private:
  std::shared_ptr<const gguf::File> file_;
  model::Config config_;
  model::Weights weights_;
  std::vector<std::unique_ptr<model::LoraAdapter>> adapters_;
  std::unordered_map<std::string, const gguf::TensorInfo*> lora_tensors_;
  // The adapters' tensors as the graph's low_rank op reads them (model::LoraTransposedName).
  struct F32Tensor {
    std::vector<int64_t> shape;
    std::vector<float> values;
  };
  std::unordered_map<std::string, F32Tensor> lora_f32_;
  // Prepacked panels by tensor name (PrepackPanels; made once, after Load, by a caller that
  // shares the model only afterwards). The base weights' panels, so one store serves every
  // model over the same file: Share's models hold the base's.
  struct Panels {
    std::unique_ptr<uint8_t[]> storage;
    const uint8_t* data = nullptr;  // storage aligned to 64 bytes
    const void* set = nullptr;      // kernels::PanelSetOf
  };
  struct PanelStore {
    std::unordered_map<std::string, Panels> panels;
    size_t bytes = 0;
  };
  std::shared_ptr<PanelStore> panels_ = std::make_shared<PanelStore>();
};

}  // namespace fg::runtime

#endif  // FGEMMA_RUNTIME_MODEL_H_
