#include "src/export/irpa.h"

#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"

namespace fg::exporter {
namespace {

using ::fg::testing::StatusIs;
using ::testing::HasSubstr;

uint64_t Le(const std::vector<uint8_t>& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}

IrpaWriter::Fill Bytes(uint8_t value) {
  return [value](std::span<uint8_t> out) {
    for (auto& b : out) b = value;
    return OkStatus();
  };
}

TEST(IrpaTest, LayoutFollowsTheSchema) {
  IrpaWriter w;
  FG_ASSERT_OK(w.Add("a", 10, Bytes(0xaa)));
  FG_ASSERT_OK(w.Add("bb", 100, Bytes(0xbb), 256));
  const std::string path = ::testing::TempDir() + "/layout.irpa";
  FG_ASSERT_OK(w.WriteFile(path));
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(b.size(), w.FileSize());
  EXPECT_EQ(b.size() % 4096, 0u);
  EXPECT_EQ(Le(b, 0, 4), 0x41505249u);  // "IRPA"
  EXPECT_EQ(Le(b, 4, 2), 0u);           // version 0.0
  EXPECT_EQ(Le(b, 8, 8), 88u);          // header size
  EXPECT_EQ(Le(b, 32, 8), 2u);          // entries
  const uint64_t table = Le(b, 40, 8), meta = Le(b, 56, 8), storage = Le(b, 72, 8);
  EXPECT_EQ(table % 16, 0u);
  EXPECT_EQ(storage % 4096, 0u);
  for (int i = 0; i < 2; ++i) {
    const uint64_t e = table + 80 * i;
    EXPECT_EQ(Le(b, e, 8), 76u);     // entry size
    EXPECT_EQ(Le(b, e + 8, 4), 2u);  // data entry
    const uint64_t name_off = Le(b, e + 20, 8), name_len = Le(b, e + 28, 8);
    EXPECT_EQ(std::string(b.begin() + meta + name_off, b.begin() + meta + name_off + name_len),
              i == 0 ? "a" : "bb");
    const uint64_t align = Le(b, e + 52, 8), off = Le(b, e + 60, 8), len = Le(b, e + 68, 8);
    EXPECT_EQ((storage + off) % align, 0u);
    EXPECT_EQ(len, i == 0 ? 10u : 100u);
    EXPECT_EQ(b[storage + off], i == 0 ? 0xaa : 0xbb);
    EXPECT_EQ(b[storage + off + len - 1], i == 0 ? 0xaa : 0xbb);
  }
}

TEST(IrpaTest, BadEntriesAreRefused) {
  IrpaWriter w;
  FG_ASSERT_OK(w.Add("x", 1, Bytes(1)));
  EXPECT_THAT(w.Add("x", 1, Bytes(1)), StatusIs(StatusCode::kInvalidArgument, HasSubstr("duplicate")));
  EXPECT_THAT(w.Add("", 1, Bytes(1)), StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty")));
  EXPECT_THAT(w.Add("y", 1, Bytes(1), 3), StatusIs(StatusCode::kInvalidArgument, HasSubstr("power of two")));
}

TEST(IrpaTest, FailuresLeaveNoFile) {
  IrpaWriter w;
  FG_ASSERT_OK(w.Add("ok", 8, Bytes(1)));
  FG_ASSERT_OK(w.Add("bad", 8, [](std::span<uint8_t>) { return DataLossError("no data"); }));
  const std::string path = ::testing::TempDir() + "/fail.irpa";
  EXPECT_THAT(w.WriteFile(path), StatusIs(StatusCode::kDataLoss, HasSubstr("parameter 'bad'")));
  struct stat st;
  EXPECT_NE(::stat(path.c_str(), &st), 0);
  EXPECT_THAT(IrpaWriter().WriteFile("/nonexistent/dir/x.irpa"), StatusIs(StatusCode::kIo, HasSubstr("cannot create")));
}

}  // namespace
}  // namespace fg::exporter
