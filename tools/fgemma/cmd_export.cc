// fgemma export -m MODEL [--graph all|redecode|...] [--seq S] [--chunk C] [--dtype bf16|f16|f32]
//   [--emb-input] [--tool-map FILE] -o DIR [--stats] [--progress]: the contract's functions as
// StableHLO MLIR (DIR/<function>.mlir), one IREE parameter archive (DIR/model.irpa) and
// DIR/manifest.json (docs/contract.md). Everything is written into a temporary folder
// beside DIR, which replaces DIR only once complete; DIR must be new, empty or an earlier export
// holding only what an export writes (never delete what fgemma did not write).
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "src/base/file_io.h"
#include "src/base/temp_files.h"
#include "src/export/archive.h"
#include "src/export/contract.h"
#include "src/export/contract_graphs.h"
#include "src/export/host_invoke.h"
#include "src/export/irpa.h"
#include "src/export/manifest.h"
#include "src/export/stablehlo.h"
#include "src/gguf/reader.h"
#include "src/gguf_tools/requantize.h"
#include "src/model/gemma3/config.h"
#include "src/model/gemma3/weights.h"
#include "tools/fgemma/commands.h"
#include "tools/fgemma/common_flags.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {

namespace {

namespace fs = std::filesystem;

Status WriteText(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (!f) return InternalError("cannot write '" + path.string() + "'");
  return OkStatus();
}

std::string Mib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return b;
}

// The names an export writes into its folder (and so may replace there).
bool IsExportFile(const std::string& name) {
  return name == "manifest.json" || name == "model.irpa" ||
         (name.size() > 5 && name.compare(name.size() - 5, 5, ".mlir") == 0);
}

// Whether an export may replace `dir`: it does not exist, is an empty folder, or holds an
// earlier export (a manifest.json with "contractVersion") and nothing else. An export never
// deletes what fgemma did not write: anything else is an error naming what is in the way.
Status CheckReplaceable(const fs::path& dir, const std::string& shown) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (!fs::exists(st)) return OkStatus();
  if (!fs::is_directory(st)) {
    return InvalidArgumentError("'" + shown + "' exists and is not a folder");
  }
  const fs::path cwd = fs::current_path(ec);
  if (!ec) {
    auto [d, c] = std::mismatch(dir.begin(), dir.end(), cwd.begin(), cwd.end());
    if (d == dir.end()) {
      return InvalidArgumentError("'" + shown +
                                  "' is the current folder or one above it; give -o a new "
                                  "or empty folder, or an earlier export");
    }
  }
  bool empty = true, manifest = false;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    empty = false;
    const std::string name = it->path().filename().string();
    if (!IsExportFile(name) || !it->is_regular_file(ec)) {
      return InvalidArgumentError("'" + shown + "' holds '" + name +
                                  "', which fgemma export does not write: refusing to replace "
                                  "it (give -o a new or empty folder, or an earlier export)");
    }
    manifest = manifest || name == "manifest.json";
  }
  if (ec) return IoError("cannot list '" + shown + "': " + ec.message());
  if (empty) return OkStatus();
  if (manifest) {
    auto text = ReadFileToString((dir / "manifest.json").string());
    if (text.ok()) {
      auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("contractVersion")) return OkStatus();
    }
  }
  return InvalidArgumentError("'" + shown +
                              "' is not empty and not an earlier export (no manifest.json "
                              "written by fgemma export): refusing to replace it");
}

// A temporary folder beside `dir` (same file system, so the final rename is atomic), removed
// on failure and on SIGINT/SIGTERM (src/base/temp_files.h).
StatusOr<TempPath> MakeTempBeside(const fs::path& dir) {
  fs::path parent = dir.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    return InvalidArgumentError("output folder's parent '" + parent.string() +
                                "' does not exist");
  }
  std::string tmpl = (parent / ("." + dir.filename().string() + ".tmp-XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    return IoError("cannot create a folder in '" + parent.string() +
                                 "': " + std::strerror(errno));
  }
  TempPath tmp(buf.data(), TempPath::Kind::kFolder);
  // mkdtemp makes it 0700; the export gets the usual folder permissions (umask applied).
  const mode_t mask = ::umask(0);
  ::umask(mask);
  fs::permissions(tmp.path(), static_cast<fs::perms>(0777 & ~mask), ec);
  return tmp;
}

// Moves the finished `tmp` to `dir`, replacing a previous export there (checked again: the
// folder may have changed since the start). The two are swapped in one step where the file
// system can (renameat2 RENAME_EXCHANGE), so an interruption leaves the old or the new export,
// never neither; `tmp` then names the old one, which its TempPath removes.
Status Publish(TempPath& tmp, const fs::path& dir, const std::string& shown) {
  FG_RETURN_IF_ERROR(CheckReplaceable(dir, shown));
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dir, ec))) {
    if (::renameat2(AT_FDCWD, tmp.path().c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
      tmp.Remove();  // the old export
      return OkStatus();
    }
    // No exchange on this file system: move the old export aside, then the new one in.
    TempPath old(tmp.path() + ".old", TempPath::Kind::kFolder);
    fs::rename(dir, old.path(), ec);
    if (ec) {
      old.Keep();
      return InternalError("cannot move the old '" + shown + "' away: " + ec.message());
    }
    fs::rename(tmp.path(), dir, ec);
    if (ec) {
      std::error_code back;
      fs::rename(old.path(), dir, back);
      if (!back) old.Keep();
      return InternalError("cannot rename the export to '" + shown + "': " + ec.message());
    }
    tmp.Keep();
    return OkStatus();
  }
  fs::rename(tmp.path(), dir, ec);
  if (ec) return InternalError("cannot rename the export to '" + shown + "': " + ec.message());
  tmp.Keep();
  return OkStatus();
}

}  // namespace

int CmdExport(int argc, char** argv) {
  std::string graph_name, dtype_name = "bf16", tool_map_path, out_dir;
  int64_t seq = 24, chunk = 32;
  bool emb_input = false, stats = false, progress = false, one_module = false;
  FlagParser p("export",
               "Export the compiled-graph contract's functions (gemma, gemma_at, gemma_prefill, "
               "gemma_prefill_at, gemma_with_past, gemma_prefill_with_past) as StableHLO MLIR "
               "for iree-compile, with one IREE parameter archive and manifest.json.");
  CommonFlags common;
  common.Register(p, CommonFlags::kModel);
  p.AddString("--graph", &graph_name, "NAME",
              "all (default, or $GEMMA_GRAPH), redecode, redecode_at, prefill, prefill_at, "
              "with_past, prefill_with_past");
  p.AddInt("--seq", &seq, "S", "Sequence capacity of the fixed-length functions (default 24)");
  p.AddInt("--chunk", &chunk, "C", "Chunk size of gemma_prefill_with_past (default 32)");
  p.AddString("--dtype", &dtype_name, "T", "Weight type in the archive: bf16 (default), f16, f32");
  p.AddBool("--emb-input", &emb_input,
            "Embeddings-input variants: an `emb` argument after tokens/token (for Vulkan)");
  p.AddString("--tool-map", &tool_map_path, "FILE",
              "JSON object for the manifest's toolMap (default: the seed's six home tools, "
              "examples/seed_home_toolmap.json)");
  p.AddString("-o,--output", &out_dir, "DIR",
              "Output folder (required): new, empty or an earlier export (only those files), "
              "replaced when complete");
  p.AddBool("--one-module", &one_module,
            "All functions in one DIR/module.mlir (one compiled module) instead of <function>.mlir");
  p.AddBool("--stats", &stats, "Print each function's largest intermediate and scratch bytes");
  p.AddBool("--progress", &progress, "Progress bar on stderr even when it is not a terminal");
  common.Register(p, CommonFlags::kLora);
  p.AddNote("Writes DIR/<function>.mlir, DIR/model.irpa (weights keyed by GGUF tensor name, "
            "quantized types dequantized; norm vectors stay f32) and DIR/manifest.json. Compile "
            "with: iree-compile --iree-hal-target-backends=llvm-cpu DIR/gemma_at.mlir -o "
            "gemma_at.vmfb; run with --parameters=model=DIR/model.irpa.");
  if (auto rc = p.Parse(argc, argv)) return *rc;
  auto usage = [&](const std::string& m) { return ReportError("export", InvalidArgumentError(m), true); };

  if (!p.WasSet("--graph")) {
    const char* env = std::getenv("GEMMA_GRAPH");
    graph_name = env != nullptr && *env != '\0' ? env : "all";
  }
  std::vector<exporter::Function> functions;
  if (graph_name == "all") {
    functions.assign(std::begin(exporter::kAllFunctions), std::end(exporter::kAllFunctions));
  } else {
    auto f = exporter::ParseGraphName(graph_name);
    if (!f) {
      return usage("unknown --graph '" + graph_name +
                   "' (all, redecode, redecode_at, prefill, prefill_at, with_past, prefill_with_past)");
    }
    functions.push_back(*f);
  }
  if (seq < 1 || seq > 65536) return usage("--seq must be in [1, 65536]");
  if (chunk < 1 || chunk > 65536) return usage("--chunk must be in [1, 65536]");
  auto dtype = exporter::ParseWeightType(dtype_name);
  if (!dtype) return usage("unknown --dtype '" + dtype_name + "' (bf16, f16, f32)");
  if (out_dir.empty()) return usage("missing -o DIR");
  if (Status s = common.Check(); !s.ok()) return usage(s.message());
  // The folder by its absolute path without "." or ".." ("out/" names the folder "out"; "-o ."
  // the current folder), checked before any work: never replace what an export did not write.
  std::error_code path_ec;
  fs::path dir = fs::weakly_canonical(fs::absolute(out_dir, path_ec), path_ec);
  if (path_ec) return ReportError("export", IoError("-o '" + out_dir + "': " + path_ec.message()));
  if (!dir.has_filename()) dir = dir.parent_path();
  if (Status s = CheckReplaceable(dir, out_dir); !s.ok()) return ReportError("export", s);

  nlohmann::ordered_json tool_map = exporter::DefaultToolMap();
  if (!tool_map_path.empty()) {
    // A file problem (exit 1), as in fgemma call.
    auto text = ReadFileToString(tool_map_path);
    if (!text.ok()) return ReportError("export", text.status().WithContext("--tool-map"));
    auto m = exporter::ParseToolMap(*text);
    if (!m.ok()) {
      return ReportError("export", m.status().WithContext("--tool-map: '" + tool_map_path + "'"));
    }
    tool_map = *m;
  }

  auto model_path_or = common.ModelPath();
  if (!model_path_or.ok()) return ReportError("export", model_path_or.status());
  const std::string model_path = *model_path_or;
  const std::vector<runtime::LoraSpec> loras = common.Loras();
  // With adapters, the archive holds the merged weights (the adapted matrices in f32, so the
  // archive's own rounding is the only one), and the graphs are the plain model's.
  std::vector<uint8_t> merged_bytes;
  StatusOr<std::unique_ptr<gguf::File>> file = std::unique_ptr<gguf::File>();
  if (loras.empty()) {
    file = gguf::File::Open(model_path);
    if (!file.ok()) return ReportError("export", file.status());
  } else {  // the model is read once, by the merge
    auto adapted = runtime::Model::Load(model_path, loras);
    if (!adapted.ok()) return ReportError("export", adapted.status());
    gguf::RequantizeSpec rs;
    rs.keep_types = true;
    for (const model::LoraUse& u : (*adapted)->weights().loras) {
      for (const model::LoraPair& pr : u.adapter->pairs()) rs.overrides.emplace_back(pr.base, tensor::DType::kF32);
    }
    auto w = model::BuildMerged((*adapted)->file(), (*adapted)->weights().loras, rs);
    if (!w.ok()) return ReportError("export", w.status());
    auto bytes = w->ToBytes();
    if (!bytes.ok()) return ReportError("export", bytes.status());
    merged_bytes = std::move(*bytes);
    file = gguf::File::FromBytes(merged_bytes);
    if (!file.ok()) return ReportError("export", file.status().WithContext("merged model"));
  }
  auto config = model::ConfigFromGguf(**file);
  if (!config.ok()) return ReportError("export", config.status().WithContext("'" + model_path + "'"));
  auto weights = model::BindWeights(**file, *config);
  if (!weights.ok()) return ReportError("export", weights.status().WithContext("'" + model_path + "'"));

  // The spec of each exported function, with the past length dynamic.
  auto spec_of = [&](exporter::Function f) {
    exporter::ContractSpec spec;
    spec.function = f;
    spec.seq = seq;
    spec.chunk = chunk;
    spec.emb_input = emb_input;
    return spec;
  };
  std::vector<graph::Graph> graphs;
  for (exporter::Function f : functions) {
    auto g = exporter::BuildContractFunction(*config, *weights, spec_of(f));
    if (!g.ok()) {
      return ReportError("export", g.status().WithContext(std::string(exporter::FunctionName(f))));
    }
    graphs.push_back(std::move(*g));
  }

  if (stats) {
    // The host plan of each function at a past of W - 1 rows (sliding) / W rows (global).
    for (exporter::Function f : functions) {
      exporter::ContractSpec spec = spec_of(f);
      spec.past = config->sliding_window - 1;
      spec.past_global = config->sliding_window;
      auto st = exporter::PlanFunction(*config, *weights, spec);
      if (!st.ok()) return ReportError("export", st.status());
      std::printf("%-24s largest %-22s %12s  scratch %12s\n",
                  std::string(exporter::FunctionName(f)).c_str(), st->largest_name.c_str(),
                  Mib(st->largest_bytes).c_str(), Mib(st->arena_bytes).c_str());
    }
  }

  auto tmp = MakeTempBeside(dir);
  if (!tmp.ok()) return ReportError("export", tmp.status());
  const fs::path tmp_dir = tmp->path();
  auto fail = [&](const Status& s) {
    tmp->Remove();
    return ReportError("export", s);
  };

  if (one_module) {
    // Every function in DIR/module.mlir (one vmfb, one context; weights declared once).
    std::vector<exporter::EmitFunction> fns;
    for (size_t i = 0; i < functions.size(); ++i) {
      fns.push_back({std::string(exporter::FunctionName(functions[i])), &graphs[i]});
    }
    auto text = exporter::EmitModule(fns, {.weight_type = *dtype});
    if (!text.ok()) return fail(text.status());
    if (Status s = WriteText(tmp_dir / "module.mlir", *text); !s.ok()) return fail(s);
  }
  for (size_t i = 0; i < functions.size() && !one_module; ++i) {
    const std::string name(exporter::FunctionName(functions[i]));
    exporter::EmitFunction fn{name, &graphs[i]};
    auto text = exporter::EmitModule(std::span(&fn, 1), {.weight_type = *dtype});
    if (!text.ok()) return fail(text.status());
    if (Status s = WriteText(tmp_dir / (name + ".mlir"), *text); !s.ok()) return fail(s);
  }

  exporter::IrpaWriter irpa;
  std::vector<const graph::Graph*> gp;
  for (const graph::Graph& g : graphs) gp.push_back(&g);
  if (Status s = exporter::AddGraphWeights(**file, gp, *dtype, &irpa); !s.ok()) return fail(s);
  const bool bar = progress || ::isatty(2);
  exporter::IrpaWriter::Progress on_progress = nullptr;
  if (bar) {
    on_progress = [](uint64_t done, uint64_t total) {
      const int width = 30;
      const int fill = total ? static_cast<int>(done * width / total) : width;
      std::fprintf(stderr, "\rmodel.irpa [%s%s] %3d%% %s", std::string(fill, '#').c_str(),
                   std::string(width - fill, ' ').c_str(),
                   total ? static_cast<int>(done * 100 / total) : 100, Mib(done).c_str());
      if (done == total) std::fprintf(stderr, "\n");
    };
  }
  if (Status s = irpa.WriteFile((tmp_dir / "model.irpa").string(), on_progress); !s.ok()) return fail(s);

  exporter::ManifestSpec ms;
  auto name = (*file)->GetString("general.name");
  ms.model = name.ok() ? std::string(*name) : fs::path(model_path).filename().string();
  ms.config = *config;
  ms.options.seq = seq;
  ms.options.chunk = chunk;
  ms.options.emb_input = emb_input;
  ms.dtype = *dtype;
  ms.exported = functions;
  ms.one_module = one_module;
  if (auto b = (*file)->GetUint("tokenizer.ggml.bos_token_id"); b.ok()) ms.bos = static_cast<int64_t>(*b);
  if (auto e = (*file)->GetUint("tokenizer.ggml.eos_token_id"); e.ok()) ms.eos = static_cast<int64_t>(*e);
  ms.embedding_parameter = std::string(weights->token_embd->name);
  ms.tool_map = tool_map;
  auto manifest = exporter::BuildManifest(ms);
  if (!manifest.ok()) return fail(manifest.status());
  // general.name is any bytes in a GGUF: the JSON replaces what is not UTF-8.
  const std::string manifest_text =
      manifest->dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  if (Status s = WriteText(tmp_dir / "manifest.json", manifest_text); !s.ok()) return fail(s);

  if (Status s = Publish(*tmp, dir, out_dir); !s.ok()) return fail(s);
  std::fprintf(stderr, "export: %zu function(s), model.irpa %s (%zu weights, %s), manifest.json -> %s\n",
               functions.size(), Mib(irpa.FileSize()).c_str(), irpa.size(),
               std::string(exporter::WeightTypeName(*dtype)).c_str(), out_dir.c_str());
  return kExitOk;
}

}  // namespace fg::cli
