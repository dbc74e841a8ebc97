// libFuzzer target for the LoRA adapter loader: arbitrary bytes parsed as a GGUF and validated
// as an adapter for a fixed tiny synthetic Gemma 3 (the seed corpus holds valid adapters for
// it, so mutations reach the pair, shape, type and value checks). A crash, sanitizer report or
// failed invariant is a bug; a non-OK Status with a message is the expected answer.
//   fuzz/corpus/model_lora: seeds (fgemma mkmodel --preset tiny --seed 1; fgemma mklora ...)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "src/gguf/reader.h"
#include "src/gguf_tools/synthetic.h"
#include "src/model/gemma3/lora.h"

namespace {

const fg::gguf::File& Base() {
  static std::vector<uint8_t>* bytes = [] {
    auto spec = fg::gguf::SyntheticPreset("tiny");
    if (!spec.ok()) std::abort();
    auto w = fg::gguf::BuildSyntheticGemma3(*spec);
    if (!w.ok()) std::abort();
    auto b = w->ToBytes();
    if (!b.ok()) std::abort();
    return new std::vector<uint8_t>(std::move(*b));
  }();
  static const fg::gguf::File* file = [] {
    auto f = fg::gguf::File::FromBytes(*bytes);
    if (!f.ok()) std::abort();
    return f->release();
  }();
  return *file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fg::gguf::File& base = Base();
  auto file = fg::gguf::File::FromBytes(std::span<const uint8_t>(data, size));
  if (!file.ok()) return 0;
  auto adapter = fg::model::LoraAdapter::FromFile(std::move(*file), base);
  if (!adapter.ok()) {
    if (adapter.status().message().empty()) std::abort();
    return 0;
  }
  // A valid adapter: every pair names a base tensor and fits it.
  for (const fg::model::LoraPair& p : (*adapter)->pairs()) {
    if (base.FindTensor(p.base) == nullptr || p.rank <= 0) std::abort();
    if ((*adapter)->Find(p.base) != &p) std::abort();
    (void)(*adapter)->Scale(p, 1.0f);
  }
  return 0;
}
