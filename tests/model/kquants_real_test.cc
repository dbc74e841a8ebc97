// fgemma's scalar K-quant dequantizers on the real model's tensors against the gguf Python
// package (tests/data/kquants_real_rows.json, written by scripts/gen_kquants_rows.py):
// blk.0.attn_output.weight (Q4_K) and blk.0.ffn_down.weight (Q6_K). The bytes are read twice,
// through the GGUF reader and straight from the file at the offset the script recorded, so a
// reader offset bug and a kernel bug are told apart. Then every ISA's vec_dot on those real rows
// against the dequantized dot product in double.
//
// Needs FGEMMA_MODEL (the Q4_K_M GGUF); skips with the reason otherwise.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/base/status_matchers.h"
#include "src/gguf/reader.h"
#include "src/kernels/cpu.h"
#include "src/kernels/quant.h"
#include "src/tensor/dtype.h"

namespace fg::kernels {
namespace {

std::string ModelPath() {
  const char* p = std::getenv("FGEMMA_MODEL");
  return p != nullptr ? p : "";
}

nlohmann::json LoadRows() {
  std::ifstream in(std::string(FG_SOURCE_DIR) + "/tests/data/kquants_real_rows.json");
  EXPECT_TRUE(in.good());
  return nlohmann::json::parse(in);
}

class KQuantsRealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ModelPath();
    if (path_.empty()) GTEST_SKIP() << "FGEMMA_MODEL is not set (path of the Q4_K_M GGUF)";
    if (!std::filesystem::exists(path_)) GTEST_SKIP() << "FGEMMA_MODEL " << path_ << " does not exist";
    auto f = gguf::File::Open(path_);
    ASSERT_THAT(f, testing::IsOk());
    file_ = std::move(f).value();
    rows_ = LoadRows();
  }
  std::string path_;
  std::unique_ptr<gguf::File> file_;
  nlohmann::json rows_;
};

TEST_F(KQuantsRealTest, ScalarDequantizeMatchesGgufPython) {
  ASSERT_EQ(rows_.at("tensors").size(), 2u);
  for (const auto& t : rows_.at("tensors")) {
    const std::string name = t.at("name").get<std::string>();
    const gguf::TensorInfo* info = file_->FindTensor(name);
    ASSERT_NE(info, nullptr) << name;
    const auto type = static_cast<tensor::DType>(t.at("type_id").get<uint32_t>());
    ASSERT_EQ(info->type, type) << name;
    const int64_t cols = t.at("cols").get<int64_t>();
    const int64_t row_bytes = t.at("row_bytes").get<int64_t>();
    ASSERT_EQ(info->shape, (std::vector<int64_t>{t.at("n_rows").get<int64_t>(), cols})) << name;
    ASSERT_EQ(*tensor::RowBytes(type, cols), row_bytes);
    // The reader's data pointer and the script's file offset name the same bytes.
    const uint64_t file_offset = t.at("file_offset").get<uint64_t>();
    EXPECT_EQ(file_->data_offset() + info->offset, file_offset) << name;

    const TypeOps* ops = GetTypeOps(type, Isa::kScalar);
    ASSERT_NE(ops, nullptr);
    std::ifstream raw(path_, std::ios::binary);
    for (const auto& r : t.at("rows")) {
      const int64_t row = r.at("row").get<int64_t>();
      const std::vector<float> want = r.at("values").get<std::vector<float>>();
      ASSERT_EQ(static_cast<int64_t>(want.size()), cols);

      std::vector<uint8_t> bytes(row_bytes);
      raw.seekg(static_cast<std::streamoff>(file_offset + row * row_bytes));
      raw.read(reinterpret_cast<char*>(bytes.data()), row_bytes);
      ASSERT_TRUE(raw.good());
      ASSERT_EQ(0, std::memcmp(bytes.data(), info->data + row * row_bytes, row_bytes)) << name;

      std::vector<float> got(cols);
      ops->dequantize_row(bytes.data(), got.data(), cols);
      int exact = 0;
      float max_abs = 0, max_diff = 0;
      for (int64_t i = 0; i < cols; ++i) {
        max_abs = std::max(max_abs, std::fabs(want[i]));
        max_diff = std::max(max_diff, std::fabs(got[i] - want[i]));
        exact += got[i] == want[i];
      }
      // The JSON keeps 9 significant digits, which round-trips f32, and both sides evaluate
      // (d * sc) * q - dmin * m in f32 in the same order: the values are bit-identical.
      EXPECT_EQ(exact, cols) << name << " row " << row << ": max |diff| " << max_diff;
      std::printf("%s row %lld: %d / %lld values bit-identical, max |diff| %.3g (max |w| %.3g)\n",
                  name.c_str(), static_cast<long long>(row), exact, static_cast<long long>(cols),
                  max_diff, max_abs);
    }
  }
}

TEST_F(KQuantsRealTest, VecDotOnRealRowsAllIsas) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (const auto& t : rows_.at("tensors")) {
    const gguf::TensorInfo* info = file_->FindTensor(t.at("name").get<std::string>());
    ASSERT_NE(info, nullptr);
    const int64_t cols = info->shape[1];
    const int64_t row_bytes = *tensor::RowBytes(info->type, cols);
    const TypeOps* scalar = GetTypeOps(info->type, Isa::kScalar);
    ASSERT_NE(scalar, nullptr);
    const TypeOps* q8 = GetTypeOps(scalar->dot_type, Isa::kScalar);
    ASSERT_NE(q8, nullptr);
    std::vector<float> x(cols), xd(cols), w(cols);
    for (auto& v : x) v = nd(rng);
    std::vector<uint8_t> xq(*tensor::RowBytes(scalar->dot_type, cols));
    q8->quantize_row(x.data(), xq.data(), cols);
    q8->dequantize_row(xq.data(), xd.data(), cols);
    for (int64_t row : {int64_t{0}, int64_t{1}, info->shape[0] - 1}) {
      const uint8_t* wr = info->data + row * row_bytes;
      scalar->dequantize_row(wr, w.data(), cols);
      double ref = 0, l1 = 0;
      for (int64_t i = 0; i < cols; ++i) {
        ref += static_cast<double>(w[i]) * xd[i];
        l1 += std::fabs(static_cast<double>(w[i]) * xd[i]);
      }
      for (Isa isa : AvailableIsas()) {
        float got = 0;
        GetTypeOps(info->type, isa)->vec_dot(cols, wr, xq.data(), &got);
        // Q4_K's scale and min parts are each rounded in f32 and can be ~10x |w| (see
        // src/kernels/kquants_test.cc), hence the headroom over sum |w x|.
        EXPECT_LE(std::fabs(got - ref), 1e-5 * l1) << info->name << " row " << row << " "
                                                    << IsaName(isa);
      }
    }
  }
}

}  // namespace
}  // namespace fg::kernels
