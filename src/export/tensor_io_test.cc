#include "src/export/tensor_io.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/base/status_matchers.h"

namespace fg::exporter {
namespace {

using ::fg::testing::StatusIs;
using ::testing::HasSubstr;

std::string Temp(const std::string& name) { return ::testing::TempDir() + "/tensor_io_" + name; }

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size());
}

TEST(TensorIoTest, ValuesSpaceOrCommaSeparated) {
  FG_ASSERT_OK_AND_ASSIGN(HostTensor t, ParseTensorArg("1x3xi32=2 105,7"));
  EXPECT_EQ(t.shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(t.type, ArgType::kI32);
  EXPECT_EQ(t.i32, (std::vector<int32_t>{2, 105, 7}));
  FG_ASSERT_OK_AND_ASSIGN(HostTensor f, ParseTensorArg("2x2xf32=[1.5 -2][3e-7, 4]"));
  EXPECT_EQ(f.f32, (std::vector<float>{1.5f, -2.0f, 3e-7f, 4.0f}));
}

TEST(TensorIoTest, OneValueFillsTheTensor) {
  FG_ASSERT_OK_AND_ASSIGN(HostTensor t, ParseTensorArg("2x3xf32=0.5"));
  EXPECT_EQ(t.f32, std::vector<float>(6, 0.5f));
}

TEST(TensorIoTest, BadSpellingsAreClearErrors) {
  EXPECT_THAT(ParseTensorArg("1x3xi32=2 3").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("2 values for a tensor of 3")));
  EXPECT_THAT(ParseTensorArg("1x3xf16=1").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("element type 'f16'")));
  EXPECT_THAT(ParseTensorArg("ax3xi32=1").status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("not a shape")));
  EXPECT_THAT(ParseTensorArg("1x3xi32").status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("neither")));
  EXPECT_THAT(ParseTensorArg("1xi32=1.5").status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("not an i32")));
  EXPECT_THAT(ParseTensorArg("1xi32=99999999999").status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("not an i32")));
  EXPECT_THAT(ParseTensorArg("1xf32=abc").status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("not an f32")));
  EXPECT_THAT(ParseTensorArg("1xi32=").status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("no values")));
  EXPECT_THAT(ParseTensorArg("100000x100000x100000xf32=1").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("too large")));
}

TEST(TensorIoTest, RawLittleEndianFile) {
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  const std::string path = Temp("raw.bin");
  WriteBytes(path, std::string(reinterpret_cast<const char*>(v.data()), 24));
  FG_ASSERT_OK_AND_ASSIGN(HostTensor t, ParseTensorArg("1x2x3xf32=@" + path));
  EXPECT_EQ(t.f32, v);
  EXPECT_THAT(ParseTensorArg("1x2x4xf32=@" + path).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("has 24 bytes, 1x2x4xf32 needs 32")));
  EXPECT_THAT(ParseTensorArg("1xf32=@" + Temp("missing.bin")).status(),
              StatusIs(StatusCode::kNotFound, HasSubstr("cannot open")));
}

TEST(TensorIoTest, NpyRoundTripAndNumpyLayout) {
  HostTensor t = HostTensor::F32({3, 2, 2}, {0, 0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f, 1.75f, 2, 2.25f, 2.5f, 2.75f});
  const std::string bytes = NpyBytes(t);
  // The header NumPy (and iree-run-module --output=@x.npy) writes: 118 bytes, data at 128.
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(static_cast<uint8_t>(bytes[8]), 118);
  EXPECT_EQ(bytes.substr(10, 62), "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2, 2), }");
  EXPECT_EQ(bytes[127], '\n');
  EXPECT_EQ(bytes.size(), 128u + 48u);
  const std::string path = Temp("rt.npy");
  FG_ASSERT_OK(WriteNpy(path, t));
  FG_ASSERT_OK_AND_ASSIGN(HostTensor back, ParseTensorArg("@" + path));
  EXPECT_EQ(back.shape, t.shape);
  EXPECT_EQ(back.f32, t.f32);
  HostTensor i = HostTensor::I32({5}, {1, -2, 3, 4, 32691});
  EXPECT_NE(NpyBytes(i).find("'shape': (5,), }"), std::string::npos);
  FG_ASSERT_OK_AND_ASSIGN(HostTensor ib, ParseNpy(NpyBytes(i), "x"));
  EXPECT_EQ(ib.i32, i.i32);
  EXPECT_EQ(ib.type, ArgType::kI32);
}

TEST(TensorIoTest, NpyVersion2Header) {
  std::string h = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }";
  h.append(64 - (12 + h.size() + 1) % 64, ' ');
  h += '\n';
  std::string b("\x93NUMPY\x02\x00", 8);
  const uint32_t len = static_cast<uint32_t>(h.size());
  b.append(reinterpret_cast<const char*>(&len), 4);
  b += h;
  const int32_t v[2] = {7, 9};
  b.append(reinterpret_cast<const char*>(v), 8);
  FG_ASSERT_OK_AND_ASSIGN(HostTensor t, ParseNpy(b, "v2"));
  EXPECT_EQ(t.i32, (std::vector<int32_t>{7, 9}));
}

TEST(TensorIoTest, BadNpyFilesAreRefused) {
  const std::string good = NpyBytes(HostTensor::F32({2}, {1, 2}));
  EXPECT_THAT(ParseNpy("PK\x03\x04 not numpy", "f").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("magic")));
  std::string f8 = good;
  f8.replace(f8.find("<f4"), 3, "<f8");
  EXPECT_THAT(ParseNpy(f8, "f").status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("'<f8'")));
  std::string be = good;
  be.replace(be.find("<f4"), 3, ">f4");
  EXPECT_THAT(ParseNpy(be, "f").status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("little-endian")));
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_THAT(ParseNpy(fortran, "f").status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("fortran")));
  EXPECT_THAT(ParseNpy(good.substr(0, good.size() - 1), "f").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("data is 7 bytes, shape needs 8")));
  std::string longhdr = good;
  longhdr[8] = '\xff';
  longhdr[9] = '\x7f';
  EXPECT_THAT(ParseNpy(longhdr, "f").status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("header longer")));
  std::string noshape = good;
  noshape.replace(noshape.find("'shape'"), 7, "'shapx'");
  EXPECT_THAT(ParseNpy(noshape, "f").status(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("lacks")));
  EXPECT_THAT(ReadNpy(Temp("absent.npy")).status(), StatusIs(StatusCode::kNotFound, HasSubstr("absent.npy")));
}

// The strings iree-run-module 3.12 printed for the same tensors.
TEST(TensorIoTest, FormatsLikeIreeRunModule) {
  EXPECT_EQ(FormatTensor(HostTensor::I32({1}, {32691})), "1xi32=32691");
  EXPECT_EQ(FormatTensor(HostTensor::I32({3}, {2, 105, 7})), "3xi32=2 105 7");
  EXPECT_EQ(FormatTensor(HostTensor::F32({2, 3}, {1.5f, -2, 3e-7f, 4, 5, 0.1f})),
            "2x3xf32=[1.5 -2 3E-07][4 5 0.1]");
  EXPECT_EQ(FormatTensor(HostTensor::F32({2, 3}, {123456789.0f, NAN, -INFINITY, -0.0f, 1e-40f, 0.333333333f})),
            "2x3xf32=[1.23457E+08 NAN -INF][-0 9.99995E-41 0.333333]");
  EXPECT_EQ(FormatTensor(HostTensor::F32({3, 2, 2}, {0, 0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f, 1.75f, 2, 2.25f, 2.5f, 2.75f})),
            "3x2x2xf32=[[0 0.25][0.5 0.75]][[1 1.25][1.5 1.75]][[2 2.25][2.5 2.75]]");
  EXPECT_EQ(FormatTensor(HostTensor::F32({1, 2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})),
            "1x2x2x3xf32=[[[1 2 3][4 5 6]][[7 8 9][10 11 12]]]");
  // At most 1024 elements, then "...".
  std::string big = FormatTensor(HostTensor::I32({1100}, std::vector<int32_t>(1100, 5)));
  EXPECT_EQ(big.substr(big.size() - 8), "5 5 5...");
  EXPECT_EQ(std::count(big.begin(), big.end(), '5'), 1024);
  std::string rows = FormatTensor(HostTensor::I32({2, 600}, std::vector<int32_t>(1200, 3)));
  EXPECT_EQ(rows.substr(rows.size() - 7), "3 3...]");
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '['), 2);
}

}  // namespace
}  // namespace fg::exporter
