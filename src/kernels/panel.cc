// Panel kernel dispatch, the activation side data and the scalar twin of the panel arithmetic
// (see panel.h).
#include "src/kernels/panel.h"

#include <cmath>

#include "src/kernels/blocks.h"
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
      for (int k = 0; k < kQK; ++k) q[k] = 0;
      *d = 0;
      return;
  }
}

}  // namespace

const PanelKernels* GetPanel(DType t, Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  if (isa == Isa::kAvx512) return PanelAvx512(t);
#endif
  (void)t;
  (void)isa;
  return nullptr;
}

void PanelSide(int64_t n, const void* act_q8_0, int offset, PanelActSide* side) {
  const auto* a = static_cast<const block_q8_0*>(act_q8_0);
  for (int64_t j = 0; j < n / kQK; ++j) {
    int32_t sum = 0;
    for (int k = 0; k < kQK; ++k) sum += a[j].qs[k];
    side[j].d = Fp16ToFp32(a[j].d);
    side[j].corr = -offset * sum;
  }
}

float PanelDotScalar(DType t, int64_t n, const void* w, const void* act_q8_0) {
  const auto* a = static_cast<const block_q8_0*>(act_q8_0);
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
