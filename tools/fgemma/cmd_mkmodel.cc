// fgemma mkmodel -o FILE [--preset tiny|small|270m] [shape flags] [--type T]
//   [--tensor-type PATTERN=TYPE,...] [--seed N]: writes a deterministic random Gemma 3 GGUF.
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "src/gguf/reader.h"
#include "src/gguf_tools/synthetic.h"
#include "src/model/gemma3/config.h"
#include "tools/fgemma/commands.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {

namespace {

StatusOr<tensor::DType> ParseType(const std::string& s, const std::string& flag) {
  auto t = tensor::ParseDType(s);
  if (!t) return InvalidArgumentError(flag + ": unknown tensor type '" + s + "'");
  if (!tensor::Info(*t).supported) {
    return InvalidArgumentError(flag + ": type " + std::string(tensor::DTypeName(*t)) +
                                " has no kernels in fgemma");
  }
  return *t;
}

}  // namespace

int CmdMkmodel(int argc, char** argv) {
  std::string out, preset = "tiny", type, tensor_types;
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0,
          window = 0, context = 0, seed = 1;
  bool rope_swa = false;
  FlagParser flags("mkmodel",
                   "Write a deterministic random Gemma 3 GGUF (real metadata keys, tensor names "
                   "and tokenizer layout) for tests and benchmarks.");
  flags.AddString("-o,--output", &out, "FILE", "Output GGUF file (written atomically)");
  flags.AddString("--preset", &preset, "NAME", "tiny (default), small or 270m");
  flags.AddInt("--layers", &layers, "N", "Number of blocks");
  flags.AddInt("--hidden", &hidden, "N", "Embedding width");
  flags.AddInt("--heads", &heads, "N", "Attention heads");
  flags.AddInt("--kv-heads", &kv_heads, "N", "Key/value heads");
  flags.AddInt("--head-dim", &head_dim, "N", "Width of one head");
  flags.AddInt("--ffn", &ffn, "N", "Feed-forward width");
  flags.AddInt("--vocab", &vocab, "N",
               "Vocabulary size (>= " + std::to_string(gguf::MinSyntheticVocab()) + ")");
  flags.AddInt("--window", &window, "N", "Sliding window of the local layers");
  flags.AddInt("--context", &context, "N", "Context length");
  flags.AddBool("--rope-swa", &rope_swa, "Also write gemma3.rope.freq_base_swa (10000)");
  flags.AddString("--type", &type, "TYPE", "Type of every weight matrix (f32, f16, q8_0, ...)");
  flags.AddString("--tensor-type", &tensor_types, "PAT=TYPE,...",
                  "Per-tensor types; the first pattern that is a substring of the name wins");
  flags.AddInt("--seed", &seed, "N", "PRNG seed (same seed, same bytes)");
  flags.AddNote("Norm weights are always F32. Layer l is global iff l % 6 == 5, as in Gemma 3.");
  if (auto rc = flags.Parse(argc, argv)) return *rc;
  if (out.empty()) return ReportError("mkmodel", InvalidArgumentError("-o FILE is required"), true);

  auto spec_or = gguf::SyntheticPreset(preset);
  if (!spec_or.ok()) return ReportError("mkmodel", spec_or.status(), true);
  gguf::SyntheticSpec spec = *spec_or;
  struct IntFlag {
    const char* name;
    int64_t value;
    int64_t* field;
  };
  for (const IntFlag& f : {IntFlag{"--layers", layers, &spec.layers},
                           IntFlag{"--hidden", hidden, &spec.hidden},
                           IntFlag{"--heads", heads, &spec.heads},
                           IntFlag{"--kv-heads", kv_heads, &spec.kv_heads},
                           IntFlag{"--head-dim", head_dim, &spec.head_dim},
                           IntFlag{"--ffn", ffn, &spec.ffn}, IntFlag{"--vocab", vocab, &spec.vocab},
                           IntFlag{"--window", window, &spec.window},
                           IntFlag{"--context", context, &spec.context}}) {
    if (!flags.WasSet(f.name)) continue;
    if (f.value < 1) {
      return ReportError("mkmodel", InvalidArgumentError(std::string(f.name) + " must be >= 1"),
                         true);
    }
    *f.field = f.value;
  }
  if (flags.WasSet("--seed")) {
    if (seed < 0) return ReportError("mkmodel", InvalidArgumentError("--seed must be >= 0"), true);
    spec.seed = static_cast<uint64_t>(seed);
  }
  spec.write_rope_base_local = rope_swa;
  if (!type.empty()) {
    auto t = ParseType(type, "--type");
    if (!t.ok()) return ReportError("mkmodel", t.status(), true);
    spec.default_type = *t;
    spec.type_overrides.clear();  // an explicit --type replaces the preset's mix
    spec.file_type = -1;
  }
  if (!tensor_types.empty()) {
    std::vector<std::pair<std::string, tensor::DType>> overrides;
    std::stringstream ss(tensor_types);
    std::string item;
    while (std::getline(ss, item, ',')) {
      size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
        return ReportError(
            "mkmodel",
            InvalidArgumentError("--tensor-type expects PATTERN=TYPE, got '" + item + "'"), true);
      }
      auto t = ParseType(item.substr(eq + 1), "--tensor-type");
      if (!t.ok()) return ReportError("mkmodel", t.status(), true);
      overrides.push_back({item.substr(0, eq), *t});
    }
    // Explicit patterns take precedence over the preset's.
    overrides.insert(overrides.end(), spec.type_overrides.begin(), spec.type_overrides.end());
    spec.type_overrides = std::move(overrides);
    spec.file_type = -1;
  }
  if (preset == "270m") {
    spec.progress = [](size_t k, size_t n, const std::string& name) {
      std::fprintf(stderr, "\rmkmodel: [%zu/%zu] %-40s", k + 1, n, name.c_str());
      if (k + 1 == n) std::fprintf(stderr, "\n");
      std::fflush(stderr);
    };
  }
  {
    // What the model loader would refuse is refused here, by the loader's own rules (its
    // metadata checks), before anything is written: a usage error naming the rule.
    gguf::SyntheticSpec meta = spec;
    meta.metadata_only = true;
    meta.progress = nullptr;
    auto mw = gguf::BuildSyntheticGemma3(meta);
    if (!mw.ok()) {
      return ReportError("mkmodel", mw.status(),
                         mw.status().code() == StatusCode::kInvalidArgument);
    }
    auto bytes = mw->ToBytes();
    if (!bytes.ok()) return ReportError("mkmodel", bytes.status());
    auto file = gguf::File::FromBytes(*bytes);
    if (!file.ok()) return ReportError("mkmodel", file.status());
    if (auto c = model::ConfigFromGguf(**file); !c.ok()) {
      return ReportError("mkmodel",
                         InvalidArgumentError("fgemma would not load this model: " +
                                              c.status().message()),
                         /*usage=*/true);
    }
  }
  auto w = gguf::BuildSyntheticGemma3(spec);
  if (!w.ok()) {
    return ReportError("mkmodel", w.status(), w.status().code() == StatusCode::kInvalidArgument);
  }
  Status s = w->WriteFile(out);
  if (!s.ok()) return ReportError("mkmodel", s);
  std::fprintf(stderr, "mkmodel: wrote %s (%zu tensors, preset %s, seed %llu)\n", out.c_str(),
               w->num_tensors(), preset.c_str(), static_cast<unsigned long long>(spec.seed));
  return kExitOk;
}

}  // namespace fg::cli
