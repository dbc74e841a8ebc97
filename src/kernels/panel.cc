// The activation side data and the scalar twin of the panel arithmetic (see panel.h).
#include "src/kernels/panel.h"

#include <cmath>

#include "src/base/check.h"
#include "src/kernels/blocks.h"
#include "src/kernels/kquant_blocks.h"
#include "src/kernels/kquants_internal.h"
#include "src/tensor/half.h"

namespace fg::kernels::internal {
namespace {

using tensor::DType;
using tensor::Fp16ToFp32;

// The 32 integer weights of block j of a row (w = d * q_int) and its scale.
void BlockInts(DType t, const void* row, int64_t j, int q[kQK], float* d) {
  switch (t) {
    case DType::kQ8_0: {
      const auto& b = static_cast<const block_q8_0*>(row)[j];
      for (int k = 0; k < kQK; ++k) q[k] = b.qs[k];
      *d = Fp16ToFp32(b.d);
      return;
    }
    case DType::kQ4_0: {
      const auto& b = static_cast<const block_q4_0*>(row)[j];
      for (int k = 0; k < kQK / 2; ++k) {
        q[k] = (b.qs[k] & 0x0f) - 8;
        q[k + kQK / 2] = (b.qs[k] >> 4) - 8;
      }
      *d = Fp16ToFp32(b.d);
      return;
    }
    case DType::kQ5_0: {
      const auto& b = static_cast<const block_q5_0*>(row)[j];
      const uint32_t qh = LoadQh(b.qh);
      for (int k = 0; k < kQK / 2; ++k) {
        q[k] = ((b.qs[k] & 0x0f) | ((qh >> k) & 1) << 4) - 16;
        q[k + kQK / 2] = ((b.qs[k] >> 4) | ((qh >> (k + kQK / 2)) & 1) << 4) - 16;
      }
      *d = Fp16ToFp32(b.d);
      return;
    }
    case DType::kIQ4_NL: {
      const auto& b = static_cast<const block_iq4_nl*>(row)[j];
      for (int k = 0; k < kQK / 2; ++k) {
        q[k] = kIq4nlValues[b.qs[k] & 0x0f];
        q[k + kQK / 2] = kIq4nlValues[b.qs[k] >> 4];
      }
      *d = Fp16ToFp32(b.d);
      return;
    }
    default:
      FG_CHECK(false && "panel: no 32-element block type");
  }
}

// Q4_K, or Q5_K (kHigh: bit g of qh[l] is the fifth bit of element l of sub-block g).
template <bool kHigh, class Block>
float DotQ45K(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const Block*>(w);
  const auto* a = static_cast<const BlockQ8K*>(act);
  float acc = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    uint8_t sm[16];  // scales 0..7, mins 8..15
    UnpackScalesMinsK4(x[b].scales, sm);
    const uint8_t* sc = sm;
    const uint8_t* m = sm + 8;
    int32_t main = 0, mins = 0;
    for (int g = 0; g < 8; ++g) {
      const uint8_t* q = x[b].qs + 32 * (g / 2);
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) {
        int u = g % 2 == 0 ? (q[l] & 0x0f) : (q[l] >> 4);
        if constexpr (kHigh) u |= ((x[b].qh[l] >> g) & 1) << 4;
        dot += u * a[b].qs[32 * g + l];
      }
      main += sc[g] * dot;
    }
    for (int h = 0; h < 16; ++h) mins += m[h / 2] * a[b].bsums[h];
    acc = std::fma(static_cast<float>(main), Fp16ToFp32(x[b].d) * a[b].d, acc);
    acc = std::fma(static_cast<float>(mins), -Fp16ToFp32(x[b].dmin) * a[b].d, acc);
  }
  return acc;
}

float DotQ6K(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const BlockQ6K*>(w);
  const auto* a = static_cast<const BlockQ8K*>(act);
  float acc = 0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int u[kQK_K];
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[b].ql + 64 * h;
      const uint8_t* qh = x[b].qh + 32 * h;
      int* o = u + 128 * h;
      for (int l = 0; l < 32; ++l) {
        o[l] = (ql[l] & 0x0f) | ((qh[l] & 3) << 4);
        o[l + 32] = (ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4);
        o[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
        o[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
      }
    }
    int32_t main = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t dot = 0;
      for (int l = 0; l < 16; ++l) dot += u[16 * g + l] * a[b].qs[16 * g + l];
      main += x[b].scales[g] * dot;
    }
    for (int h = 0; h < 16; ++h) main -= 32 * x[b].scales[h] * a[b].bsums[h];
    acc = std::fma(static_cast<float>(main), Fp16ToFp32(x[b].d) * a[b].d, acc);
  }
  return acc;
}

}  // namespace

void PanelSide(int64_t n, const void* act_q8_0, int offset, PanelActSide* side) {
  const auto* a = static_cast<const block_q8_0*>(act_q8_0);
  for (int64_t j = 0; j < n / kQK; ++j) {
    int32_t sum = 0;
    if (offset != 0) {  // the AVX2 panels' signed weights need no correction
      for (int k = 0; k < kQK; ++k) sum += a[j].qs[k];
    }
    side[j].d = Fp16ToFp32(a[j].d);
    side[j].corr = -offset * sum;
  }
}

float PanelDotScalar(DType t, int64_t n, const void* w, const void* act) {
  if (t == DType::kQ4_K) return DotQ45K<false, BlockQ4K>(n, w, act);
  if (t == DType::kQ5_K) return DotQ45K<true, BlockQ5K>(n, w, act);
  if (t == DType::kQ6_K) return DotQ6K(n, w, act);
  const auto* a = static_cast<const block_q8_0*>(act);
  float acc = 0;
  for (int64_t j = 0; j < n / kQK; ++j) {
    int q[kQK];
    float dw;
    BlockInts(t, w, j, q, &dw);
    int32_t isum = 0;
    for (int k = 0; k < kQK; ++k) isum += q[k] * a[j].qs[k];
    const float s = dw * Fp16ToFp32(a[j].d);
    acc = std::fma(static_cast<float>(isum), s, acc);
  }
  return acc;
}

}  // namespace fg::kernels::internal
