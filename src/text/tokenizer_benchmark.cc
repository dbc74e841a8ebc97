// Tokenizer speed on the real vocabulary (needs FGEMMA_MODEL): the ~1200-token golden text and
// tokenizer construction. Run: FGEMMA_MODEL=... build/fg_text_benchmark
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "src/gguf/reader.h"
#include "src/text/tokenizer.h"

namespace fg::text {
namespace {

struct Fixture {
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Tokenizer> tok;
  std::string long_text;
  std::string error;
};

const Fixture& Get() {
  static Fixture* f = [] {
    auto* f = new Fixture;
    const char* path = std::getenv("FGEMMA_MODEL");
    if (path == nullptr) {
      f->error = "FGEMMA_MODEL is not set";
      return f;
    }
    auto file = gguf::File::Open(path);
    if (!file.ok()) {
      f->error = file.status().ToString();
      return f;
    }
    f->file = std::move(*file);
    auto tok = Tokenizer::FromGguf(*f->file);
    if (!tok.ok()) {
      f->error = tok.status().ToString();
      return f;
    }
    f->tok = std::move(*tok);
    // The long golden text, if the source tree is at hand; else a synthetic paragraph mix.
    // The source root from this file's path (CMake passes absolute paths).
    std::string root = __FILE__;
    root = root.substr(0, root.rfind("src/text/"));
    std::ifstream in(root + "tests/data/tokenizer_goldens.json");
    if (in.good()) {
      const nlohmann::json goldens = nlohmann::json::parse(in);
      for (const auto& c : goldens["cases"]) {
        if (c["name"] == "long_1200") f->long_text = c["text"].get<std::string>();
      }
    }
    if (f->long_text.empty()) {
      for (int i = 0; i < 60; ++i) {
        f->long_text += "The quick brown fox jumps over the lazy dog; {\"k\": [1, 2, 3]}\n";
      }
    }
    return f;
  }();
  return *f;
}

void BM_EncodeLongText(benchmark::State& state) {
  const Fixture& f = Get();
  if (!f.tok) {
    state.SkipWithError(f.error.c_str());
    return;
  }
  size_t n = 0;
  for (auto _ : state) {
    auto ids = f.tok->Encode(f.long_text, true, true);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["tokens"] = static_cast<double>(n);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(n) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EncodeLongText)->Unit(benchmark::kMicrosecond);

void BM_CreateTokenizer(benchmark::State& state) {
  const Fixture& f = Get();
  if (!f.tok) {
    state.SkipWithError(f.error.c_str());
    return;
  }
  for (auto _ : state) {
    auto tok = Tokenizer::FromGguf(*f.file);
    benchmark::DoNotOptimize(tok.ok());
  }
}
BENCHMARK(BM_CreateTokenizer)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fg::text
