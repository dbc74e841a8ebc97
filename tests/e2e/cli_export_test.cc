// fgemma export end to end on synthetic models: the folder's files, the manifest, replacing a
// previous export, the tool map, --stats, and every bad input (exit 2 usage, 1 runtime) with
// nothing half-written.
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/base/mapped_file.h"
#include "src/model/gemma3/test_model.h"
#include "tests/testing/cli_runner.h"

namespace fg {
namespace {

namespace fs = std::filesystem;
using ::fg::testing::RunFgemma;
using ::fg::testing::TempPath;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Read(const std::string& path) {
  auto text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : std::string();
}

const std::string& Model() {
  static const std::string path = [] {
    const std::string p = TempPath("export_small.gguf");
    EXPECT_EQ(RunFgemma("mkmodel --preset small -o " + p).rc, 0);
    return p;
  }();
  return path;
}

// No temporary folders left beside `dir`.
int Leftovers(const std::string& dir) {
  int n = 0;
  const fs::path d(dir);
  for (const auto& e : fs::directory_iterator(d.parent_path())) {
    if (e.path().filename().string().rfind("." + d.filename().string() + ".tmp", 0) == 0) ++n;
  }
  return n;
}

TEST(CliExportTest, WritesFunctionsArchiveAndManifest) {
  const std::string dir = TempPath("exp_all");
  auto r = RunFgemma("export -m " + Model() + " --seq 16 --chunk 8 -o " + dir);
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* f : {"gemma", "gemma_at", "gemma_prefill", "gemma_prefill_at", "gemma_with_past",
                        "gemma_prefill_with_past"}) {
    EXPECT_TRUE(fs::exists(dir + "/" + f + ".mlir")) << f;
    EXPECT_THAT(Read(dir + "/" + f + ".mlir"), HasSubstr("func.func public @" + std::string(f) + "("));
  }
  EXPECT_TRUE(fs::exists(dir + "/model.irpa"));
  auto m = nlohmann::ordered_json::parse(Read(dir + "/manifest.json"));
  EXPECT_EQ(m.begin().key(), "contractVersion");
  EXPECT_EQ(m["seq"], 16);
  EXPECT_EQ(m["chunk"], 8);
  EXPECT_EQ(m["dtype"], "bf16");
  EXPECT_EQ(m["files"].size(), 6u);
  EXPECT_EQ(m["model"], "fgemma synthetic small");
  EXPECT_EQ(m["toolMap"]["0"], "set_lights");
  // Progress is drawn only on a terminal (or with --progress).
  EXPECT_THAT(r.out, Not(HasSubstr("\r")));
  EXPECT_EQ(Leftovers(dir), 0);
}

TEST(CliExportTest, OneGraphReplacesAPreviousExport) {
  const std::string dir = TempPath("exp_one");
  fs::remove_all(dir);  // a run before this one may have left it in any state
  ASSERT_EQ(RunFgemma("export -m " + Model() + " -o " + dir).rc, 0);
  // A file the export did not write is never deleted: the folder is refused while it is there.
  std::ofstream(dir + "/stale.txt") << "x";
  auto r = RunFgemma("export -m " + Model() + " --graph with_past --dtype f16 -o " + dir);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("holds 'stale.txt'"));
  EXPECT_TRUE(fs::exists(dir + "/stale.txt"));
  fs::remove(dir + "/stale.txt");
  r = RunFgemma("export -m " + Model() + " --graph with_past --dtype f16 -o " + dir);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_FALSE(fs::exists(dir + "/gemma_at.mlir"));
  EXPECT_TRUE(fs::exists(dir + "/gemma_with_past.mlir"));
  EXPECT_THAT(Read(dir + "/gemma_with_past.mlir"), HasSubstr("xf16>"));
  EXPECT_EQ(Leftovers(dir), 0);
  // A trailing slash names the same folder.
  auto g = RunFgemma("export -m " + Model() + " -o " + dir + "/ --progress");
  ASSERT_EQ(g.rc, 0) << g.out;
  EXPECT_TRUE(fs::exists(dir + "/gemma_at.mlir"));
  EXPECT_EQ(Leftovers(dir), 0);
  EXPECT_THAT(g.out, HasSubstr("model.irpa ["));
  // GEMMA_GRAPH is the default --graph.
  std::string cmd = "env GEMMA_GRAPH=prefill_at " + std::string(FG_CLI_PATH) + " export -m " + Model() +
                    " -o " + dir + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_TRUE(fs::exists(dir + "/gemma_prefill_at.mlir"));
  EXPECT_FALSE(fs::exists(dir + "/gemma_at.mlir"));
}

TEST(CliExportTest, OneModule) {
  const std::string dir = TempPath("exp_module");
  auto r = RunFgemma("export -m " + Model() + " --one-module -o " + dir);
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string text = Read(dir + "/module.mlir");
  EXPECT_THAT(text, HasSubstr("func.func public @gemma_at("));
  EXPECT_THAT(text, HasSubstr("func.func public @gemma_prefill_with_past("));
  EXPECT_FALSE(fs::exists(dir + "/gemma_at.mlir"));
  auto m = nlohmann::ordered_json::parse(Read(dir + "/manifest.json"));
  EXPECT_EQ(m["files"]["gemma_with_past"], "module.mlir");
  EXPECT_EQ(m["files"].size(), 6u);
}

TEST(CliExportTest, ToolMapAndStats) {
  const std::string dir = TempPath("exp_tools");
  const std::string map = TempPath("tools.json");
  std::ofstream(map) << R"({"0": "set_lights", "1": "play \"music\"", "none": null})";
  auto r = RunFgemma("export -m " + Model() + " --graph redecode_at --tool-map " + map + " --stats -o " + dir);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("gemma_at"));
  EXPECT_THAT(r.out, HasSubstr("scratch"));
  auto m = nlohmann::ordered_json::parse(Read(dir + "/manifest.json"));
  EXPECT_EQ(m["toolMap"]["1"], "play \"music\"");
  EXPECT_TRUE(m["toolMap"]["none"].is_null());
}

TEST(CliExportTest, BadInput) {
  const std::string dir = TempPath("exp_bad");
  struct Case {
    std::string args;
    int rc;
    std::string message;
  };
  const std::string bad_map = TempPath("bad_map.json");
  std::ofstream(bad_map) << "[1, 2]";
  const std::string missing = TempPath("missing_tensor.gguf");
  {
    model::testing::TestModelSpec spec;
    auto w = model::testing::MakeTestModel(spec, [](model::testing::TensorSpec& t) {
      if (t.name == "blk.0.ffn_up.weight") t.skip = true;
    });
    ASSERT_TRUE(w.WriteFile(missing).ok());
  }
  const Case cases[] = {
      {"--graph nope -o " + dir, 2, "unknown --graph 'nope'"},
      {"--seq 0 -o " + dir, 2, "--seq"},
      {"--chunk 70000 -o " + dir, 2, "--chunk"},
      {"--dtype q8_0 -o " + dir, 2, "--dtype"},
      {"", 2, "-o DIR"},
      {"--tool-map " + bad_map + " -o " + dir, 1, "object"},
      {"--tool-map /nonexistent.json -o " + dir, 1, "--tool-map: cannot open"},
      {"-o /nonexistent/folder/out", 1, "does not exist"},
  };
  for (const Case& c : cases) {
    auto r = RunFgemma("export -m " + Model() + " " + c.args);
    EXPECT_EQ(r.rc, c.rc) << c.args << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr(c.message)) << c.args;
  }
  auto r = RunFgemma("export -m " + TempPath("no_such.gguf") + " -o " + dir);
  EXPECT_EQ(r.rc, 1) << r.out;
  r = RunFgemma("export -m " + missing + " -o " + dir);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("blk.0.ffn_up.weight"));
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_EQ(Leftovers(dir), 0);
  // Unwritable output folder (a file in the way of the temp folder's parent).
  const std::string file = TempPath("a_file");
  std::ofstream(file) << "x";
  r = RunFgemma("export -m " + Model() + " -o " + file + "/sub");
  EXPECT_EQ(r.rc, 1) << r.out;
}

}  // namespace
}  // namespace fg
