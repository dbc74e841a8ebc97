// Hostile and careless input to the CLI (issue 12): what fgemma did not write is never deleted,
// no exception or invalid UTF-8 reaches the user as a crash, lost stdout is an error, FIFOs and
// devices are refused at once, input is bounded, and interrupted or failed runs leave no
// temporary files.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/testing/cli_runner.h"

namespace fg {
namespace {

namespace fs = std::filesystem;
using ::fg::testing::CliResult;
using ::fg::testing::RunCommand;
using ::fg::testing::RunFgemma;
using ::fg::testing::TempPath;
using ::testing::HasSubstr;

const std::string& Model() {
  static const std::string path = [] {
    const std::string p = TempPath("hardening_tiny.gguf");
    EXPECT_EQ(RunFgemma("mkmodel -o " + p + " --context 4096").rc, 0);
    return p;
  }();
  return path;
}

// A model whose export and requantization take long enough (about 0.5 s) to be interrupted.
const std::string& BigModel() {
  static const std::string path = [] {
    const std::string p = TempPath("hardening_big.gguf");
    EXPECT_EQ(RunFgemma("mkmodel -o " + p +
                        " --preset small --hidden 512 --ffn 2048 --layers 8 --vocab 32000")
                  .rc,
              0);
    return p;
  }();
  return path;
}

std::string Write(const std::string& name, const std::string& text) {
  const std::string p = TempPath(name);
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
  return p;
}

// A fresh folder in the test's temporary folder.
std::string NewDir(const std::string& name) {
  const std::string d = TempPath(name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string Fifo(const std::string& name) {
  const std::string p = TempPath(name);
  fs::remove(p);
  EXPECT_EQ(::mkfifo(p.c_str(), 0600), 0);
  return p;
}

// Entries of `dir` whose name starts with `prefix`.
int CountPrefixed(const std::string& dir, const std::string& prefix) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    n += e.path().filename().string().rfind(prefix, 0) == 0;
  }
  return n;
}

// The CLI with a time limit: a hang is a failure, not a stuck test.
CliResult RunLimited(const std::string& args, int seconds = 60) {
  return RunCommand("timeout " + std::to_string(seconds) + " " + FG_CLI_PATH + " " + args);
}

// --- item 1: export never deletes what it did not write -------------------------------------

TEST(CliHardening, ExportRefusesAFolderItDidNotWrite) {
  const std::string d = NewDir("exp_notes");
  std::ofstream(d + "/notes.txt") << "x";
  auto r = RunFgemma("export -m " + Model() + " -o " + d);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("holds 'notes.txt', which fgemma export does not write"));
  EXPECT_TRUE(fs::exists(d + "/notes.txt"));
  EXPECT_EQ(CountPrefixed(TempPath(""), ".exp_notes.tmp"), 0);

  // A folder with some other program's manifest.json is not an earlier export.
  const std::string web = NewDir("exp_webapp");
  std::ofstream(web + "/manifest.json") << R"({"name": "my web app"})";
  r = RunFgemma("export -m " + Model() + " -o " + web);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("not an earlier export"));
  EXPECT_TRUE(fs::exists(web + "/manifest.json"));

  // An earlier export with a file of the user's in it is refused too; without it, replaced.
  const std::string e = TempPath("exp_earlier");
  fs::remove_all(e);
  ASSERT_EQ(RunFgemma("export -m " + Model() + " -o " + e).rc, 0);
  std::ofstream(e + "/mine.txt") << "keep me";
  r = RunFgemma("export -m " + Model() + " --graph prefill -o " + e);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(fs::exists(e + "/mine.txt"));
  EXPECT_TRUE(fs::exists(e + "/gemma_at.mlir"));
  fs::remove(e + "/mine.txt");
  r = RunFgemma("export -m " + Model() + " --graph prefill -o " + e);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_FALSE(fs::exists(e + "/gemma_at.mlir"));
  EXPECT_TRUE(fs::exists(e + "/gemma_prefill.mlir"));
  // An empty folder is fine.
  const std::string empty = NewDir("exp_empty");
  EXPECT_EQ(RunFgemma("export -m " + Model() + " --graph prefill -o " + empty).rc, 0);
}

// `-o ..` used to empty the parent folder; `-o .` the current one.
TEST(CliHardening, ExportRefusesTheCurrentFolderAndItsParents) {
  const std::string parent = NewDir("exp_parent");
  std::ofstream(parent + "/precious.txt") << "x";
  fs::create_directories(parent + "/work");
  for (const std::string& out : std::vector<std::string>{"..", "../", ".", "./", parent, "/"}) {
    auto r = RunCommand("cd " + parent + "/work && " + FG_CLI_PATH + " export -m " + Model() +
                        " -o " + out);
    EXPECT_EQ(r.rc, 1) << out << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("is the current folder or one above it")) << out;
  }
  EXPECT_TRUE(fs::exists(parent + "/precious.txt"));
  EXPECT_TRUE(fs::is_directory(parent + "/work"));
  EXPECT_EQ(CountPrefixed(parent, "."), 0);
}

// --- item 2: invalid UTF-8 in the model's output never aborts --------------------------------

// An enum member starting with a 4-byte emoji: -n cuts the output inside it at some n, and the
// invalid call's raw text (in "content") was not UTF-8: nlohmann's dump threw and call aborted.
TEST(CliHardening, CutInsideACharacterGivesJsonNotACrash) {
  const std::string catalog = Write("hardening_emoji.json", R"([
    {"name": "set_mood", "description": "Sets the mood.",
     "parameters": {"type": "object",
       "properties": {"mood": {"type": "string", "enum": ["😀 happy", "😢 sad"]}},
       "required": ["mood"]}}])");
  int invalid = 0;
  for (int n = 1; n <= 30; ++n) {
    auto r = RunFgemma("call -m " + Model() + " --tools " + catalog + " -t 1 -n " +
                           std::to_string(n) + " 'be happy'",
                       /*with_stderr=*/false);
    ASSERT_TRUE(r.rc == 0 || r.rc == 1) << "-n " << n << ": rc " << r.rc << "\n" << r.out;
    const auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded()) << "-n " << n << ": " << r.out;
    invalid += j.contains("error");
  }
  EXPECT_GT(invalid, 0);
}

// A file name is any bytes: bench --json named the model by it and the JSON dump threw.
TEST(CliHardening, BenchJsonWithANonUtf8ModelName) {
  const std::string odd = TempPath("hardening_odd\xff.gguf");
  fs::copy_file(Model(), odd, fs::copy_options::overwrite_existing);
  auto r = RunFgemma("bench -m '" + odd + "' --json -p 4 -n 4 -r 1 -t 1", /*with_stderr=*/false);
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_array()) << r.out;
  EXPECT_EQ(j[0]["model"], "hardening_odd\uFFFD.gguf");
}

// --- item 9: lost stdout is an error ---------------------------------------------------------

TEST(CliHardening, FullStdoutIsAnErrorNamingIt) {
  const std::string catalog = Write("hardening_full.json", R"([{"name": "stop_music",
    "description": "Stops the music."}])");
  const std::string commands[] = {
      "inspect " + Model(),
      "tokenize -m " + Model() + " 'turn the light on'",
      "run -m " + Model() + " -p hi -n 4 --temp 0",
      "call -m " + Model() + " --tools " + catalog + " -t 1 stop",
      "--help",
  };
  for (const std::string& c : commands) {
    // stdout to /dev/full, stderr to the pipe.
    auto r = RunCommand("(" + std::string(FG_CLI_PATH) + " " + c + " >/dev/full)");
    EXPECT_EQ(r.rc, 1) << c << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("cannot write to stdout: No space left on device")) << c;
  }
}

// --- item 5: FIFOs and devices are refused at once, never read ---------------------------------

TEST(CliHardening, FifosAndDevicesAreRefusedWithoutHanging) {
  const std::string fifo = Fifo("hardening.fifo");
  const std::string catalog = Write("hardening_fifo_catalog.json", R"([{"name": "stop_music",
    "description": "Stops the music."}])");
  struct Case {
    std::string args;
    int rc;
  };
  const Case cases[] = {
      {"inspect " + fifo, 1},
      {"run -m " + fifo + " -p hi", 1},
      {"tokenize -m " + fifo + " hi", 1},
      {"call -m " + fifo + " --tools " + catalog + " x", 1},
      {"call -m " + Model() + " --tools " + fifo + " x", 1},
      {"call -m " + Model() + " --tools " + catalog + " --dialect compact --tool-map " + fifo +
           " x",
       1},
      {"tokenize -m " + Model() + " --file " + fifo, 1},
      {"invoke -m " + Model() + " --function gemma_at --input=@" + fifo, 1},
      {"invoke -m " + Model() + " --function gemma_at --input=1x4xi32=@" + fifo, 1},
      {"export -m " + Model() + " --tool-map " + fifo + " -o " + TempPath("exp_fifo"), 1},
      {"quantize -m " + fifo + " -o " + TempPath("q_fifo.gguf") + " --type q8_0", 1},
      {"call -m " + Model() + " --tools /dev/zero x", 1},
      {"tokenize -m " + Model() + " --file /dev/zero", 1},
      {"invoke -m " + Model() + " --function gemma_at --input=1x4xi32=@/dev/zero", 1},
  };
  for (const Case& c : cases) {
    auto r = RunLimited(c.args, 20);
    EXPECT_EQ(r.rc, c.rc) << c.args << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("is not a regular file")) << c.args;
  }
}

// A FIFO where the prefix cache file should be: reported, prefilled again, replaced.
TEST(CliHardening, FifoInTheCacheDirIsReplacedNotRead) {
  const std::string catalog = Write("hardening_cache_catalog.json", R"([{"name": "stop_music",
    "description": "Stops the music."}])");
  const std::string dir = NewDir("hardening_cache");
  const std::string args = "call -m " + Model() + " --tools " + catalog + " -t 1 --cache-dir " +
                           dir + " stop";
  auto first = RunLimited(args, 60);
  ASSERT_EQ(first.rc, 0) << first.out;
  std::string file;
  for (const auto& e : fs::directory_iterator(dir)) file = e.path().string();
  ASSERT_THAT(file, HasSubstr("prefix-"));
  fs::remove(file);
  ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0);
  auto r = RunLimited(args + " --stats", 20);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("not a regular file"));
  EXPECT_THAT(r.out, HasSubstr("(prefill,"));
  EXPECT_TRUE(fs::is_regular_file(file));
}

// --- item 4: bounded input -------------------------------------------------------------------

TEST(CliHardening, InputIsBounded) {
  // A catalog (sparse file) over the 16 MiB limit is refused before it is read.
  const std::string big = TempPath("hardening_big_catalog.json");
  { std::ofstream(big) << "["; }
  fs::resize_file(big, (16u << 20) + 1);
  auto r = RunLimited("call -m " + Model() + " --tools " + big + " x", 20);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("more than the limit of 16 MiB"));
  r = RunLimited("tokenize -m " + Model() + " --file " + big, 20);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("more than the limit of 16 MiB"));
  r = RunCommand("timeout 20 " + std::string(FG_CLI_PATH) + " tokenize -m " + Model() +
                 " --file - </dev/zero");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("stdin is longer than the limit of 16 MiB"));
  // A raw tensor file larger than its shape is refused without reading it whole.
  r = RunLimited("invoke -m " + Model() + " --function gemma_at --input=1x4xi32=@" + big, 20);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("is larger than the 16 bytes 1x4xi32 needs"));
}

TEST(CliHardening, ReplLinesAreBounded) {
  const std::string catalog = Write("hardening_repl_catalog.json", R"([{"name": "stop_music",
    "description": "Stops the music."}])");
  const std::string call = "timeout 60 " + std::string(FG_CLI_PATH) + " call -m " + Model() +
                           " --tools " + catalog + " -t 1 --repl";
  // /dev/zero never ends a line: the REPL used to read it for 40 s and exit 0 silently.
  auto r = RunCommand(call + " </dev/zero", /*with_stderr=*/true);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("{\"error\":\"request line longer than 16 MiB; stopping\"}"));
  // An over-long line gets an error line, and the next request is answered.
  const std::string input = TempPath("hardening_repl_input.txt");
  {
    std::ofstream in(input, std::ios::binary);
    in << std::string((1u << 20) + 10, 'a') << "\nstop the music\n";
  }
  r = RunCommand(call + " <" + input, /*with_stderr=*/false);
  ASSERT_EQ(r.rc, 0) << r.out.substr(0, 2000);
  EXPECT_THAT(r.out, ::testing::StartsWith(
                         "{\"error\":\"request line longer than 1048576 bytes\"}\n{\"arguments\""));
}

// --- item 8: no leftovers ----------------------------------------------------------------------

// Runs `args` and sends `sig` once an entry starting with `prefix` appears in `dir` (the run's
// temporary file or folder). Returns the wait status, or -1 if the run ended first.
int InterruptWhenTempAppears(const std::string& args, const std::string& dir,
                             const std::string& prefix, int sig) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(sig, SIG_DFL);
    const std::string cmd = "exec " + std::string(FG_CLI_PATH) + " " + args + " 2>/dev/null";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return -1;
    if (CountPrefixed(dir, prefix) > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // in the middle of writing
      ::kill(pid, sig);
      ::waitpid(pid, &status, 0);
      return status;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

TEST(CliHardening, InterruptedExportAndQuantizeLeaveNothing) {
  struct Case {
    std::string name, args, prefix;
    int sig;
  };
  const std::string dir = NewDir("hardening_interrupt");
  const Case cases[] = {
      {"export SIGINT", "export -m " + BigModel() + " -o " + dir + "/exp", ".exp.tmp-", SIGINT},
      {"export SIGTERM", "export -m " + BigModel() + " -o " + dir + "/exp", ".exp.tmp-", SIGTERM},
      {"quantize SIGINT",
       "quantize -q -t 1 -m " + BigModel() + " --type q4_k -o " + dir + "/q.gguf", "q.gguf.tmp.",
       SIGINT},
  };
  for (const Case& c : cases) {
    const int status = InterruptWhenTempAppears(c.args, dir, c.prefix, c.sig);
    if (status == -1) {
      ADD_FAILURE() << c.name << ": finished before it could be interrupted";
      continue;
    }
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == c.sig) << c.name << ": " << status;
    EXPECT_EQ(CountPrefixed(dir, c.prefix), 0) << c.name;
    EXPECT_FALSE(fs::exists(dir + "/exp")) << c.name;
  }
}

// Out of memory while writing a GGUF: the temporary file used to stay (and the process abort).
TEST(CliHardening, MkmodelOutOfMemoryLeavesNoTempFile) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ulimit -v does not work with AddressSanitizer";
#else
  const std::string dir = NewDir("hardening_oom");
  auto r = RunCommand("(ulimit -v 600000; " + std::string(FG_CLI_PATH) + " mkmodel -o " + dir +
                      "/oom.gguf --preset small --hidden 4096 --ffn 128 --layers 1 --vocab "
                      "65536)");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("fgemma mkmodel: out of memory"));
  EXPECT_EQ(CountPrefixed(dir, "oom.gguf"), 0);
#endif
}

// A bad fifth --output used to leave the first four files: every output is checked first.
TEST(CliHardening, InvokeChecksEveryOutputBeforeWritingAny) {
  const std::string dir = NewDir("hardening_outputs");
  std::string outs;
  for (int i = 0; i < 5; ++i) {  // the tiny model's 2 layers' K and V, and the token
    outs += " --output=@" + (i == 4 ? dir + "/missing/out4.npy" : dir + "/out" +
                                                                      std::to_string(i) + ".npy");
  }
  auto r = RunFgemma("invoke -m " + Model() +
                     " --function gemma_prefill_at --input='4xi32=2 10 20 31' "
                     "--input='1x4xf32=0 0 0 1'" +
                     outs);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--output 4"));
  EXPECT_THAT(r.out, HasSubstr("does not exist"));
  EXPECT_TRUE(fs::is_empty(dir));
}

}  // namespace
}  // namespace fg
