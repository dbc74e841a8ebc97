// One rule and one message per common flag, in every command that has it, and the exit codes
// of the README's rule: usage errors (flags, values) exit 2, file and runtime problems exit 1
// (issue 12, item 10).
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/testing/cli_runner.h"

namespace fg {
namespace {

namespace fs = std::filesystem;
using ::fg::testing::RunFgemma;
using ::fg::testing::TempPath;
using ::testing::HasSubstr;
using ::testing::Not;

// A tiny model trained for 4096 tokens.
const std::string& Model() {
  static const std::string path = [] {
    const std::string p = TempPath("flags_tiny.gguf");
    EXPECT_EQ(RunFgemma("mkmodel -o " + p + " --context 4096").rc, 0);
    return p;
  }();
  return path;
}

// Written beside its name and renamed into place: ctest runs every case in a process of its
// own, at the same time, and one reading the shared catalog must never see another's
// half-written copy (it once read an empty file: "invalid JSON at byte 1").
std::string Write(const std::string& name, const std::string& text) {
  const std::string p = TempPath(name);
  const std::string tmp = p + ".tmp" + std::to_string(::getpid());
  std::ofstream(tmp, std::ios::binary | std::ios::trunc) << text;
  fs::rename(tmp, p);
  return p;
}

// A one-tool catalog whose prompt is short on the tiny model.
const std::string& Catalog() {
  static const std::string path = Write(
      "flags_catalog.json",
      R"([{"name": "f", "description": "d", "parameters": {"type": "object", "properties": )"
      R"({"x": {"type": "array", "items": {"type": "integer"}}}, "required": ["x"]}}])");
  return path;
}

// -t 0 (and 257) is refused with exit 2 and the same message by every command with -t; the
// message used to say [1, 256] while call/run/invoke/quantize/eval/merge took 0.
TEST(CliFlags, ThreadsOutOfRangeIsOneUsageError) {
  const std::string m = "-m " + Model() + " ";
  const std::vector<std::string> commands = {
      "call " + m + "--tools " + Catalog() + " hi",
      "run " + m + "-p hi -n 1",
      "invoke " + m + "--function gemma_at --input=1x4xi32=2 --input=1x4xf32=0",
      "quantize " + m + "-o " + TempPath("flags_q.gguf") + " --type q8_0 -q",
      "eval " + m + "--tools " + Catalog() + " --data " + TempPath("no_data.jsonl"),
      "merge " + m + "-o " + TempPath("flags_merged.gguf") + " --lora " + TempPath("no.gguf"),
      "bench " + m + "-p 4 -n 0 -r 1",
  };
  fs::remove(TempPath("flags_q.gguf"));  // a leftover of an earlier run must not decide
  for (const std::string& c : commands) {
    for (const char* t : {"0", "257"}) {
      auto r = RunFgemma(c + " -t " + t);
      EXPECT_EQ(r.rc, 2) << c << " -t " << t << "\n" << r.out;
      EXPECT_THAT(r.out, HasSubstr("-t must be in [1, 256], got " + std::string(t))) << c;
    }
  }
  EXPECT_FALSE(fs::exists(TempPath("flags_q.gguf")));
}

// -c beyond the limit or beyond the model's trained context is a usage error (exit 2), in call
// and run alike; it used to be a runtime error (exit 1) from the session.
TEST(CliFlags, ContextOutOfRangeIsAUsageError) {
  const std::string m = "-m " + Model() + " ";
  for (const std::string& c :
       {"call " + m + "--tools " + Catalog() + " hi", "run " + m + "-p hi -n 1"}) {
    auto r = RunFgemma(c + " -c 99999999");
    EXPECT_EQ(r.rc, 2) << c << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("-c must be in [1, 1048576], got 99999999")) << c;
    r = RunFgemma(c + " -c 5000");
    EXPECT_EQ(r.rc, 2) << c << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("-c 5000 exceeds the model's trained context of 4096 tokens"))
        << c;
    r = RunFgemma(c + " -c 0");
    EXPECT_EQ(r.rc, 2) << c << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("-c must be in [1, 1048576], got 0")) << c;
  }
}

// An -m given empty is a usage error, not the default model.
TEST(CliFlags, EmptyModelNameIsAUsageError) {
  auto r = RunFgemma("run -m '' -p hi");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("-m needs a file name"));
}

// A --tool-map that cannot be read or parsed is a file problem: exit 1 in export as in call,
// with the flag named.
TEST(CliFlags, BadToolMapIsAFileProblemInCallAndExport) {
  const std::string bad = Write("flags_bad_map.json", "{not json");
  const std::string missing = TempPath("flags_no_map.json");
  const std::string call = "call -m " + Model() + " --tools " + Catalog() +
                           " --dialect compact hi --tool-map ";
  const std::string exp = "export -m " + Model() + " -o " + TempPath("flags_exp") + " --tool-map ";
  for (const std::string& c : {call, exp}) {
    auto r = RunFgemma(c + missing);
    EXPECT_EQ(r.rc, 1) << c << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("--tool-map: cannot open")) << c;
    r = RunFgemma(c + bad);
    EXPECT_EQ(r.rc, 1) << c << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("tool map")) << c;
  }
  EXPECT_FALSE(fs::exists(TempPath("flags_exp")));
}

// bench checks --tools and --request before it measures anything.
TEST(CliFlags, BenchChecksToolsAndRequestBeforeMeasuring) {
  const std::string b = "bench -m " + Model() + " -p 4 -n 0 -r 1 -t 1 ";
  auto r = RunFgemma(b + "--tools " + TempPath("flags_no_catalog.json"));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--tools: cannot open"));
  EXPECT_THAT(r.out, Not(HasSubstr("pp4")));
  r = RunFgemma(b + "--tools " + Model());
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("a GGUF file (a model?), not JSON"));
  EXPECT_THAT(r.out, Not(HasSubstr("pp4")));
  r = RunFgemma(b + "--tools " + Catalog() + " --request ''");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--request: the request is empty"));
  EXPECT_THAT(r.out, Not(HasSubstr("pp4")));
}

// A catalog that is not JSON text says so, and "tool catalog:" is said once.
TEST(CliFlags, CatalogMessagesNameTheProblemOnce) {
  auto r = RunFgemma("call -m " + Model() + " --tools " + Model() + " hi");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("tool catalog: a GGUF file (a model?), not JSON"));
  EXPECT_THAT(r.out, Not(HasSubstr("nested deeper")));
  const std::string bad = Write("flags_bad_catalog.json", "{bad");
  r = RunFgemma("call -m " + Model() + " --tools " + bad + " hi");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("tool catalog: invalid JSON at byte"));
  EXPECT_THAT(r.out, Not(HasSubstr("tool catalog: tool catalog")));
  // Folders are named as such (fixed with the file-type checks; kept here with the others).
  const std::string dir = TempPath("flags_dir");
  fs::create_directories(dir);
  r = RunFgemma("call -m " + Model() + " --tools " + dir + " hi");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("is not a regular file (a folder)"));
  r = RunFgemma("tokenize -m " + Model() + " --file " + dir);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("is not a regular file (a folder)"));
}

// When the context runs out before -n, the stop reason and the message say so, not "output
// cut at N tokens" (which reads as -n).
TEST(CliFlags, ContextRunningOutIsNotCalledACut) {
  // The prompt's length on this model, then a context a few tokens longer.
  auto r = RunFgemma("call -m " + Model() + " --tools " + Catalog() + " --stats add");
  int prefix = 0, prefill = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str() + r.out.find("prefix "), "prefix %*f ms (%*[^,], %d",
                        &prefix), 1) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + r.out.find("| prefill "), "| prefill %*f ms (%d",
                        &prefill), 1) << r.out;
  const int context = prefix + prefill + 4;
  r = RunFgemma("call -m " + Model() + " --tools " + Catalog() + " --stats -n 100 -c " +
                std::to_string(context) + " add");
  EXPECT_THAT(r.out, HasSubstr("stop: context full")) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("output cut"))) << r.out;
  if (r.rc == 1) {
    EXPECT_THAT(r.out, HasSubstr("the context of " + std::to_string(context) + " tokens is full"));
  }
}

// --cache-dir '' is a usage error, not silently no cache.
TEST(CliFlags, EmptyCacheDirIsAUsageError) {
  auto r = RunFgemma("call -m " + Model() + " --tools " + Catalog() + " --cache-dir '' hi");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--cache-dir needs a folder"));
}

// mkmodel refuses, by the loader's own rules, a model that run would refuse; nothing written.
TEST(CliFlags, MkmodelRefusesWhatTheLoaderRefuses) {
  const std::string out = TempPath("flags_hd1.gguf");
  fs::remove(out);  // a leftover of an earlier run must not decide
  auto r = RunFgemma("mkmodel -o " + out + " --head-dim 1");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("must be even for RoPE"));
  EXPECT_FALSE(fs::exists(out));
  const std::string ok = TempPath("flags_hd2.gguf");
  r = RunFgemma("mkmodel -o " + ok + " --head-dim 2");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(RunFgemma("run -m " + ok + " -p hi -n 1 --temp 0").rc, 0);
}

// fgemma help CMD prints CMD's help, as fgemma CMD --help does.
TEST(CliFlags, HelpCommandPrintsThatCommandsHelp) {
  auto r = RunFgemma("help call");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, RunFgemma("call --help").out);
  EXPECT_THAT(r.out, HasSubstr("Usage: fgemma call"));
  r = RunFgemma("help nope");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("unknown command 'nope'"));
}

}  // namespace
}  // namespace fg
