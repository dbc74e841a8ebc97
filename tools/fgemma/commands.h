// The subcommands of the fgemma CLI. Each lives in its own cmd_<name>.cc, takes argv with
// argv[0] = the subcommand name, and returns an exit code (flags.h: 0, 1 runtime, 2 usage).
#ifndef FGEMMA_TOOLS_COMMANDS_H_
#define FGEMMA_TOOLS_COMMANDS_H_

namespace fg::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};

int CmdInspect(int argc, char** argv);
int CmdMkmodel(int argc, char** argv);
int CmdTokenize(int argc, char** argv);
int CmdRun(int argc, char** argv);
int CmdCall(int argc, char** argv);
int CmdBench(int argc, char** argv);
int CmdQuantize(int argc, char** argv);
int CmdExport(int argc, char** argv);
int CmdInvoke(int argc, char** argv);
int CmdMerge(int argc, char** argv);
int CmdEval(int argc, char** argv);
int CmdMklora(int argc, char** argv);
int CmdTune(int argc, char** argv);
// Runs fgemma-serve (beside this executable) with the arguments: the server is its own
// executable, so only it loads the HTTP and TLS libraries (cmd_serve_exec.cc).
int CmdServe(int argc, char** argv);
// The server itself (cmd_serve.cc, linked into fgemma-serve only).
int CmdServeMain(int argc, char** argv);

// Every subcommand, in the order `fgemma --help` lists them.
inline constexpr Command kCommands[] = {
    {"call", "Turn a request into a function call of a tool catalog (JSON out)", CmdCall},
    {"serve", "Serve function calling over HTTP (OpenAI's chat API, many clients)", CmdServe},
    {"tune", "Train a LoRA adapter on labelled function calls (on the CPU)", CmdTune},
    {"eval", "Score calls on labelled requests (valid, right function, right arguments)", CmdEval},
    {"run", "Generate text from a prompt (Gemma chat template), streaming", CmdRun},
    {"quantize", "Requantize a GGUF's weights to another type (like llama-quantize)", CmdQuantize},
    {"inspect", "Show a GGUF file's metadata and tensor table", CmdInspect},
    {"merge", "Fold LoRA adapters into a model's weights (like llama-export-lora)", CmdMerge},
    {"mkmodel", "Write a deterministic random Gemma 3 GGUF (tests, benchmarks)", CmdMkmodel},
    {"mklora", "Write a deterministic random LoRA adapter for a model (tests, benchmarks)", CmdMklora},
    {"tokenize", "Tokenize text with a model's vocabulary (ids, pieces)", CmdTokenize},
    {"bench", "Measure prompt processing and generation speed (ppN, tgN)", CmdBench},
    {"export", "Export the contract's functions as StableHLO + IREE parameter archive + manifest", CmdExport},
    {"invoke", "Run one contract function on the host (iree-run-module's input/output syntax)", CmdInvoke},
};

// Runs the CLI (main() calls this; tests call it in-process). Installs the handler that removes
// temporary files on SIGINT/SIGTERM/SIGHUP, turns exceptions into exit 1 and checks stdout
// (FinishStdout).
int Main(int argc, char** argv);

// Flushes stdout and checks its error flag after `command` returned `rc`: a lost write (a full
// disk, a closed pipe) is reported on stderr, naming the error, and turns exit 0 into 1.
int FinishStdout(const char* command, int rc);

// One subcommand as Main runs it: the temporary-file handlers installed, exceptions reported
// (exit 1), stdout checked. For executables that are one command (fgemma-serve).
int RunSubcommand(const Command& c, int argc, char** argv);

// fflush(stdout) for subcommands that stream: remembers why the first failure failed, for
// FinishStdout's message (the stream's error flag alone does not say).
void FlushStdout();

}  // namespace fg::cli

#endif  // FGEMMA_TOOLS_COMMANDS_H_
