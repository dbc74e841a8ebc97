#include "tools/fgemma/common_flags.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "src/base/file_io.h"
#include "src/base/thread_pool.h"
#include "src/call/runtime_model.h"
#include "src/gguf/reader.h"
#include "src/model/gemma3/lora.h"

namespace fg::cli {

Status CheckThreads(int64_t n) {
  if (n < 1 || n > kMaxThreads) {
    return InvalidArgumentError("-t must be in [1, " + std::to_string(kMaxThreads) + "], got " +
                                std::to_string(n));
  }
  return OkStatus();
}

int UsageError(const std::string& command, const std::string& message) {
  return ReportError(command, InvalidArgumentError(message), /*usage=*/true);
}

void CommonFlags::Register(FlagParser& p, unsigned which, const std::string& model_help) {
  parser_ = &p;
  which_ |= which;
  if (which & (kModel | kModelRequired)) {
    std::string help = model_help;
    if (help.empty()) {
      help = (which & kModelRequired)
                 ? "Input GGUF (required)"
                 : "GGUF model (default: $FGEMMA_MODEL or the installed PyPI model)";
    }
    p.AddString("-m,--model", &model_, "FILE", help);
  }
  if (which & kThreads) {
    p.AddInt("-t,--threads", &threads_, "N",
             "Threads, 1 to " + std::to_string(kMaxThreads) +
                 " (default: the cores this process may use)");
  }
  if (which & kContext) {
    p.AddInt("-c,--ctx-size", &context_, "N",
             "Context length in tokens (default 2048, or the model's trained context if "
             "shorter)");
  }
  if (which & kLora) lora_.Register(p);
  if (which & kCallLora) {
    p.AddBool("--no-lora", &no_lora_,
              "Without --lora, the shipped call adapter (models/fgemma-call-lora.gguf) is "
              "applied to the default model, also when -m names it or a copy of it (the same "
              "size and GGUF header); --no-lora runs the base model alone");
    p.AddString("--prior-lora", &prior_lora_, "FILE",
                "Adapter the tool prior (--tool-channel) runs with, trained for it (`fgemma tune "
                "--objective both|channel`); 'none': the --lora adapters' own prior. Default: "
                "with --lora adapters that did not learn the prior (an app's `fgemma tune` on "
                "its calls) on the default model, the shipped call adapter's prior");
  }
  if (which & kToolChannel) {
    p.AddDouble("--tool-channel", &tool_channel_, "W",
                "Weight of the noisy-channel tool prior: choosing a function adds W x log "
                "p(request | the tool's description) under the base model to the model's own "
                "choice (default 4 for a base Gemma 3 model taught by an adapter, 0 for "
                "FunctionGemma; 0: off; costs one short run per tool per request)");
    p.AddBool(
        "--no-arg-check", &no_argument_check_,
        "With the tool channel on, the same base model checks the call's arguments: an "
        "optional one is dropped when the request is more likely without it, an enum "
        "value replaced by a member the request is much likelier with (not an argument "
        "whose value the request says: \"for 80 days\" keeps days 80), an optional number "
        "the request does not say dropped, and an optional string with a word it does not say, "
        "a copied string cut before another argument's "
        "number (\"Max 12 kilos\": pet Max, kg 12) or string (\"French Italian\" beside "
        "\"Italian\": French); --no-arg-check keeps the arguments as "
        "decoded");
    p.AddBool("--no-arg-fill", &no_argument_fill_,
              "With an app's adapter (`fgemma tune --tools`, which records the arguments its "
              "examples give) and the shipped call adapter's tool prior: a call that leaves out "
              "an optional argument none of the app's examples gives for its tool is decoded "
              "again with the call adapter, and the arguments it gives there are added when it "
              "names the same function (\"subtitles in French\": the language; an enum member "
              "only when the request says it); --no-arg-fill keeps the app adapter's call");
    p.AddBool("--no-typo-fix", &no_typo_fix_,
              "On a base Gemma 3 model taught by an adapter, a request word the vocabulary does "
              "not know is read as the one word of the catalog (names, descriptions, enum "
              "members, examples) one edit away (\"Feeed Coco\": Feed; \"sutitles\": subtitles; "
              "known words and names stay as written; --stats shows the request as read); "
              "--no-typo-fix reads the request as written");
    p.AddDouble("--blend", &blend_, "W",
                "With an app's adapter (`fgemma tune --tools`) and the shipped call adapter's "
                "tool prior: both adapters decode the call together, and each token the app's "
                "adapter is unsure of (its first choice under 97 % likely) is chosen by "
                "(1 - W) x log p(app) + W x log p(call adapter): the app's few examples teach "
                "what they show, the adapter it was tuned from keeps what they never say "
                "(default 0.4; 0: the app's adapter alone; below 1)");
    p.AddDouble(
        "--copy-bias", &copy_bias_, "B",
        "Bias added to the tokens that copy the request's text into a string value, and "
        "the digits of a number the request says into a number value once it has begun "
        "(from the first digit when said in the argument's unit, \"5 minutes\", or "
        "converted to it, \"two hours\" -> 120 for minutes, \"2 liters\" -> 2000 for ml); "
        "with it, an argument the request names (a number's unit, \"for 5 minutes\", an "
        "enum member, \"resting\", or a boolean's key, \"mute\", or its undoing, "
        "\"unmute\": false, or a sum of money for the money parameter, \"$60\") is not left "
        "out, a word begun as one of the request's goes on as one of its words "
        "(\"Milo\", not \"Milano\"), and a copy stopped inside one of them goes on to "
        "its end (\"maria.g@example.net\", not \"maria\") (default 8 for a base Gemma 3 "
        "model taught "
        "by an adapter, 0 for FunctionGemma; 0: off)");
  }
  if (which & kPrepack) {
    p.AddBool("--prepack", &prepack_,
              "Pack the weights' matmul panels once after loading, as fgemma serve does: the "
              "matmuls of two tokens or more (the tool prior's runs, a request's prefill, "
              "drafts) then run them instead of packing them per call. The same output, about "
              "11 % faster requests, ~300 MiB more memory with the 270M Q4_K_M model, and the "
              "packing's time at start: for many requests in one process (default: off)");
  }
}

Status CommonFlags::Prepack(const CallModel& model) const {
  if (!prepack_) return OkStatus();
  ThreadPool pool(Threads());
  return call::PrepackPanels(model, &pool);
}

Status CommonFlags::Check() const {
  if ((which_ & kModelRequired) && model_.empty()) {
    return InvalidArgumentError("missing -m FILE");
  }
  if ((which_ & kModel) && parser_->WasSet("-m") && model_.empty()) {
    return InvalidArgumentError("-m needs a file name, got ''");
  }
  if ((which_ & kThreads) && parser_->WasSet("-t")) FG_RETURN_IF_ERROR(CheckThreads(threads_));
  if ((which_ & kContext) && parser_->WasSet("-c")) {
    if (context_ < 1 || context_ > kMaxContext) {
      return InvalidArgumentError("-c must be in [1, " + std::to_string(kMaxContext) +
                                  "], got " + std::to_string(context_));
    }
  }
  if (which_ & kLora) FG_RETURN_IF_ERROR(lora_.Specs().status());
  if ((which_ & kCallLora) && parser_->WasSet("--prior-lora") && prior_lora_.empty()) {
    return InvalidArgumentError("--prior-lora needs a file name or 'none', got ''");
  }
  if ((which_ & kToolChannel) && parser_->WasSet("--tool-channel") &&
      !(std::isfinite(tool_channel_) && tool_channel_ >= 0)) {
    return InvalidArgumentError("--tool-channel must be a weight >= 0 (0: off)");
  }
  if ((which_ & kToolChannel) && parser_->WasSet("--blend") &&
      !(std::isfinite(blend_) && blend_ >= 0 && blend_ < 1)) {
    return InvalidArgumentError("--blend must be a weight in [0, 1) (0: off)");
  }
  if ((which_ & kToolChannel) && parser_->WasSet("--copy-bias") &&
      !(std::isfinite(copy_bias_) && copy_bias_ >= 0)) {
    return InvalidArgumentError("--copy-bias must be a bias >= 0 (0: off)");
  }
  return OkStatus();
}

StatusOr<std::string> CommonFlags::ModelPath() const {
  if (!model_.empty()) return model_;
  return DefaultModelPath();
}

int CommonFlags::Threads() const {
  return threads_ > 0 ? static_cast<int>(threads_) : ThreadPool::DefaultThreads();
}

Status CommonFlags::CheckContext(int64_t trained) const {
  if (parser_ != nullptr && parser_->WasSet("-c") && trained > 0 && context_ > trained) {
    return InvalidArgumentError("-c " + std::to_string(context_) +
                                " exceeds the model's trained context of " +
                                std::to_string(trained) + " tokens");
  }
  return OkStatus();
}

int64_t CommonFlags::Context(int64_t trained, int64_t fallback) const {
  if (parser_ != nullptr && parser_->WasSet("-c")) return context_;
  return trained > 0 ? std::min(fallback, trained) : fallback;
}

int64_t CommonFlags::ContextOrZero() const {
  return parser_ != nullptr && parser_->WasSet("-c") ? context_ : 0;
}

std::vector<runtime::LoraSpec> CommonFlags::Loras() const {
  auto specs = lora_.Specs();
  return specs.ok() ? *specs : std::vector<runtime::LoraSpec>{};
}

std::vector<LoraAdapterFile> CommonFlags::Adapters() const {
  std::vector<LoraAdapterFile> out;
  for (const runtime::LoraSpec& l : Loras()) out.push_back({l.path, l.scale});
  return out;
}

bool CommonFlags::ShippedAdaptersApply() const {
  return !no_lora_ && (model_.empty() || IsDefaultModel(model_));
}

std::vector<LoraAdapterFile> CommonFlags::CallAdapters() const {
  std::vector<LoraAdapterFile> out = Adapters();
  if (!out.empty() || !ShippedAdaptersApply()) return out;
  if (std::string path = DefaultCallAdapterPath(); !path.empty()) {
    out.push_back({path, 1.0f});
  } else {  // each command asks once
    std::fprintf(stderr,
                 "fgemma: note: the shipped call adapter (fgemma-call-lora.gguf) is not in "
                 "$FGEMMA_CALL_LORA, ../models or ../share/fgemma beside this program: the base "
                 "model runs alone, and it was never taught to call (--no-lora says so "
                 "without this note; --lora FILE names an adapter)\n");
  }
  return out;
}

namespace {

// The adapter file says it learnt the tool prior (fgemma.lora.channel = "adapted"); false when
// it cannot be read (CallModel::Load then reports it).
bool LearntPrior(const std::string& path) {
  auto f = gguf::File::Open(path);
  if (!f.ok()) return false;
  auto mode = model::LoraMode(**f, "fgemma.lora.channel", "base");
  return mode.ok() && *mode == "adapted";
}

}  // namespace

std::vector<LoraAdapterFile> CommonFlags::PriorAdapters() const {
  if (prior_lora_ == "none") return {};
  if (!prior_lora_.empty()) return {{prior_lora_, 1.0f}};
  const std::vector<LoraAdapterFile> named = Adapters();
  if (named.empty() || !ShippedAdaptersApply()) return {};
  for (const LoraAdapterFile& a : named) {
    if (LearntPrior(a.path)) return {};
  }
  const std::string path = DefaultCallAdapterPath();
  if (path.empty() || !LearntPrior(path)) return {};
  return {{path, 1.0f}};
}

namespace {

// `n` bytes of a file from `at`, or "" when they cannot be read.
std::string Bytes(std::ifstream& in, uint64_t at, uint64_t n) {
  std::string out(n, '\0');
  in.seekg(static_cast<std::streamoff>(at));
  if (!in.read(out.data(), static_cast<std::streamsize>(n))) return "";
  return out;
}

}  // namespace

bool IsDefaultModel(const std::string& path) {
  const StatusOr<std::string> dflt = DefaultModelPath();
  if (!dflt.ok()) return false;
  std::error_code ec;
  if (std::filesystem::equivalent(path, *dflt, ec)) return true;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size != std::filesystem::file_size(*dflt, ec) || ec) return false;
  auto a = gguf::File::Open(path);
  auto b = gguf::File::Open(*dflt);
  if (!a.ok() || !b.ok() || (*a)->data_offset() != (*b)->data_offset()) return false;
  std::ifstream fa(path, std::ios::binary), fb(*dflt, std::ios::binary);
  const uint64_t header = (*a)->data_offset();
  const std::string ha = Bytes(fa, 0, header);
  if (ha.empty() || ha != Bytes(fb, 0, header)) return false;
  // The same header with other weights (a fine-tune or a merged adapter, quantized alike): each
  // tensor's first bytes differ where its weights do.
  for (const gguf::TensorInfo& t : (*a)->tensors()) {
    const uint64_t at = header + t.offset, n = std::min<uint64_t>(t.size_bytes, 256);
    const std::string ta = Bytes(fa, at, n);
    if (ta.empty() || ta != Bytes(fb, at, n)) return false;
  }
  return true;
}

namespace {

// $env, else the first of `name` in ../models/ and ../share/fgemma/ beside the executable.
std::string ShippedFile(const char* env_var, const std::string& name) {
  if (const char* env = std::getenv(env_var)) return env;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const std::string& rel : {"../models/" + name, "../share/fgemma/" + name}) {
    const std::filesystem::path p = exe.parent_path() / rel;
    if (std::filesystem::is_regular_file(p, ec)) return p.lexically_normal().string();
  }
  return "";
}

}  // namespace

std::string DefaultCallAdapterPath() {
  return ShippedFile("FGEMMA_CALL_LORA", "fgemma-call-lora.gguf");
}

std::string DefaultTuneAdapterPath() {
  const std::string path = ShippedFile("FGEMMA_TUNE_LORA", "fgemma-tune-lora.gguf");
  return path.empty() ? DefaultCallAdapterPath() : path;
}

Status ForEachLabelledRequest(const std::string& path, const std::string& flag,
                              const std::function<void(int, const nlohmann::json&)>& take) {
  const std::string where = (flag.empty() ? "" : flag + " ") + "'" + path + "'";
  StatusOr<std::string> text = ReadFileToString(path, uint64_t{256} << 20);
  if (!text.ok()) return flag.empty() ? text.status() : text.status().WithContext(flag);
  std::istringstream in(*text);
  std::string line;
  int taken = 0;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto fail = [&](const std::string& why) {
      return InvalidArgumentError(where + " line " + std::to_string(n) + ": " + why);
    };
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return fail("not a JSON object");
    if (!j.contains("request") || !j["request"].is_string() ||
        j["request"].get_ref<const std::string&>().empty()) {
      return fail("no \"request\" string");
    }
    if (!j.contains("calls") || !j["calls"].is_array() || j["calls"].empty()) {
      return fail("no \"calls\" array with a call");
    }
    for (const nlohmann::json& c : j["calls"]) {
      if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) {
        return fail("a call has no \"name\"");
      }
    }
    take(n, j);
    ++taken;
  }
  if (taken == 0) return InvalidArgumentError(where + " holds no example");
  return OkStatus();
}

StatusOr<std::vector<std::pair<std::string, std::string>>> ReadToolExamples(
    const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  FG_RETURN_IF_ERROR(ForEachLabelledRequest(path, "--examples", [&](int, const nlohmann::json& j) {
    std::vector<std::string> names;
    for (const nlohmann::json& c : j["calls"]) {
      const std::string& name = c["name"].get_ref<const std::string&>();
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    for (std::string& name : names) out.emplace_back(std::move(name), j["request"]);
  }));
  return out;
}

}  // namespace fg::cli
