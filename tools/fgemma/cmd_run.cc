// fgemma run: generate text from a prompt (Gemma chat template by default), streaming.
#include <fnmatch.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "src/base/thread_pool.h"
#include "src/graph/graph.h"
#include "src/runtime/model.h"
#include "src/runtime/sampler.h"
#include "src/runtime/session.h"
#include "src/text/tokenizer.h"
#include "tools/fgemma/cli_text.h"
#include "tools/fgemma/commands.h"
#include "tools/fgemma/common_flags.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {

namespace {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

int CmdRun(int argc, char** argv) {
  std::string prompt, dump;
  int64_t n_predict = 64, top_k = 64, seed = -1, chunk = 128;
  double temp = 1.0, top_p = 0.95;
  bool raw = false, no_special = false, ids = false, verbose = false, verbose_prompt = false;
  bool reference = false;
  FlagParser p("run", "Generate text from a prompt with a Gemma 3 GGUF, streaming it to stdout.");
  CommonFlags common;
  common.Register(p, CommonFlags::kModel);
  p.AddString("-p,--prompt", &prompt, "TEXT", "The prompt (required)");
  p.AddBool("--raw", &raw,
            "Use the prompt as is (BOS added), without the Gemma chat template; control-token "
            "text in it (<start_of_turn>, <end_of_turn>, ...) becomes those tokens, as in "
            "llama.cpp's raw completion");
  p.AddBool("--no-special", &no_special,
            "With --raw: read control-token text in the prompt as plain text");
  p.AddInt("-n,--n-predict", &n_predict, "N", "Tokens to generate (default 64)");
  p.AddDouble("--temp", &temp, "T", "Temperature; 0 is greedy (default 1.0, the model card's)");
  p.AddInt("--top-k", &top_k, "K", "Keep the K most likely tokens; 0 = all (default 64)");
  p.AddDouble("--top-p", &top_p, "P", "Nucleus sampling mass in (0, 1] (default 0.95)");
  p.AddInt("--seed", &seed, "S", "Sampling seed (default: random, printed with --verbose)");
  common.Register(p, CommonFlags::kContext | CommonFlags::kThreads);
  p.AddInt("--chunk", &chunk, "N", "Prefill chunk length (default 128)");
  p.AddBool("--ids", &ids, "Print the generated token ids (one line) instead of text");
  p.AddBool("-v,--verbose", &verbose, "Print prompt/generation speed and peak memory to stderr");
  p.AddBool("--verbose-prompt", &verbose_prompt,
            "Print the prompt's token ids to stderr before generating");
  p.AddString("--dump", &dump, "GLOB", "Print the named intermediates matching GLOB ('blk.0.*') to stderr");
  p.AddBool("--reference-kernels", &reference, "Run the scalar reference kernels (slow; debugging)");
  common.Register(p, CommonFlags::kLora);
  p.AddNote("Stops at <eos> or <end_of_turn>. Exit codes: 0 ok, 1 runtime error, 2 usage error.");
  if (auto rc = p.Parse(argc, argv)) return *rc;

  auto usage = [&](const std::string& m) { return ReportError("run", InvalidArgumentError(m), true); };
  if (!p.WasSet("-p")) return usage("missing -p PROMPT");
  if (!IsValidUtf8(prompt)) return usage("the prompt is not valid UTF-8");
  if (Status s = common.Check(); !s.ok()) return usage(s.message());
  if (n_predict < 0) return usage("-n must be >= 0");
  if (chunk <= 0) return usage("--chunk must be > 0");
  if (no_special && !raw) {
    return usage("--no-special needs --raw (the chat template never parses the prompt's specials)");
  }
  runtime::SamplingParams sp;
  sp.temperature = temp;
  sp.top_k = top_k;
  sp.top_p = top_p;
  if (Status s = runtime::ValidateSampling(sp); !s.ok()) return usage(s.message());
  if (seed < 0) {
    sp.seed = static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
  } else {
    sp.seed = static_cast<uint64_t>(seed);
  }

  auto model_path = common.ModelPath();
  if (!model_path.ok()) return ReportError("run", model_path.status());
  const auto t0 = std::chrono::steady_clock::now();
  auto model = runtime::Model::Load(*model_path, common.Loras());
  if (!model.ok()) return ReportError("run", model.status());
  auto tok = text::Tokenizer::FromGguf((*model)->file());
  if (!tok.ok()) return ReportError("run", tok.status().WithContext("'" + *model_path + "'"));
  const text::Tokenizer& tk = **tok;

  // The prompt: template tokens are special, the user's text never is (no injection of
  // <start_of_turn> through the prompt). A --raw prompt is the user's own template: its
  // control-token text is parsed as llama.cpp's raw completion does, unless --no-special.
  std::vector<int32_t> prompt_ids;
  if (tk.vocab().add_bos) prompt_ids.push_back(tk.vocab().bos);
  auto append = [&](std::string_view text, bool special) {
    std::vector<int32_t> v = tk.Encode(text, /*add_special=*/false, special);
    prompt_ids.insert(prompt_ids.end(), v.begin(), v.end());
  };
  if (raw) {
    append(prompt, !no_special);
  } else {
    append("<start_of_turn>user\n", true);
    append(prompt, false);
    append("<end_of_turn>\n<start_of_turn>model\n", true);
  }
  if (verbose_prompt) {
    std::string line = "prompt ids:";
    for (int32_t id : prompt_ids) line += " " + std::to_string(id);
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::vector<int32_t> stops = {tk.vocab().eos};
  if (auto eot = tk.Find("<end_of_turn>")) stops.push_back(*eot);

  // The default context is 2048 or the model's trained context if that is shorter; an explicit
  // -c beyond the trained context is a usage error.
  const int64_t trained = (*model)->config().context_length;
  if (Status st = common.CheckContext(trained); !st.ok()) return usage(st.message());
  const int64_t context = common.Context(trained);
  ThreadPool pool(common.Threads());
  runtime::SessionOptions so;
  so.context = context;
  so.max_chunk = chunk;
  so.pool = &pool;
  so.reference = reference;
  auto session = runtime::Session::Create(**model, so);
  if (!session.ok()) return ReportError("run", session.status());
  runtime::Session& s = **session;
  if (!dump.empty()) {
    s.SetDump([&](std::string_view name, const std::vector<int64_t>& shape,
                  std::span<const float> data) {
      std::string n(name);
      if (fnmatch(dump.c_str(), n.c_str(), 0) != 0) return;
      double sum = 0;
      for (float f : data) sum += f;
      std::fprintf(stderr, "%s %s sum=%.6g:", n.c_str(), graph::ShapeString(shape).c_str(), sum);
      for (size_t i = 0; i < data.size() && i < 8; ++i) std::fprintf(stderr, " %.6g", data[i]);
      std::fprintf(stderr, "\n");
    });
  }
  if (static_cast<int64_t>(prompt_ids.size()) > context) {
    return ReportError("run", OutOfRangeError("the prompt has " + std::to_string(prompt_ids.size()) +
                                              " tokens, more than the context of " +
                                              std::to_string(context) + " (-c)"));
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (Status st = s.Append(prompt_ids); !st.ok()) return ReportError("run", st);
  const auto t2 = std::chrono::steady_clock::now();

  runtime::Sampler sampler(sp);
  text::StreamDecoder dec(tk);
  std::vector<int32_t> out;
  std::string stop_reason = "length";
  for (int64_t i = 0; i < n_predict; ++i) {
    int32_t next = sampler.Sample(s.logits());
    bool stop = false;
    for (int32_t st : stops) stop |= (next == st);
    if (stop) {
      stop_reason = "stop token " + std::to_string(next);
      break;
    }
    out.push_back(next);
    if (!ids) {
      std::string piece = dec.Push(next);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      FlushStdout();
    }
    if (i + 1 == n_predict) break;
    if (s.position() >= context) {
      stop_reason = "context full";
      break;
    }
    if (Status st = s.Append(std::span<const int32_t>(&next, 1)); !st.ok()) {
      return ReportError("run", st);
    }
  }
  const auto t3 = std::chrono::steady_clock::now();
  if (ids) {
    for (size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? " " : "", out[i]);
    std::printf("\n");
  } else {
    std::string rest = dec.Flush();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::printf("\n");
  }
  FlushStdout();
  if (verbose) {
    const double pp = Seconds(t1, t2), tg = Seconds(t2, t3);
    std::fprintf(stderr,
                 "load %.3f s | prompt %zu tokens %.3f s (%.1f tok/s) | generated %zu tokens "
                 "%.3f s (%.1f tok/s) | stop: %s | threads %d | seed %" PRIu64
                 " | kv cache %.1f MiB | scratch %.1f MiB | peak RSS %.1f MiB\n",
                 Seconds(t0, t1), prompt_ids.size(), pp, prompt_ids.size() / std::max(pp, 1e-9),
                 out.size(), tg, out.size() > 1 ? (out.size() - 1) / std::max(tg, 1e-9) : 0.0,
                 stop_reason.c_str(), pool.size(), sp.seed, s.cache_bytes() / 1048576.0,
                 s.scratch_bytes() / 1048576.0, PeakRssKiB() / 1024.0);
  }
  return kExitOk;
}

}  // namespace fg::cli
