// fgemma eval: call accuracy on labelled requests, per catalog (valid calls, right function,
// right function and arguments), with the misses listed.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fgemma/function_caller.h"
#include "src/base/file_io.h"
#include "src/text/tokenizer.h"
#include "tools/fgemma/commands.h"
#include "tools/fgemma/common_flags.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {
namespace {

struct Example {
  int line = 0;
  std::string request;
  nlohmann::json want;  // the first expected call {"name", "arguments"}
};

// Lines {"request": ..., "calls": [{"name", "arguments"}, ...]}; the first call is scored.
StatusOr<std::vector<Example>> ReadExamples(const std::string& path) {
  std::vector<Example> out;
  FG_RETURN_IF_ERROR(ForEachLabelledRequest(path, "", [&](int n, const nlohmann::json& j) {
    const nlohmann::json& c = j["calls"][0];
    Example e;
    e.line = n;
    e.request = j["request"];
    e.want = {{"name", c["name"]},
              {"arguments", c.contains("arguments") ? c["arguments"] : nlohmann::json::object()}};
    out.push_back(std::move(e));
  }));
  return out;
}

struct Score {
  std::string catalog;
  int n = 0, valid = 0, function = 0, exact = 0;
  double ms = 0;
  nlohmann::json misses = nlohmann::json::array();
};

std::string Pct(int a, int n) {
  char b[32];
  std::snprintf(b, sizeof(b), "%d/%d (%.1f %%)", a, n, n ? 100.0 * a / n : 0.0);
  return b;
}

}  // namespace

int CmdEval(int argc, char** argv) {
  std::vector<std::string> tools, data, examples;
  int64_t max_tokens = 256, limit = 0, show_misses = 10;
  bool json = false;
  FlagParser p("eval",
               "Call accuracy on labelled requests: for each --tools CATALOG and --data FILE "
               "pair, greedy constrained calls scored as valid, right function, and right "
               "function with exactly the expected arguments.");
  CommonFlags common;
  common.Register(p, CommonFlags::kModel);
  p.AddStringList("--tools", &tools, "FILE", "Tool catalog (repeatable, paired with --data in order)");
  p.AddStringList("--data", &data, "FILE",
                  "JSONL of {\"request\": ..., \"calls\": [{\"name\", \"arguments\"}]} (repeatable)");
  p.AddStringList("--examples", &examples, "FILE",
                  "Labelled requests listed as examples of their tools in the tool prior's "
                  "texts (as fgemma call --examples; repeatable, paired with --tools in order: "
                  "all or none)");
  common.Register(p, CommonFlags::kLora | CommonFlags::kCallLora | CommonFlags::kToolChannel);
  p.AddInt("-n,--max-tokens", &max_tokens, "N", "Generated tokens per request at most (default 256)");
  common.Register(p, CommonFlags::kThreads);
  p.AddInt("--limit", &limit, "N", "Score only the first N examples of each file (0: all)");
  p.AddInt("--misses", &show_misses, "N", "Misses listed per catalog (default 10; -1: all)");
  p.AddBool("--json", &json, "Print the scores and misses as JSON");
  common.Register(p, CommonFlags::kPrepack);
  p.AddNote("Arguments match when they are equal as JSON values (21 equals 21.0). Exit codes: 0 "
            "ok, 1 runtime error (bad file, model), 2 usage error.");
  if (auto rc = p.Parse(argc, argv)) return *rc;
  auto usage = [&](const std::string& m) { return ReportError("eval", InvalidArgumentError(m), true); };
  if (tools.empty() || tools.size() != data.size()) {
    return usage("give --tools CATALOG and --data FILE in pairs (at least one)");
  }
  if (!examples.empty() && examples.size() != tools.size()) {
    return usage("give one --examples FILE per --tools CATALOG, or none");
  }
  if (Status s = common.Check(); !s.ok()) return usage(s.message());
  if (max_tokens < 1) return usage("-n must be >= 1");
  if (limit < 0) return usage("--limit must be >= 0");
  FunctionCallerOptions o;
  o.max_tokens = max_tokens;
  o.threads = common.ThreadsOrZero();
  common.ApplyCallFlags(o);
  if (Status s = ValidateOptions(o); !s.ok()) return usage(s.message());

  std::vector<std::vector<Example>> sets;
  std::vector<std::string> catalogs;
  for (size_t i = 0; i < tools.size(); ++i) {
    auto ex = ReadExamples(data[i]);
    if (!ex.ok()) return ReportError("eval", ex.status());
    if (limit > 0 && static_cast<int64_t>(ex->size()) > limit) ex->resize(limit);
    sets.push_back(std::move(*ex));
    auto c = ReadFileToString(tools[i]);
    if (!c.ok()) return ReportError("eval", c.status().WithContext("--tools"));
    catalogs.push_back(std::move(*c));
  }
  std::vector<std::vector<std::pair<std::string, std::string>>> tool_examples(tools.size());
  for (size_t i = 0; i < examples.size(); ++i) {
    auto ex = ReadToolExamples(examples[i]);
    if (!ex.ok()) return ReportError("eval", ex.status());
    tool_examples[i] = std::move(*ex);
  }
  auto model_path = common.ModelPath();
  if (!model_path.ok()) return ReportError("eval", model_path.status());
  auto model = CallModel::Load(*model_path, common.CallAdapters(), common.PriorAdapters());
  if (!model.ok()) return ReportError("eval", model.status());
  if (Status s = common.Prepack(**model); !s.ok()) return ReportError("eval", s);

  // Progress on stderr: one updating line on a terminal, else a plain line every 25 requests
  // and at each catalog's end (logs and pipes get no carriage returns).
  const bool tty = ::isatty(2) != 0;
  std::vector<Score> scores;
  Score total;
  total.catalog = "all";
  for (size_t i = 0; i < tools.size(); ++i) {
    o.tool_examples = tool_examples[i];
    auto caller = FunctionCaller::Create(*model, catalogs[i], o);
    if (!caller.ok()) return ReportError("eval", caller.status().WithContext("'" + tools[i] + "'"));
    Score s;
    s.catalog = tools[i];
    for (size_t k = 0; k < sets[i].size(); ++k) {
      const Example& e = sets[i][k];
      if (!json && (tty || k % 25 == 0 || k + 1 == sets[i].size())) {
        std::fprintf(stderr, tty ? "\r%s: %zu/%zu" : "%s: %zu/%zu\n", tools[i].c_str(), k + 1,
                     sets[i].size());
      }
      auto r = (*caller)->Call(e.request);
      if (!r.ok()) {
        return ReportError("eval", r.status().WithContext("'" + data[i] + "' line " +
                                                          std::to_string(e.line)));
      }
      ++s.n;
      s.ms += r->stats.total_ms;
      const bool valid = r->validity.ok() && !r->calls.empty();
      const bool fn = valid && r->calls[0].name == e.want["name"];
      const bool exact = fn && r->calls[0].arguments == e.want["arguments"];
      s.valid += valid;
      s.function += fn;
      s.exact += exact;
      if (!exact) {
        s.misses.push_back({{"line", e.line},
                            {"request", e.request},
                            {"want", e.want},
                            {"got", r->ToJson(1)}});
      }
    }
    if (!json && tty) std::fprintf(stderr, "\n");
    total.n += s.n;
    total.valid += s.valid;
    total.function += s.function;
    total.exact += s.exact;
    total.ms += s.ms;
    scores.push_back(std::move(s));
  }
  if (scores.size() > 1) scores.push_back(total);

  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Score& s : scores) {
      out.push_back({{"catalog", s.catalog}, {"requests", s.n}, {"valid", s.valid},
                     {"function", s.function}, {"exact", s.exact},
                     {"ms_per_request", s.n ? s.ms / s.n : 0.0}, {"misses", s.misses}});
    }
    std::printf("%s\n", out.dump(1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  std::printf("| catalog | requests | valid calls | right function | right function and arguments | ms/request |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Score& s : scores) {
    std::printf("| %s | %d | %s | %s | %s | %.0f |\n", s.catalog.c_str(), s.n,
                Pct(s.valid, s.n).c_str(), Pct(s.function, s.n).c_str(),
                Pct(s.exact, s.n).c_str(), s.n ? s.ms / s.n : 0.0);
  }
  for (const Score& s : scores) {
    if (s.catalog == "all" || s.misses.empty() || show_misses == 0) continue;
    std::printf("\nmisses in %s:\n", s.catalog.c_str());
    int shown = 0;
    for (const auto& m : s.misses) {
      if (show_misses >= 0 && shown++ >= show_misses) break;
      std::printf("  line %d: %s\n    want %s\n    got  %s\n", m["line"].get<int>(),
                  m["request"].get<std::string>().c_str(),
                  m["want"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str(),
                  m["got"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    }
  }
  return kExitOk;
}

}  // namespace fg::cli
