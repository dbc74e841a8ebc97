// fgemma call: a natural-language request in, the function call(s) as JSON out.
#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fgemma/function_caller.h"
#include "src/base/mapped_file.h"
#include "src/call/runtime_model.h"
#include "src/runtime/sampler.h"
#include "src/text/call_grammar.h"
#include "tools/fgemma/cli_text.h"
#include "tools/fgemma/commands.h"
#include "tools/fgemma/common_flags.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {

namespace {

// --repl: the longest request line answered (far more than any context holds), and the longest
// line read at all before giving up on the input.
constexpr size_t kMaxReplLineBytes = size_t{1} << 20;
constexpr size_t kMaxReplRunawayBytes = size_t{16} << 20;

// User + system CPU time of the whole process (every thread), in ms.
double CpuMs() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

void PrintStats(const CallResult& r, double cpu_ms) {
  const CallStats& s = r.stats;
  if (!r.mended_request.empty()) std::fprintf(stderr, "read as: %s\n", r.mended_request.c_str());
  const double skipped =
      s.head_rows_total > 0 ? 100.0 * s.head_rows_skipped / s.head_rows_total : 0.0;
  auto ll = [](int64_t v) { return static_cast<long long>(v); };
  std::fprintf(stderr,
               "prefix %.1f ms (%s, %lld tokens + %lld reused) | prefill %.1f ms (%lld tokens) | "
               "decode %.1f ms (%lld tokens: %lld forced, %lld sparse, %lld full, %lld from "
               "drafts (%lld of %lld drafted tokens taken); LM-head rows skipped %.1f%%; %lld "
               "strings guarded) | tool channel %.1f ms | argument check %.1f ms (%lld dropped, "
               "%lld replaced, %lld tools ruled out) | argument fill %.1f ms (%lld added) | blend "
               "%.1f ms (%lld steps) | typos %lld mended | "
               "total %.1f ms (cpu %.1f ms) | stop: %s | "
               "peak RSS %.1f MiB\n",
               s.prefix_ms, s.prefix_source.c_str(), ll(s.prefix_tokens), ll(s.reused_tokens),
               s.prefill_ms, ll(s.prompt_tokens - s.prefix_tokens - s.reused_tokens), s.decode_ms,
               ll(s.generated_tokens), ll(s.forced_steps), ll(s.sparse_steps), ll(s.full_steps),
               ll(s.drafted_steps), ll(s.accepted_tokens), ll(s.drafted_tokens), skipped,
               ll(s.guarded_strings), s.channel_ms, s.argument_check_ms, ll(s.dropped_arguments),
               ll(s.replaced_values), ll(s.excluded_tools), s.fill_ms, ll(s.filled_arguments),
               s.blend_ms, ll(s.blended_steps), ll(s.mended_words), s.total_ms, cpu_ms,
               r.stop_text().c_str(), PeakRssKiB() / 1024.0);
}

}  // namespace

int CmdCall(int argc, char** argv) {
  std::string tools_path, dialect = "official", constrain = "call", cache_dir, tool_map_path,
                          examples_path;
  int64_t top_k = 64, seed = 0, max_calls = 1, max_tokens = 256,
          draft = FunctionCallerOptions{}.draft_tokens;
  double temp = 0.0, top_p = 0.95;
  bool repl = false, stats = false, full_head = false, show_text = false, no_reuse = false;
  std::vector<std::string> pos;
  FlagParser p("call",
               "Turn a natural-language request into a function call of a tool catalog, printed "
               "as JSON on stdout.");
  CommonFlags common;
  common.Register(p, CommonFlags::kModel);
  p.AddString("--tools", &tools_path, "FILE", "Tool catalog JSON (required; see examples/)");
  p.AddString("--examples", &examples_path, "FILE",
              "Labelled requests ({\"request\", \"calls\"} lines, as fgemma tune reads them): each "
              "request is listed as an example of the tools it calls in the tool prior's text "
              "of the tool (--tool-channel), so that the prior reads the app's own phrasing; the "
              "catalog's own \"examples\" arrays come first");
  p.AddString("--dialect", &dialect, "NAME",
              "official (FunctionGemma declarations, default) or compact (<tool_N> tokens of the "
              "seed's fine-tune; needs --tool-map)");
  p.AddString("--tool-map", &tool_map_path, "FILE",
              "Compact dialect: {\"0\": \"set_lights\", ...} or a manifest.json with \"toolMap\"");
  p.AddString("--constrain", &constrain, "MODE",
              "call (default: the output is always valid calls of the catalog), auto (text or "
              "valid calls; runs as call on a base Gemma 3 model, which never learned to open a "
              "call), off (no grammar)");
  p.AddDouble("--temp", &temp, "T", "Temperature; 0 is greedy (default 0)");
  p.AddInt("--top-k", &top_k, "K", "Keep the K most likely tokens; 0 = all (default 64)");
  p.AddDouble("--top-p", &top_p, "P", "Nucleus sampling mass in (0, 1] (default 0.95)");
  p.AddInt("--seed", &seed, "S", "Sampling seed (default 0; each request starts from it)");
  common.Register(p, CommonFlags::kContext | CommonFlags::kThreads);
  p.AddInt("--max-calls", &max_calls, "N",
           "Calls before the output stops (default 1); with N > 1 the JSON is an array");
  p.AddInt("-n,--max-tokens", &max_tokens, "N", "Generated tokens at most (default 256)");
  p.AddInt("--draft", &draft, "N",
           "Where a step needs the whole LM head, draft up to N tokens by looking the last "
           "tokens up in the prompt and output, and check them in one run (default 2; 0 = off; at "
           "most 16; the output is the same; each drafted token costs a row of logits in memory)");
  p.AddString("--cache-dir", &cache_dir, "DIR",
              "Keep the prefilled catalog prompt in DIR (created if missing) for later runs");
  p.AddBool("--repl", &repl,
            "Read one request per line from stdin, answer each with one JSON line (the catalog "
            "prompt is prefilled once)");
  p.AddBool("--stats", &stats,
            "Print timing (prefix, prefill, decode, total ms), token counts, LM-head work and "
            "peak RSS to stderr");
  p.AddBool("--full-head", &full_head,
            "The plain decoder, for comparisons: one token per step and the whole LM head every "
            "step, even where the grammar allows one or a few tokens, no drafts (the output is the "
            "same)");
  p.AddBool("--no-reuse", &no_reuse,
            "With --repl: prefill each request in full after the catalog prompt instead of "
            "reusing the tokens it starts with in common with the previous request (for "
            "measuring: the answers are the same)");
  p.AddBool("--text", &show_text,
            "Also print the raw model output (special tokens as text) to stderr");
  common.Register(p, CommonFlags::kPrepack);
  p.SetPositionals(&pos, "\"REQUEST\"", 0, 1);
  common.Register(p, CommonFlags::kLora | CommonFlags::kCallLora | CommonFlags::kToolChannel);
  p.AddNote(
      "Output: with --max-calls 1, the call as {\"name\": ..., \"arguments\": {...}}; with "
      "--max-calls N > 1, an array of such objects; when the model wrote no valid call "
      "(possible with --constrain auto/off, or when -n cuts it short), {\"content\": TEXT, "
      "\"calls\": [], \"error\": WHY} (\"error\" only for invalid output, which also exits 1). "
      "--repl prints one such line per input line ({\"error\": ...} for a bad request) and "
      "exits 0 at the end of stdin.");
  p.AddNote(
      "Stops at <eos>, <end_of_turn> and <start_function_response>, and after the last "
      "allowed call. Exit codes: 0 ok, 1 runtime error (bad catalog, model, cache dir, "
      "invalid output), 2 usage error.");
  if (auto rc = p.Parse(argc, argv)) return *rc;

  auto usage = [&](const std::string& m) {
    return ReportError("call", InvalidArgumentError(m), true);
  };
  if (!p.WasSet("--tools")) return usage("missing --tools FILE");
  const StatusOr<Dialect> parsed_dialect = ParseDialect(dialect);
  if (!parsed_dialect.ok()) return usage(parsed_dialect.status().message());
  const StatusOr<ConstrainMode> parsed_constrain = ParseConstrainMode(constrain);
  if (!parsed_constrain.ok()) return usage(parsed_constrain.status().message());
  const bool compact = *parsed_dialect == Dialect::kCompact;
  if (repl && !pos.empty()) return usage("--repl reads requests from stdin: give no REQUEST");
  if (!repl && pos.empty()) return usage("missing the REQUEST (or --repl)");
  if (!repl) {
    if (Status s = CheckRequest(pos[0]); !s.ok()) return usage(s.message());
  }
  if (Status s = common.Check(); !s.ok()) return usage(s.message());
  if (max_calls < 1 || max_calls > 64) return usage("--max-calls must be in [1, 64]");
  if (max_tokens < 1) return usage("-n must be >= 1");
  if (draft < 0 || draft > 16) return usage("--draft must be in [0, 16]");
  if (seed < 0) return usage("--seed must be >= 0");
  if (p.WasSet("--cache-dir") && cache_dir.empty()) {
    return usage("--cache-dir needs a folder, got ''");
  }
  if (compact && tool_map_path.empty()) {
    return usage("--dialect compact needs --tool-map FILE");
  }
  if (!compact && !tool_map_path.empty()) {
    return usage("--tool-map is for --dialect compact");
  }

  FunctionCallerOptions o;
  o.dialect = *parsed_dialect;
  o.constrain = *parsed_constrain;
  o.temperature = temp;
  o.top_k = top_k;
  o.top_p = top_p;
  o.seed = static_cast<uint64_t>(seed);
  o.max_calls = static_cast<int>(max_calls);
  o.max_tokens = max_tokens;
  o.draft_tokens = static_cast<int>(draft);
  o.context = common.ContextOrZero();
  o.threads = common.ThreadsOrZero();
  o.cache_dir = cache_dir;
  o.fast_head = !full_head;
  o.reuse_request_prefix = !no_reuse;
  common.ApplyCallFlags(o);
  // What is left to check (the sampling parameters), with FunctionCaller::Create's messages.
  if (Status s = ValidateOptions(o); !s.ok()) return usage(s.message());

  auto catalog = ReadFileToString(tools_path);
  if (!catalog.ok()) return ReportError("call", catalog.status().WithContext("--tools"));
  if (!examples_path.empty()) {
    auto ex = ReadToolExamples(examples_path);
    if (!ex.ok()) return ReportError("call", ex.status());
    o.tool_examples = std::move(*ex);
  }
  if (!tool_map_path.empty()) {
    auto map = LoadToolMap(tool_map_path);
    if (!map.ok()) return ReportError("call", map.status().WithContext("--tool-map"));
    o.tool_map = std::move(*map);
  }
  auto model_path = common.ModelPath();
  if (!model_path.ok()) return ReportError("call", model_path.status());
  const auto t0 = std::chrono::steady_clock::now();
  auto model = CallModel::Load(*model_path, common.CallAdapters(), common.PriorAdapters());
  if (!model.ok()) return ReportError("call", model.status());
  if (Status s = common.CheckContext((*model)->trained_context()); !s.ok()) {
    return usage(s.message());
  }
  if (Status s = common.Prepack(**model); !s.ok()) return ReportError("call", s);
  auto caller = FunctionCaller::Create(*model, *catalog, o);
  if (!caller.ok()) {
    const Status& st = caller.status();
    // Catalog problems name the file; the others (tool map, vocabulary, cache dir) say theirs.
    return ReportError("call", st.message().rfind("tool catalog", 0) == 0
                                   ? st.WithContext("'" + tools_path + "'")
                                   : st);
  }
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (stats) {
    std::fprintf(stderr,
                 "load %.1f ms (model and catalog; catalog prompt %lld tokens; prepacked panels "
                 "%.1f MiB)\n",
                 load_ms, static_cast<long long>((*caller)->prefix_tokens()),
                 static_cast<double>(call::RuntimeModel(**model).panel_bytes()) / (1 << 20));
  }

  auto answer = [&](const std::string& request, bool* valid) -> StatusOr<std::string> {
    const double cpu0 = CpuMs();
    FG_ASSIGN_OR_RETURN(CallResult r, (*caller)->Call(request));
    const double cpu = CpuMs() - cpu0;
    if (show_text) std::fprintf(stderr, "output: %s\n", Printable(r.text).c_str());
    if (stats) PrintStats(r, cpu);
    *valid = r.validity.ok();
    return r.ToJson(o.max_calls).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };

  if (!repl) {
    bool valid = false;
    auto out = answer(pos[0], &valid);
    if (!out.ok()) {
      const StatusCode c = out.status().code();
      return ReportError("call", out.status(), /*usage=*/c == StatusCode::kInvalidArgument);
    }
    std::printf("%s\n", out->c_str());
    FlushStdout();
    if (!valid) {
      std::fprintf(stderr, "fgemma call: the model's output is not a valid call\n");
      return kExitRuntime;
    }
    return kExitOk;
  }
  // One request per line, each line bounded: an over-long line gets an error line and the REPL
  // goes on; input that never ends a line (/dev/zero) stops it.
  auto print_error = [](const std::string& message) {
    std::printf("%s\n", nlohmann::json{{"error", text::ToValidUtf8(message)}}.dump().c_str());
  };
  std::string line;
  for (;;) {
    const LineRead got = ReadLine(stdin, kMaxReplLineBytes, kMaxReplRunawayBytes, &line);
    if (got == LineRead::kEnd) break;
    if (got == LineRead::kRunaway) {
      print_error("request line longer than " + std::to_string(kMaxReplRunawayBytes >> 20) +
                  " MiB; stopping");
      return ReportError("call", ResourceExhaustedError(
                                     "stdin: a line longer than " +
                                     std::to_string(kMaxReplRunawayBytes >> 20) + " MiB"));
    }
    if (got == LineRead::kTooLong) {
      print_error("request line longer than " + std::to_string(kMaxReplLineBytes) + " bytes");
      FlushStdout();
      continue;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    bool valid = false;
    auto out = answer(line, &valid);
    if (out.ok()) {
      std::printf("%s\n", out->c_str());
    } else {
      print_error(out.status().message());
    }
    FlushStdout();
  }
  if (std::ferror(stdin)) {
    return ReportError("call", IoError(std::string("cannot read stdin: ") + std::strerror(errno)));
  }
  return kExitOk;
}

}  // namespace fg::cli
