// A loaded Gemma 3 GGUF: the mapped file, its validated config and weight table. Immutable
// after Load, so any number of sessions (on any threads) can share one Model.
#ifndef FGEMMA_RUNTIME_MODEL_H_
#define FGEMMA_RUNTIME_MODEL_H_

#include <memory>
#include <string>

#include "fgemma/status.h"
#include "src/exec/executor.h"
#include "src/gguf/reader.h"
#include "src/model/gemma3/config.h"
#include "src/model/gemma3/weights.h"

namespace fg::runtime {

class Model {
 public:
  static StatusOr<std::unique_ptr<Model>> Load(const std::string& path);
  // Takes an already opened file (tests build files in memory).
  static StatusOr<std::unique_ptr<Model>> FromFile(std::unique_ptr<gguf::File> file);

  const gguf::File& file() const { return *file_; }
  const model::Config& config() const { return config_; }
  const model::Weights& weights() const { return weights_; }
  // Resolves graph weights by GGUF tensor name.
  exec::WeightResolver resolver() const;

 private:
  std::unique_ptr<gguf::File> file_;
  model::Config config_;
  model::Weights weights_;
};

}  // namespace fg::runtime

#endif  // FGEMMA_RUNTIME_MODEL_H_
