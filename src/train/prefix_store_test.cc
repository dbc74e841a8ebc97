#include "src/train/prefix_store.h"

#include <filesystem>

#include <gtest/gtest.h>

namespace fg::train {
namespace {

std::vector<std::vector<float>> Layers(size_t layers, size_t n, float base) {
  std::vector<std::vector<float>> x(layers, std::vector<float>(n));
  for (size_t l = 0; l < layers; ++l) {
    for (size_t i = 0; i < n; ++i) x[l][i] = base + static_cast<float>(l * 1000 + i) * 0.25f;
  }
  return x;
}

TEST(PrefixStore, ReadsBackWhatItStoredBitForBitAndLeavesNoFile) {
  const std::string dir = ::testing::TempDir() + "/prefix_store_test";
  std::filesystem::create_directories(dir);
  auto store = PrefixStore::Create(1 << 20, dir);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  // The file is unlinked at once.
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  const auto k = Layers(3, 40, 1.0f), v = Layers(3, 40, -7.0f);
  ASSERT_TRUE((*store)->Put("catalog a", 5, 8, k, v));  // rows 0..4 of 8 floats
  const auto k2 = Layers(3, 40, 100.0f), v2 = Layers(3, 40, 200.0f);
  ASSERT_TRUE((*store)->Put("catalog b", 3, 8, k2, v2));
  EXPECT_EQ((*store)->entries(), 2);
  EXPECT_EQ((*store)->bytes(), 2u * 3 * (5 + 3) * 8 * sizeof(float));

  auto rk = Layers(3, 40, 0.0f), rv = Layers(3, 40, 0.0f);
  const auto before = rk;
  auto got = (*store)->Get("catalog a", 5, 8, rk, rv);
  ASSERT_TRUE(got.ok() && *got);
  for (size_t l = 0; l < 3; ++l) {
    for (size_t i = 0; i < 40; ++i) {
      if (i < 5 * 8) {  // rows 0..4
        EXPECT_EQ(rk[l][i], k[l][i]);
        EXPECT_EQ(rv[l][i], v[l][i]);
      } else {
        EXPECT_EQ(rk[l][i], before[l][i]);  // rows past the prefix untouched
      }
    }
  }
  got = (*store)->Get("catalog b", 3, 8, rk, rv);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ(rk[2][23], k2[2][23]);
  EXPECT_EQ(rk[2][24], k[2][24]);  // row 3 still catalog a's
  // Not stored: another key, or the same key with another length.
  got = (*store)->Get("catalog c", 3, 8, rk, rv);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(*got);
  got = (*store)->Get("catalog a", 4, 8, rk, rv);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(*got);
  // Another number of layers than stored is an error, not a silent partial read.
  auto one_k = Layers(1, 40, 0.0f), one_v = Layers(1, 40, 0.0f);
  EXPECT_FALSE((*store)->Get("catalog a", 5, 8, one_k, one_v).ok());
  store->reset();
  std::filesystem::remove_all(dir);
}

TEST(PrefixStore, StopsTakingEntriesAtItsBudget) {
  auto store = PrefixStore::Create(2 * 2 * 4 * 8 * sizeof(float));  // two prefixes of 2 rows
  ASSERT_TRUE(store.ok());
  const auto k = Layers(2, 32, 1.0f), v = Layers(2, 32, 2.0f);
  EXPECT_TRUE((*store)->Put("a", 2, 8, k, v));
  EXPECT_TRUE((*store)->Put("b", 2, 8, k, v));
  EXPECT_FALSE((*store)->Put("c", 2, 8, k, v));
  EXPECT_FALSE((*store)->Put("d", 1, 8, k, v));  // full: nothing more, even what would fit
  EXPECT_EQ((*store)->entries(), 2);
  auto rk = Layers(2, 32, 0.0f), rv = Layers(2, 32, 0.0f);
  auto got = (*store)->Get("b", 2, 8, rk, rv);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ(rv[1][15], v[1][15]);
}

TEST(PrefixStore, AFolderThatDoesNotExistIsAnError) {
  auto store = PrefixStore::Create(1024, "/nonexistent/fgemma/prefix/store");
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("/nonexistent/fgemma/prefix/store"), std::string::npos);
}

}  // namespace
}  // namespace fg::train
