// The flags most subcommands share, registered and checked in one place so that each has one
// spelling, one rule and one message: -m/--model (with the default model), -t/--threads,
// -c/--ctx-size and the LoRA flags (lora_flags.h). A bad value is a usage error (exit 2).
#ifndef FGEMMA_TOOLS_COMMON_FLAGS_H_
#define FGEMMA_TOOLS_COMMON_FLAGS_H_

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "fgemma/function_caller.h"
#include "fgemma/status.h"
#include "src/runtime/model.h"
#include "tools/fgemma/flags.h"
#include "tools/fgemma/lora_flags.h"

namespace fg::cli {

inline constexpr int64_t kMaxThreads = 256;
inline constexpr int64_t kMaxContext = int64_t{1} << 20;

// The one rule for a thread count (-t N; bench's -t N,N checks each value with it).
Status CheckThreads(int64_t n);

// "fgemma CMD: MESSAGE" on stderr; returns kExitUsage.
int UsageError(const std::string& command, const std::string& message);

class CommonFlags {
 public:
  enum Which : unsigned {
    kModel = 1,          // -m FILE, default $FGEMMA_MODEL or the installed PyPI model
    kModelRequired = 2,  // -m FILE, required (the input of quantize, merge, ...)
    kThreads = 4,        // -t N in [1, kMaxThreads]; default: the cores this process may use
    kContext = 8,        // -c N in [1, kMaxContext], at most the model's trained context
    kLora = 16,          // --lora, --lora-scaled
    // With kLora: --no-lora, and without any --lora the shipped call adapter
    // (DefaultCallAdapterPath) is applied to the default model, also when -m names it or a copy
    // of it (call, eval, serve).
    kCallLora = 32,
    // --tool-channel W, --no-arg-check, --no-arg-fill, --blend W, --copy-bias B, --no-typo-fix:
    // FunctionCallerOptions::tool_channel, argument_check, fill_arguments, blend, copy_bias and
    // fix_typos (call, eval, serve).
    kToolChannel = 64,
    // --prepack: Prepack() packs the weights' matmul panels once (call, eval).
    kPrepack = 128,
  };

  // Adds the flags of `which` (may be called more than once, to place them in --help);
  // `model_help` replaces the -m help text (kModelRequired: "Input GGUF (required)").
  void Register(FlagParser& p, unsigned which, const std::string& model_help = "");

  // Checks what was given (after FlagParser::Parse): InvalidArgument naming the flag, a usage
  // error. The model file itself is not looked at.
  Status Check() const;

  // -m, or the default model (NotFound when none is installed: a runtime error).
  StatusOr<std::string> ModelPath() const;
  // -t, or the cores this process may use.
  int Threads() const;
  // -t as given, 0 when not (FunctionCallerOptions::threads: 0 is the default).
  int ThreadsOrZero() const { return static_cast<int>(threads_); }
  // -c against the model's trained context (0: unknown): InvalidArgument (usage) beyond it.
  Status CheckContext(int64_t trained) const;
  // -c, or the default: `fallback`, or the trained context when that is shorter.
  int64_t Context(int64_t trained, int64_t fallback = 2048) const;
  // -c as given, 0 when not.
  int64_t ContextOrZero() const;
  // The adapters in flag order (Check() has checked their spelling).
  std::vector<runtime::LoraSpec> Loras() const;
  std::vector<LoraAdapterFile> Adapters() const;
  // Adapters() for kCallLora commands: the shipped call adapter when none is named, --no-lora is
  // not given, and -m is not given or names the default model (IsDefaultModel).
  std::vector<LoraAdapterFile> CallAdapters() const;
  // CallModel::Load's prior_loras for kCallLora commands: --prior-lora FILE; none with
  // --prior-lora none; else, when --lora names adapters none of which learnt the tool prior
  // (fgemma.lora.channel = "adapted": an app's adapter tuned on its calls), --no-lora is not
  // given and the model is the default one, the shipped call adapter if it learnt the prior.
  std::vector<LoraAdapterFile> PriorAdapters() const;
  // Sets the fields the kToolChannel flags give in a FunctionCallerOptions or a
  // serve::ServiceOptions, which share their names (one place for call, eval and serve):
  // tool_channel and copy_bias as given, else -1 (the caller's default); argument_check and
  // fill_arguments false with --no-arg-check / --no-arg-fill; fix_typos 0 with --no-typo-fix,
  // else -1 (the caller's default); blend as given, else the struct's own default.
  template <class Options>
  void ApplyCallFlags(Options& o) const {
    o.tool_channel = tool_channel_;
    o.argument_check = !no_argument_check_;
    o.fill_arguments = !no_argument_fill_;
    o.fix_typos = no_typo_fix_ ? 0 : -1;
    if (blend_ >= 0) o.blend = blend_;
    o.copy_bias = copy_bias_;
  }
  // With --prepack: the calling model's matmul panels (runtime::Model::PrepackPanels, which the
  // tool prior's model shares), packed on -t threads; without it nothing.
  Status Prepack(const CallModel& model) const;

 private:
  // Neither --no-lora nor another model than the default one: the shipped adapters may apply.
  bool ShippedAdaptersApply() const;
  const FlagParser* parser_ = nullptr;
  unsigned which_ = 0;
  std::string model_;
  int64_t threads_ = 0, context_ = 0;
  LoraFlags lora_;
  bool no_lora_ = false;
  std::string prior_lora_;
  double tool_channel_ = -1;
  bool no_argument_check_ = false;
  bool no_argument_fill_ = false;
  bool no_typo_fix_ = false;
  double blend_ = -1;
  double copy_bias_ = -1;
  bool prepack_ = false;
};

// The shipped call adapter (models/fgemma-call-lora.gguf, trained by `make adapter`):
// $FGEMMA_CALL_LORA if set (empty: none), else next to the binary's ../models/ (a build tree) or
// ../share/fgemma/ (an install); "" when there is none.
std::string DefaultCallAdapterPath();
// Where `fgemma tune` for an app starts on the default model: the calls-only stage of `make
// adapter`, found as DefaultCallAdapterPath finds its file (models/fgemma-tune-lora.gguf;
// $FGEMMA_TUNE_LORA), whose per-app tunes measured better than those from the call adapter,
// which also learnt the tool prior (docs/tuning.md); DefaultCallAdapterPath when there is none
// (or $FGEMMA_TUNE_LORA is empty).
std::string DefaultTuneAdapterPath();

// True when `path` is the default model (DefaultModelPath, the one the shipped call adapter was
// trained on): the same file, or a copy of it (the same size, the same GGUF header: metadata and
// tensor table, which hold the tokenizer and every tensor's type, shape and offset; and the
// same first 256 bytes of every tensor, which differ where a fine-tune changed the weights).
bool IsDefaultModel(const std::string& path);

// The labelled requests of a {"request": ..., "calls": [{"name": ..., "arguments": ...}, ...]}
// file (fgemma eval's --data, call's and eval's --examples): each non-blank line a JSON object
// with a non-empty "request" string and a "calls" array of at least one call, each with a
// "name" string; `take(line number, object)` gets each. A bad line is InvalidArgument naming
// the file and the line (after `flag`, when given), a file without one too.
Status ForEachLabelledRequest(const std::string& path, const std::string& flag,
                              const std::function<void(int, const nlohmann::json&)>& take);

// `--examples FILE` of fgemma call and eval: labelled requests ({"request": ..., "calls":
// [{"name": ...}, ...]} lines, as fgemma tune and eval read them) as (tool name, request) pairs
// for FunctionCallerOptions::tool_examples: one for each tool a line calls. Blank lines are
// skipped; a bad line is InvalidArgument naming it; a file with no example too.
StatusOr<std::vector<std::pair<std::string, std::string>>> ReadToolExamples(
    const std::string& path);

}  // namespace fg::cli

#endif  // FGEMMA_TOOLS_COMMON_FLAGS_H_
