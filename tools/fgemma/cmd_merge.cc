// fgemma merge: fold LoRA adapters into a model's weights (like llama.cpp's llama-export-lora).
// fgemma mklora: a deterministic random LoRA adapter for a model (tests, benchmarks).
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "src/base/thread_pool.h"
#include "src/gguf/reader.h"
#include "src/gguf_tools/requantize.h"
#include "src/model/gemma3/lora.h"
#include "src/runtime/model.h"
#include "tools/fgemma/commands.h"
#include "tools/fgemma/common_flags.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {

int CmdMerge(int argc, char** argv) {
  std::string out_path, type_name;
  bool quiet = false;
  FlagParser p("merge",
               "Write a model with LoRA adapters folded into its weights: each adapted tensor is "
               "dequantized, W += s B A added, and quantized again to its own type (or --type).");
  CommonFlags common;
  common.Register(p, CommonFlags::kModelRequired, "Base GGUF (required)");
  p.AddString("-o,--output", &out_path, "FILE", "Output GGUF (required; written atomically)");
  common.Register(p, CommonFlags::kLora);
  p.AddString("--type", &type_name, "TYPE",
              "Requantize every 2-D weight to TYPE as `fgemma quantize` does (default: keep the "
              "base's types)");
  common.Register(p, CommonFlags::kThreads);
  p.AddBool("-q,--quiet", &quiet, "No progress on stderr");
  p.AddNote("The merged model gives what the base model with the same --lora flags gives, up to "
            "the requantization of the adapted tensors (f32 or --type f32: the same to float "
            "rounding). Exit codes: 0 ok, 1 runtime error, 2 usage error.");
  if (auto rc = p.Parse(argc, argv)) return *rc;
  auto usage = [&](const std::string& m) {
    return ReportError("merge", InvalidArgumentError(m), true);
  };
  if (Status s = common.Check(); !s.ok()) return usage(s.message());
  if (out_path.empty()) return usage("missing -o FILE");
  if (common.Loras().empty()) return usage("no adapter given (--lora FILE or --lora-scaled FILE S)");
  gguf::RequantizeSpec spec;
  spec.keep_types = type_name.empty();
  if (!type_name.empty()) {
    auto t = tensor::ParseDType(type_name);
    if (!t || !tensor::Info(*t).supported) return usage("unknown or unsupported --type '" + type_name + "'");
    spec.type = *t;
  }
  auto model = runtime::Model::Load(*common.ModelPath(), common.Loras());
  if (!model.ok()) return ReportError("merge", model.status());
  ThreadPool pool(common.Threads());
  spec.pool = &pool;
  size_t rewritten = 0;
  spec.progress = [&](size_t i, size_t n, const std::string& name, tensor::DType from,
                      tensor::DType to) {
    bool adapted = false;
    for (const model::LoraUse& u : (*model)->weights().loras) {
      adapted |= u.scale != 0.0f && u.adapter->Find(name) != nullptr;
    }
    if (adapted || from != to) {
      ++rewritten;
      if (!quiet) {
        std::fprintf(stderr, "[%3zu/%zu] %-36s %s -> %s\n", i + 1, n, name.c_str(),
                     std::string(tensor::DTypeName(from)).c_str(),
                     std::string(tensor::DTypeName(to)).c_str());
      }
    }
  };
  auto w = model::BuildMerged((*model)->file(), (*model)->weights().loras, spec);
  if (!w.ok()) return ReportError("merge", w.status());
  if (Status s = w->WriteFile(out_path); !s.ok()) return ReportError("merge", s);
  if (!quiet) std::fprintf(stderr, "wrote %s (%zu tensors rewritten)\n", out_path.c_str(), rewritten);
  return kExitOk;
}

int CmdMklora(int argc, char** argv) {
  std::string out_path, type_name = "f32", modules_text;
  int64_t rank = 16, seed = 1;
  double alpha = 32, amplitude = 0.05;
  FlagParser p("mklora", "Write a deterministic random LoRA adapter for a model (tests, benchmarks).");
  CommonFlags common;
  common.Register(p, CommonFlags::kModelRequired, "Base GGUF the adapter is for (required)");
  p.AddString("-o,--output", &out_path, "FILE", "Output adapter GGUF (required)");
  p.AddInt("--rank", &rank, "R", "Rank (default 16)");
  p.AddDouble("--alpha", &alpha, "A", "adapter.lora.alpha (default 32; 0: scale = user scale)");
  p.AddString("--type", &type_name, "TYPE", "f32, f16, bf16 or q8_0 (default f32)");
  p.AddString("--modules", &modules_text, "M,..",
              "Matrices to adapt: attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down "
              "(default: all seven), token_embd");
  p.AddDouble("--amplitude", &amplitude, "X", "Values uniform in [-X, X] (default 0.05)");
  p.AddInt("--seed", &seed, "S", "Random seed (default 1)");
  if (auto rc = p.Parse(argc, argv)) return *rc;
  auto usage = [&](const std::string& m) {
    return ReportError("mklora", InvalidArgumentError(m), true);
  };
  if (Status s = common.Check(); !s.ok()) return usage(s.message());
  if (out_path.empty()) return usage("missing -o FILE");
  if (rank < 1 || rank > 4096) return usage("--rank must be in [1, 4096]");
  model::SyntheticLoraSpec spec;
  spec.rank = rank;
  spec.alpha = static_cast<float>(alpha);
  spec.amplitude = static_cast<float>(amplitude);
  spec.seed = static_cast<uint64_t>(seed);
  auto t = tensor::ParseDType(type_name);
  if (!t || (*t != tensor::DType::kF32 && *t != tensor::DType::kF16 &&
             *t != tensor::DType::kBF16 && *t != tensor::DType::kQ8_0)) {
    return usage("--type must be f32, f16, bf16 or q8_0, got '" + type_name + "'");
  }
  spec.type = *t;
  if (!modules_text.empty()) {
    spec.modules.clear();
    std::stringstream ss(modules_text);
    std::string m;
    while (std::getline(ss, m, ',')) {
      if (m.empty()) continue;
      bool known = m == "token_embd";
      for (const char* k : model::kLoraModules) known |= m == k;
      if (!known) return usage("unknown module '" + m + "' in --modules");
      spec.modules.push_back(m);
    }
  }
  auto base = gguf::File::Open(*common.ModelPath());
  if (!base.ok()) return ReportError("mklora", base.status());
  auto w = model::SyntheticLora(**base, spec);
  if (!w.ok()) return ReportError("mklora", w.status());
  if (Status s = w->WriteFile(out_path); !s.ok()) return ReportError("mklora", s);
  return kExitOk;
}

}  // namespace fg::cli
