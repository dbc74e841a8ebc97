// fgemma's IREE parameter archive writer, read back by IREE's own runtime (iree-base-runtime in
// the test venv, through scripts/irpa_check.py).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/base/status_matchers.h"
#include "src/export/irpa.h"

namespace fg::exporter {
namespace {

// CRC-32 (IEEE, as Python's zlib.crc32).
uint32_t Crc32(const std::vector<uint8_t>& d) {
  uint32_t c = 0xffffffffu;
  for (uint8_t b : d) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

std::vector<uint8_t> Pattern(uint64_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + seed + (i >> 8));
  return v;
}

TEST(IrpaIreeTest, IreeRuntimeReadsEveryEntry) {
  const char* venv = std::getenv("FGEMMA_VENV");
  if (venv == nullptr || *venv == '\0') GTEST_SKIP() << "FGEMMA_VENV is not set (make test sets it)";
  const std::string py = std::string(venv) + "/bin/python";
  if (std::system((py + " -c 'import iree.runtime' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "iree-base-runtime is not installed in " << venv;
  }
  struct E {
    std::string name;
    uint64_t length, alignment;
  };
  const std::vector<E> entries = {{"token_embd.weight", 1000, 64},
                                  {"blk.0.attn_q.weight", 4097, 64},
                                  {"output_norm.weight", 3, 16},
                                  {"blk.0.attn_k.weight", 0, 64},
                                  {"blk.17.ffn_down.weight", 70000, 4096}};
  IrpaWriter w;
  for (size_t i = 0; i < entries.size(); ++i) {
    std::vector<uint8_t> data = Pattern(entries[i].length, static_cast<uint8_t>(i));
    FG_ASSERT_OK(w.Add(entries[i].name, entries[i].length,
                       [data](std::span<uint8_t> out) {
                         std::copy(data.begin(), data.end(), out.begin());
                         return OkStatus();
                       },
                       entries[i].alignment));
  }
  const std::string path = ::testing::TempDir() + "/irpa_iree.irpa";
  FG_ASSERT_OK(w.WriteFile(path));
  std::string cmd = py + " " + FG_SOURCE_DIR + "/scripts/irpa_check.py " + path;
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  ASSERT_EQ(::pclose(p), 0) << out;
  auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j.size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    std::vector<uint8_t> data = Pattern(entries[i].length, static_cast<uint8_t>(i));
    EXPECT_EQ(j[i]["key"], entries[i].name);
    EXPECT_EQ(j[i]["length"].get<uint64_t>(), entries[i].length);
    EXPECT_EQ(j[i]["crc32"].get<uint64_t>(), Crc32(data))
        << entries[i].name;
  }
}

}  // namespace
}  // namespace fg::exporter
