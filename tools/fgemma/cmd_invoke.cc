// fgemma invoke: run one contract function (docs/contract.md) on the host, with iree-run-module's
// input and output syntax, so the same command line runs the host oracle and a compiled module.
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "src/base/file_io.h"
#include "src/base/thread_pool.h"
#include "src/export/contract.h"
#include "src/export/host_invoke.h"
#include "src/export/tensor_io.h"
#include "src/runtime/model.h"
#include "tools/fgemma/commands.h"
#include "tools/fgemma/common_flags.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {

namespace {

std::string FunctionList() {
  std::string s;
  for (exporter::Function f : exporter::kAllFunctions) {
    s += (s.empty() ? "" : ", ") + std::string(exporter::FunctionName(f));
  }
  return s;
}

// An --input naming a file: its errors are runtime errors (exit 1), spelling errors usage (2).
bool NamesFile(const std::string& spec) {
  return (!spec.empty() && spec[0] == '@') || spec.find("=@") != std::string::npos;
}

}  // namespace

int CmdInvoke(int argc, char** argv) {
  std::string function;
  std::vector<std::string> inputs, outputs;
  int64_t seq = 0, chunk = 0;
  bool emb = false, stats = false, reference = false;
  FlagParser p("invoke",
               "Run one function of the compiled-graph contract (gemma, gemma_at, gemma_prefill,\n"
               "gemma_prefill_at, gemma_with_past, gemma_prefill_with_past) on the host CPU\n"
               "executor: the oracle an IREE-compiled module is compared with. Inputs and\n"
               "outputs are spelled as iree-run-module spells them.");
  CommonFlags common;
  common.Register(p, CommonFlags::kModel);
  p.AddString("--function", &function, "NAME", "Function to run (module.NAME accepted)");
  p.AddInt("--seq", &seq, "S",
           "Sequence capacity S of the fixed-length functions (default: from the tokens input)");
  p.AddInt("--chunk", &chunk, "C",
           "Chunk size C of gemma_prefill_with_past (default: from the tokens input)");
  p.AddBool("--emb-input", &emb,
            "The embeddings-input variant: an `emb` argument after tokens/token");
  p.AddStringList("--input", &inputs, "SPEC",
                  "One argument, in order: SHAPExTYPE=VALUES (1x24xi32=2 105 ...; one value fills "
                  "the tensor), SHAPExTYPE=@raw.bin (little-endian), or @file.npy");
  p.AddStringList("--output", &outputs, "@FILE.npy",
                  "Write each result, in order, to a .npy file (give one per result); without "
                  "--output results are printed as iree-run-module prints them");
  p.AddBool("--stats", &stats,
            "Print the graph's largest value and the executor's scratch (arena) bytes to stderr");
  common.Register(p, CommonFlags::kThreads);
  p.AddBool("--reference-kernels", &reference,
            "Run the scalar reference kernels (slow; debugging)");
  common.Register(p, CommonFlags::kLora);
  p.AddNote(
      "Past lengths P of the with-past functions are taken from the K/V shapes (sliding and\n"
      "global layers separately); masks must be 1 x nHeads x C x (P + C).\n"
      "Example: fgemma invoke --function gemma_at --input=1x4xi32=2 105 2364 107 \\\n"
      "           --input=1x4xf32=0 0 0 1\n"
      "Exit codes: 0 ok; 2 usage (flags, unknown function, an --input that cannot be parsed,\n"
      "wrong number, shape or type of inputs); 1 runtime (unreadable or malformed files,\n"
      "token ids outside the vocabulary, out of memory).");
  if (auto rc = p.Parse(argc, argv)) return *rc;
  auto usage = [&](const std::string& m) {
    return ReportError("invoke", InvalidArgumentError(m), true);
  };
  if (Status s = common.Check(); !s.ok()) return usage(s.message());
  if (function.empty()) return usage("missing --function NAME (one of " + FunctionList() + ")");
  auto fn = exporter::ParseFunctionName(function);
  if (!fn)
    return usage("unknown function '" + function + "' (expected one of " + FunctionList() + ")");
  if (p.WasSet("--seq") && (seq < 1 || seq > 65536)) return usage("--seq must be in [1, 65536]");
  if (p.WasSet("--chunk") && (chunk < 1 || chunk > 65536))
    return usage("--chunk must be in [1, 65536]");
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].size() < 2 || outputs[i][0] != '@') {
      return usage("--output " + std::to_string(i) + " '" + outputs[i] + "' must be @FILE.npy");
    }
  }

  // Every output must be writable before anything runs or is written (a bad fifth --output
  // used to leave the first four files).
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (Status s = CheckWritableFile(outputs[i].substr(1)); !s.ok()) {
      return ReportError("invoke", s.WithContext("--output " + std::to_string(i)));
    }
  }

  // Parse the inputs first: a spelling error needs no model.
  std::vector<exporter::HostTensor> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto t = exporter::ParseTensorArg(inputs[i]);
    if (!t.ok()) {
      Status s = t.status().WithContext("--input " + std::to_string(i));
      return ReportError("invoke", s, /*usage=*/!NamesFile(inputs[i]));
    }
    args.push_back(std::move(*t));
  }
  // S or C from the tokens argument when not given.
  const bool chunked = *fn == exporter::Function::kPrefillWithPast;
  if (!args.empty() && !args[0].shape.empty()) {
    const int64_t n = args[0].shape.back();
    if (chunked && !p.WasSet("--chunk")) chunk = n;
    if (!chunked && *fn != exporter::Function::kWithPast && !p.WasSet("--seq")) seq = n;
  }
  if (seq <= 0) seq = 24;
  if (chunk <= 0) chunk = 32;
  if (seq > 65536 || chunk > 65536) return usage("the tokens input is longer than 65536");

  auto model_path = common.ModelPath();
  if (!model_path.ok()) return ReportError("invoke", model_path.status());
  auto model = runtime::Model::Load(*model_path, common.Loras());
  if (!model.ok()) return ReportError("invoke", model.status());
  const model::Config& c = (*model)->config();

  exporter::InvokeOptions o;
  o.function = *fn;
  o.seq = seq;
  o.chunk = chunk;
  o.emb_input = emb;
  o.exec.reference = reference;
  const std::string name(exporter::FunctionName(*fn));
  auto checked = exporter::CheckArguments(c, o, args);
  if (!checked.ok()) {
    const bool is_usage = checked.status().code() == StatusCode::kInvalidArgument;
    return ReportError("invoke", checked.status().WithContext(name), is_usage);
  }
  const size_t n_results = checked->signature.results.size();
  if (!outputs.empty() && outputs.size() != n_results) {
    return usage(std::to_string(outputs.size()) + " --output given, " + name + " has " +
                 std::to_string(n_results) + " results");
  }

  ThreadPool pool(common.Threads());
  o.pool = &pool;
  exporter::InvokeStats st;
  // The arena is allocated without throwing (a clear ResourceExhausted); any other allocation
  // that fails (a 32-bit process, a memory limit) is reported the same way, never a crash.
  StatusOr<std::vector<exporter::HostTensor>> results = InternalError("not run");
  try {
    // The arguments are checked above; the memory plan is only made for --stats.
    results = exporter::HostInvokeChecked(c, (*model)->weights(), (*model)->resolver(), o, args,
                                          *checked, stats ? &st : nullptr);
  } catch (const std::bad_alloc&) {
    results = ResourceExhaustedError(name + ": out of memory");
  }
  if (stats && (results.ok() || st.arena_bytes > 0)) {
    std::fprintf(stderr, "%s: largest value %s %llu bytes; executor scratch (arena) %llu bytes\n",
                 name.c_str(), st.largest_name.c_str(),
                 static_cast<unsigned long long>(st.largest_bytes),
                 static_cast<unsigned long long>(st.arena_bytes));
  }
  if (!results.ok()) return ReportError("invoke", results.status());

  if (outputs.empty()) {
    std::string out = "EXEC @" + name + "\n";
    for (size_t i = 0; i < results->size(); ++i) {
      out += "result[" + std::to_string(i) + "]: hal.buffer_view\n";
      out += exporter::FormatTensor((*results)[i]) + "\n";
    }
    std::fputs(out.c_str(), stdout);
    return kExitOk;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    Status s = exporter::WriteNpy(outputs[i].substr(1), (*results)[i]);
    if (!s.ok()) return ReportError("invoke", s.WithContext("--output " + std::to_string(i)));
  }
  return kExitOk;
}

}  // namespace fg::cli
