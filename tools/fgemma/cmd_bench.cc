// fgemma bench: prompt processing (ppN) and generation (tgN) speed, like llama-bench.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fgemma/function_caller.h"
#include "src/base/mapped_file.h"
#include "src/base/thread_pool.h"
#include "src/kernels/cpu.h"
#include "src/runtime/model.h"
#include "src/runtime/session.h"
#include "src/text/tool_catalog.h"
#include "tools/fgemma/commands.h"
#include "tools/fgemma/common_flags.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {

namespace {

StatusOr<std::vector<int64_t>> ParseList(const std::string& s, const std::string& flag) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0) {
      return InvalidArgumentError(flag + " expects a comma-separated list of integers >= 0, got '" +
                                  s + "'");
    }
    out.push_back(v);
  }
  return out;
}

struct Stats {
  double median = 0, stddev = 0;
};

Stats Summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  double mean = 0;
  for (double x : v) mean += x;
  mean /= v.size();
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  s.stddev = v.size() > 1 ? std::sqrt(var / (v.size() - 1)) : 0.0;
  return s;
}

// Deterministic token ids spread over the vocabulary (control tokens are fine for speed).
std::vector<int32_t> BenchTokens(int64_t n, int64_t vocab) {
  std::vector<int32_t> t(n);
  uint64_t x = 0x2545f4914f6cdd1dull;
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    t[i] = static_cast<int32_t>(1000 + x % static_cast<uint64_t>(std::max<int64_t>(vocab - 1000, 1)));
  }
  if (vocab <= 1000) {
    for (auto& id : t) id %= static_cast<int32_t>(vocab);
  }
  return t;
}

std::string BaseName(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

// Time to call for one catalog: cold (a new FunctionCaller: grammar, catalog prefix prefill,
// request, decode) and warm (the same caller again: the session rewinds to its pinned catalog
// prefix).
Status TimeToCall(const std::shared_ptr<const CallModel>& model, const std::string& catalog_path,
                  const std::string& catalog, const std::string& request, int64_t threads,
                  int64_t reps, bool json, nlohmann::json* results) {
  FunctionCallerOptions opt;
  opt.threads = static_cast<int>(threads);
  // Warm means the catalog prefix is cached and the request is prefilled again (what the
  // llama.cpp replay does), not the same request answered from the previous call's tokens.
  opt.reuse_request_prefix = false;
  std::vector<double> cold, warm;
  CallResult last;
  std::unique_ptr<FunctionCaller> kept;  // the last repetition's caller, for PromptTokens
  for (int64_t r = -1; r < reps; ++r) {  // r = -1: warm-up
    auto t0 = std::chrono::steady_clock::now();
    FG_ASSIGN_OR_RETURN(std::unique_ptr<FunctionCaller> caller,
                        FunctionCaller::Create(model, catalog, opt));
    FG_ASSIGN_OR_RETURN(CallResult c, caller->Call(request));
    double cold_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    t0 = std::chrono::steady_clock::now();
    FG_ASSIGN_OR_RETURN(last, caller->Call(request));
    double warm_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (last.tokens != c.tokens) {
      return InternalError("bench: the warm call's output differs from the cold call's");
    }
    if (r >= 0) {
      cold.push_back(cold_ms);
      warm.push_back(warm_ms);
    }
    if (r == reps - 1) kept = std::move(caller);
  }
  std::vector<int32_t> prompt;
  if (kept != nullptr) {
    FG_ASSIGN_OR_RETURN(prompt, kept->PromptTokens(request));
  }
  kept.reset();
  const CallStats& st = last.stats;
  for (const char* kind : {"ttc_cold", "ttc_warm"}) {
    const std::vector<double>& v = kind[4] == 'c' ? cold : warm;
    Stats s = Summarize(v);
    // Tokens per second of each repetition (every repetition handles the same tokens: the
    // output is checked to repeat), summarized like the times.
    std::vector<double> rates;
    for (double ms : v) {
      rates.push_back((st.prompt_tokens + st.generated_tokens) / std::max(ms, 1e-9) * 1e3);
    }
    const Stats tps = Summarize(rates);
    if (json) {
      results->push_back({{"model", BaseName(model->path())}, {"test", kind},
                          {"catalog", BaseName(catalog_path)}, {"request", request},
                          {"threads", threads}, {"repetitions", reps}, {"ms", s.median},
                          {"stddev_ms", s.stddev}, {"tokens_per_s", tps.median},
                          {"stddev", tps.stddev},
                          {"samples_ms", v}, {"prefix_tokens", st.prefix_tokens},
                          {"prompt_tokens", st.prompt_tokens},
                          {"generated_tokens", st.generated_tokens},
                          {"forced_steps", st.forced_steps}, {"sparse_steps", st.sparse_steps},
                          {"full_steps", st.full_steps}, {"drafted_steps", st.drafted_steps},
                          {"drafted_tokens", st.drafted_tokens},
                          {"accepted_tokens", st.accepted_tokens}, {"prompt_ids", prompt},
                          {"output_ids", last.tokens}, {"valid", last.validity.ok()},
                          {"output", last.ToJson(1)}, {"peak_rss_mib", PeakRssKiB() / 1024.0}});
    } else {
      std::printf("| %s | %s | %s (%lld+%lld tok) | %lld | %.1f ms | %.1f ms |\n",
                  BaseName(model->path()).c_str(), BaseName(catalog_path).c_str(), kind,
                  static_cast<long long>(st.prompt_tokens),
                  static_cast<long long>(st.generated_tokens), static_cast<long long>(threads),
                  s.median, s.stddev);
      FlushStdout();
    }
  }
  if (!json) {
    std::printf("|   | output: %s | peak RSS %.1f MiB |   |   |   |\n",
                last.ToJson(1).dump().c_str(), PeakRssKiB() / 1024.0);
  }
  return OkStatus();
}

}  // namespace

int CmdBench(int argc, char** argv) {
  std::string pp_list = "64,512,1024", tg_list = "128", th_list, tools_list;
  std::string request = "turn on the light in the kitchen please";
  int64_t reps = 5, chunk = 512;
  bool json = false;
  FlagParser p("bench", "Measure prompt processing (ppN) and generation (tgN) in tokens/s.");
  CommonFlags common;
  common.Register(p, CommonFlags::kModel);
  p.AddString("-p,--n-prompt", &pp_list, "N,..", "Prompt lengths (default 64,512,1024; empty: none)");
  p.AddString("-n,--n-gen", &tg_list, "N,..", "Generation lengths (default 128; empty: none)");
  p.AddString("-t,--threads", &th_list, "N,..", "Thread counts (default: 1 and the core count)");
  p.AddInt("-r,--repetitions", &reps, "N", "Repetitions per test; the median is reported (default 5)");
  p.AddInt("--chunk", &chunk, "N", "Prefill chunk length (default 512)");
  p.AddBool("--json", &json, "Print a JSON list of results instead of a table");
  p.AddString("--tools", &tools_list, "FILE,..",
              "Tool catalogs: also measure time to call (ttc_cold, ttc_warm) for each");
  p.AddString("--request", &request, "TEXT",
              "The request for time to call (default: 'turn on the light in the kitchen please')");
  common.Register(p, CommonFlags::kLora);
  p.AddNote("ppN: time to process N prompt tokens from an empty context. tgN: time to generate N "
            "tokens one at a time from an empty context (as llama-bench measures them). ttc_cold: a new "
            "FunctionCaller for the catalog (grammar, catalog prefix prefill) and one call, "
            "greedy, constrained; ttc_warm: the same caller called again with the same request, "
            "which it prefills again (the session rewinds to its pinned catalog prefix; reuse of "
            "the previous request's tokens is off here); both in ms, median over repetitions. The JSON rows of ttc carry the "
            "prompt and output token ids (bench/compare.sh replays them in llama.cpp) and the "
            "process's peak RSS so far; run with -p '' -n '' to measure a call's RSS alone.");
  if (auto rc = p.Parse(argc, argv)) return *rc;
  auto pps = ParseList(pp_list, "-p");
  if (!pps.ok()) return ReportError("bench", pps.status(), true);
  auto tgs = ParseList(tg_list, "-n");
  if (!tgs.ok()) return ReportError("bench", tgs.status(), true);
  std::vector<int64_t> ths;
  if (th_list.empty()) {
    ths = {1};
    if (ThreadPool::DefaultThreads() > 1) ths.push_back(ThreadPool::DefaultThreads());
  } else {
    auto t = ParseList(th_list, "-t");
    if (!t.ok()) return ReportError("bench", t.status(), true);
    ths = *t;
  }
  for (int64_t t : ths) {
    if (Status s = CheckThreads(t); !s.ok()) return UsageError("bench", s.message());
  }
  if (reps < 1) return UsageError("bench", "-r must be >= 1");
  if (chunk < 1) return UsageError("bench", "--chunk must be >= 1");
  if (Status s = common.Check(); !s.ok()) return UsageError("bench", s.message());
  std::vector<std::string> catalogs;
  {
    std::stringstream ss(tools_list);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (!item.empty()) catalogs.push_back(item);
    }
  }
  // Everything the time-to-call tests need is checked before any measuring: the request
  // (usage), each catalog file and its contents (runtime, as in fgemma call).
  std::vector<std::string> catalog_texts;
  if (!catalogs.empty()) {
    if (Status s = CheckRequest(request); !s.ok()) {
      return UsageError("bench", "--request: " + s.message());
    }
  }
  for (const std::string& c : catalogs) {
    auto text = ReadFileToString(c);
    if (!text.ok()) return ReportError("bench", text.status().WithContext("--tools"));
    if (auto cat = text::ParseToolCatalog(*text); !cat.ok()) {
      return ReportError("bench", cat.status().WithContext("'" + c + "'"));
    }
    catalog_texts.push_back(std::move(*text));
  }
  auto model_path_or = common.ModelPath();
  if (!model_path_or.ok()) return ReportError("bench", model_path_or.status());
  const std::string model_path = *model_path_or;
  const bool speed_tests = std::any_of(pps->begin(), pps->end(), [](int64_t n) { return n > 0; }) ||
                           std::any_of(tgs->begin(), tgs->end(), [](int64_t n) { return n > 0; });
  // Loaded only when pp/tg tests run, so a ttc-only run's peak RSS is the call's alone.
  StatusOr<std::unique_ptr<runtime::Model>> model = std::unique_ptr<runtime::Model>();
  int64_t vocab = 0;
  if (speed_tests) {
    model = runtime::Model::Load(model_path, common.Loras());
    if (!model.ok()) return ReportError("bench", model.status());
    vocab = (*model)->config().vocab;
  }

  nlohmann::json results = nlohmann::json::array();
  if (!json) {
    std::printf("| model | isa | test | threads | tokens/s | stddev |\n|---|---|---|---|---|---|\n");
  }
  std::string model_name = model_path.substr(model_path.find_last_of('/') + 1);
  auto run_test = [&](const std::string& test, int64_t threads, int64_t n_prompt,
                      int64_t n_gen) -> Status {
    ThreadPool pool(static_cast<int>(threads));
    runtime::SessionOptions so;
    so.context = std::max<int64_t>(n_prompt + n_gen, 1);
    so.max_chunk = chunk;
    so.pool = &pool;
    FG_ASSIGN_OR_RETURN(auto session, runtime::Session::Create(**model, so));
    std::vector<int32_t> toks = BenchTokens(std::max(n_prompt, n_gen), vocab);
    std::vector<double> rates;
    for (int64_t r = -1; r < reps; ++r) {  // r = -1: warm-up (graphs built, pages faulted in)
      session->Reset();
      auto t0 = std::chrono::steady_clock::now();
      if (n_prompt > 0) {
        FG_RETURN_IF_ERROR(session->Append(std::span<const int32_t>(toks.data(), n_prompt)));
      } else {
        for (int64_t i = 0; i < n_gen; ++i) {
          FG_RETURN_IF_ERROR(session->Append(std::span<const int32_t>(&toks[i], 1)));
        }
      }
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r >= 0) rates.push_back((n_prompt > 0 ? n_prompt : n_gen) / std::max(s, 1e-9));
    }
    Stats st = Summarize(rates);
    std::string isa(kernels::IsaName(kernels::ActiveIsa()));
    if (json) {
      results.push_back({{"model", model_name}, {"isa", isa}, {"test", test}, {"threads", threads},
                         {"n_prompt", n_prompt}, {"n_gen", n_gen}, {"repetitions", reps},
                         {"tokens_per_s", st.median}, {"stddev", st.stddev}, {"samples", rates}});
    } else {
      std::printf("| %s | %s | %s | %lld | %.2f | %.2f |\n", model_name.c_str(), isa.c_str(),
                  test.c_str(), static_cast<long long>(threads), st.median, st.stddev);
      FlushStdout();
    }
    return OkStatus();
  };
  for (int64_t t : ths) {
    for (int64_t n : *pps) {
      if (n == 0) continue;
      if (Status s = run_test("pp" + std::to_string(n), t, n, 0); !s.ok()) return ReportError("bench", s);
    }
    for (int64_t n : *tgs) {
      if (n == 0) continue;
      if (Status s = run_test("tg" + std::to_string(n), t, 0, n); !s.ok()) return ReportError("bench", s);
    }
  }
  if (!catalogs.empty()) {
    model = std::unique_ptr<runtime::Model>();  // unmapped: the caller maps its own copy
    if (!json) {
      std::printf("\n| model | catalog | test (prompt+generated tokens) | threads | median | "
                  "stddev |\n|---|---|---|---|---|---|\n");
    }
    auto call_model = CallModel::Load(model_path, common.Adapters());
    if (!call_model.ok()) return ReportError("bench", call_model.status());
    for (int64_t t : ths) {
      for (size_t i = 0; i < catalogs.size(); ++i) {
        const std::string& c = catalogs[i];
        if (Status s = TimeToCall(*call_model, c, catalog_texts[i], request, t, reps, json,
                                  &results);
            !s.ok()) {
          return ReportError("bench", s.WithContext("time to call '" + c + "'"));
        }
      }
    }
  }
  // A model's file name can hold any bytes: the JSON replaces what is not UTF-8.
  if (json) {
    std::printf("%s\n",
                results.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  return kExitOk;
}

}  // namespace fg::cli
