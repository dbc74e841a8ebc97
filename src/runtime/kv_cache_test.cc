// KvCache: ring and global rows, the pin (rows copied aside before a run overwrites them, put
// back on rewinding), and when a rewind is possible.
#include "src/runtime/kv_cache.h"

#include <gtest/gtest.h>

namespace fg::runtime {
namespace {

model::Config SmallConfig() {
  model::Config c;
  c.n_layers = model::kGlobalLayerPeriod;  // sliding layers, then one global layer
  c.n_heads = 1;
  c.n_kv_heads = 1;
  c.head_dim = 2;
  c.sliding_window = 4;
  return c;
}

// Writes position p as a run of one token does: the pinned rows it overwrites copied aside
// first, then every layer's row of p set to p.
void Write(KvCache& kc, int64_t p) {
  kc.BeforeWrite(p, 1);
  for (int64_t l = 0; l < kc.layers(); ++l) {
    const int64_t row = p % kc.rows(l);
    for (int64_t i = 0; i < 2; ++i) {
      kc.k(l)[row * 2 + i] = static_cast<float>(p);
      kc.v(l)[row * 2 + i] = static_cast<float>(-p);
    }
  }
}

TEST(KvCache, RewindToThePinRestoresTheRowsAQueryThereReads) {
  const model::Config c = SmallConfig();
  auto kc = KvCache::Create(c, /*local_rows=*/6, /*context=*/32);
  ASSERT_TRUE(kc.ok());
  const int64_t global = c.n_layers - 1;
  ASSERT_TRUE(c.IsGlobal(global));
  EXPECT_EQ(kc->rows(0), 6);
  EXPECT_EQ(kc->rows(global), 32);
  const size_t plain = kc->bytes();
  EXPECT_EQ(plain, 2 * ((global * 6 + 32) * 2) * sizeof(float));
  for (int64_t p = 0; p < 8; ++p) Write(*kc, p);
  kc->Pin(8);
  EXPECT_EQ(kc->pinned(), 8);
  for (int64_t p = 8; p < 20; ++p) Write(*kc, p);  // the ring wraps twice
  EXPECT_GT(kc->bytes(), plain);                     // the window before the pin, copied aside
  kc->RewindToPin();
  EXPECT_EQ(kc->pinned(), 8);
  // A query at 8 reads positions 5, 6, 7 in the rings (window 4): back as they were.
  for (int64_t l = 0; l < global; ++l) {
    for (int64_t p = 5; p < 8; ++p) {
      EXPECT_EQ(kc->k(l)[(p % 6) * 2], static_cast<float>(p)) << l << " " << p;
      EXPECT_EQ(kc->v(l)[(p % 6) * 2 + 1], static_cast<float>(-p)) << l << " " << p;
    }
  }
  for (int64_t p = 0; p < 8; ++p) EXPECT_EQ(kc->k(global)[p * 2], static_cast<float>(p));
  // Again after another run: the pin holds.
  for (int64_t p = 8; p < 15; ++p) Write(*kc, p);
  kc->RewindToPin();
  for (int64_t p = 5; p < 8; ++p) EXPECT_EQ(kc->k(0)[(p % 6) * 2], static_cast<float>(p));
  kc->Unpin();
  EXPECT_EQ(kc->pinned(), -1);
  EXPECT_EQ(kc->bytes(), plain);
  EXPECT_EQ(kc->filled_k(0, 3).size(), 3u * 2);
  EXPECT_EQ(kc->filled_k(0, 20).size(), 6u * 2);
  EXPECT_EQ(kc->filled_v(global, 20).size(), 20u * 2);
}

TEST(KvCache, RewindIsPossibleWhileTheRingStillHoldsTheWindow) {
  const model::Config c = SmallConfig();
  auto kc = KvCache::Create(c, 6, 32);
  ASSERT_TRUE(kc.ok());
  // At 20 (positions 14..19 in the 6 ring rows), a query at 17 reads 14..17: all there. One at
  // 16 reads 13..16, and 19 overwrote 13's row; one at 10 reads 7..10, long overwritten.
  EXPECT_TRUE(kc->CanRewind(20, 18));
  EXPECT_TRUE(kc->CanRewind(20, 17));
  EXPECT_FALSE(kc->CanRewind(20, 16));
  EXPECT_FALSE(kc->CanRewind(20, 10));
  EXPECT_TRUE(kc->CanRewind(20, 0));   // an empty sequence reads nothing
  EXPECT_TRUE(kc->CanRewind(20, 20));  // staying
}

}  // namespace
}  // namespace fg::runtime
