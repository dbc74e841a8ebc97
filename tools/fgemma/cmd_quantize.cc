// fgemma quantize: requantize a GGUF's weights to another type (like llama-quantize).
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "src/base/thread_pool.h"
#include "src/gguf/reader.h"
#include "src/gguf_tools/requantize.h"
#include "src/kernels/quant.h"
#include "tools/fgemma/commands.h"
#include "tools/fgemma/common_flags.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {

int CmdQuantize(int argc, char** argv) {
  std::string out_path, type_name, overrides_text;
  bool quiet = false;
  FlagParser p("quantize",
               "Requantize every 2-D weight of a GGUF to another type; norms stay as they are.");
  CommonFlags common;
  common.Register(p, CommonFlags::kModelRequired);
  p.AddString("-o,--output", &out_path, "FILE", "Output GGUF (required; written atomically)");
  p.AddString("--type", &type_name, "TYPE",
              "Target type: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k iq4_nl (required)");
  p.AddString("--tensor-type", &overrides_text, "PAT=TYPE,..",
              "Per-tensor types: the first PAT that is a substring of a name wins "
              "(e.g. token_embd=q8_0,ffn_down=q6_k)");
  common.Register(p, CommonFlags::kThreads);
  p.AddBool("-q,--quiet", &quiet, "No progress on stderr");
  p.AddNote("Rows that a K-quant block does not divide (640 for Gemma 3 270M) fall back as in "
            "llama-quantize: Q4_K->Q5_0, Q5_K->Q5_1, Q6_K->Q8_0.");
  if (auto rc = p.Parse(argc, argv)) return *rc;
  auto usage = [&](const std::string& m) { return ReportError("quantize", InvalidArgumentError(m), true); };
  if (Status s = common.Check(); !s.ok()) return usage(s.message());
  if (out_path.empty()) return usage("missing -o FILE");
  if (type_name.empty()) return usage("missing --type TYPE");
  gguf::RequantizeSpec spec;
  auto parse_type = [](const std::string& s) -> std::optional<tensor::DType> {
    auto t = tensor::ParseDType(s);
    if (!t || !tensor::Info(*t).supported) return std::nullopt;
    return t;
  };
  auto t = parse_type(type_name);
  if (!t) return usage("unknown or unsupported --type '" + type_name + "'");
  spec.type = *t;
  std::stringstream ss(overrides_text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) return usage("--tensor-type expects PATTERN=TYPE, got '" + item + "'");
    auto ot = parse_type(item.substr(eq + 1));
    if (!ot) return usage("unknown or unsupported type in --tensor-type '" + item + "'");
    spec.overrides.emplace_back(item.substr(0, eq), *ot);
  }
  auto in = gguf::File::Open(*common.ModelPath());
  if (!in.ok()) return ReportError("quantize", in.status());
  ThreadPool pool(common.Threads());
  spec.pool = &pool;
  size_t changed = 0;
  if (!quiet) {
    spec.progress = [&](size_t i, size_t n, const std::string& name, tensor::DType from,
                        tensor::DType to) {
      if (from != to) ++changed;
      std::fprintf(stderr, "[%3zu/%zu] %-36s %s -> %s\n", i + 1, n, name.c_str(),
                   std::string(tensor::DTypeName(from)).c_str(),
                   std::string(tensor::DTypeName(to)).c_str());
    };
  }
  auto w = gguf::BuildRequantized(**in, spec);
  if (!w.ok()) return ReportError("quantize", w.status());
  if (Status s = w->WriteFile(out_path); !s.ok()) return ReportError("quantize", s);
  if (!quiet) std::fprintf(stderr, "wrote %s (%zu tensors requantized)\n", out_path.c_str(), changed);
  return kExitOk;
}

}  // namespace fg::cli
