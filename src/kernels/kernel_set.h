// The kernels of one instruction set, in one struct: per type (dequantize, quantize, vec_dot,
// the 2 x 2 tile, the four-row decode form, the packed panels), the element ops and the
// attention inner loops. One KernelSet exists per ISA the CPU has (AvailableIsas()), plus the
// reference set (the executor's reference mode); callers hold a `const KernelSet&` and call
// through it, so there is a single way to pick a kernel.
//
// How a set is built (kernel_set.cc): the scalar kernels first, then the fill functions of the
// set's ISA, which overwrite only the members that ISA specializes, so an ISA without a kernel
// for something keeps the scalar one (or, for the optional members tile, rows, panel and the
// attention loops, none). Each ISA file (*_avx2.cc, *_avx512.cc, *_neon.cc) exports exactly one
// fill function, compiled with that ISA's flags (g++ may store the pointers with VEX or EVEX
// moves), so only the sets of AvailableIsas() are ever filled: on a CPU without AVX, filling
// the AVX2 set is SIGILL.
#ifndef FGEMMA_KERNELS_KERNEL_SET_H_
#define FGEMMA_KERNELS_KERNEL_SET_H_

#include <cstdint>

#include "src/kernels/cpu.h"
#include "src/kernels/ops.h"
#include "src/kernels/quant.h"

namespace fg::kernels {

namespace internal {
struct PanelKernels;  // panel.h
}  // namespace internal

// A 2 x 2 register tile of vec_dot for batched matmuls: out[r + 2 t] = w_r . a_t for weight
// rows w0, w1 (in the weight type) and activation rows a0, a1 (in its dot_type), bit for bit
// what that set's vec_dot returns, so results never depend on how rows fall into tiles.
using DotTileFn = void (*)(int64_t n, const void* w0, const void* w1, const void* a0,
                           const void* a1, float* out);
// Four weight rows against one activation row (decode): out[r] = w[r] . a, bit for bit what
// vec_dot returns; the activation block, its scale and offset are loaded once for all four.
inline constexpr int kDotRows = 4;
using DotRowsFn = void (*)(int64_t n, const void* const* w, const void* a, float* out);

// The attention inner loops of attention.h (AttnScores, AttnWeightedSum) for a group of query
// heads sharing one KV head.
using AttnScoresFn = void (*)(const float* q, int64_t G, int64_t D, const float* k,
                              int64_t k_stride, int64_t n, float scale, float* s, int64_t lds);
using AttnWeightedSumFn = void (*)(const float* p, int64_t ldp, int64_t G, const float* v,
                                   int64_t v_stride, int64_t n, int64_t D, float* o);

inline constexpr int kMaxTypeId = 64;

struct TypeKernels {
  TypeOps ops;  // ops.dequantize_row == nullptr: no kernels for this type
  DotTileFn tile = nullptr;  // nullptr: matmuls of m > 1 use vec_dot
  DotRowsFn rows = nullptr;  // nullptr: decode uses vec_dot
  const internal::PanelKernels* panel = nullptr;  // nullptr: no packed panels (panel.h)
};

struct AttentionKernels {
  // Used when D is a multiple of d_multiple; otherwise (and where nullptr) attention runs the
  // element ops' dot per key and axpy per key.
  AttnScoresFn scores = nullptr;
  AttnWeightedSumFn weighted_sum = nullptr;
  int64_t d_multiple = 1;
};

struct KernelSet {
  Isa isa = Isa::kScalar;
  // The executor's reference mode: the scalar kernels, and MatMul runs MatMulReference (each
  // weight row dequantized, products accumulated in double) instead of vec_dot.
  bool reference = false;
  TypeKernels types[kMaxTypeId] = {};  // indexed by the DType id
  ElementOps element = {};
  AttentionKernels attention;

  // The kernels of type t, or nullptr where the set has none.
  const TypeKernels* type(DType t) const {
    const int id = static_cast<int>(t);
    if (id < 0 || id >= kMaxTypeId || types[id].ops.dequantize_row == nullptr) return nullptr;
    return &types[id];
  }
  const TypeOps* type_ops(DType t) const {
    const TypeKernels* k = type(t);
    return k != nullptr ? &k->ops : nullptr;
  }
};

// The set of `isa`, which must be one of AvailableIsas() (never hands out code the CPU lacks).
const KernelSet& GetKernelSet(Isa isa);
inline const KernelSet& ActiveKernelSet() { return GetKernelSet(ActiveIsa()); }
// The scalar set with `reference` set: the executor's reference mode.
const KernelSet& ReferenceKernelSet();

namespace internal {

// The fill functions, one per kernel file. The scalar ones (every set starts from them):
void FillBasicScalar(KernelSet& ks);     // F32 ... IQ4_NL (quant_basic.cc)
void FillKQuantScalar(KernelSet& ks);    // Q4_K, Q5_K, Q6_K, Q8_K (kquants.cc)
void FillElementOpsScalar(KernelSet& ks);  // ops.cc
void FillAttentionScalar(KernelSet& ks);   // the double-accumulating twins (attention.cc)

// Per ISA; each defined in its own file, built only where that ISA can exist, and called only
// when the CPU has it.
#if defined(__x86_64__) || defined(__i386__)
void FillBasicAvx2(KernelSet& ks);        // quant_basic_avx2.cc
void FillKQuantAvx2(KernelSet& ks);       // kquants_avx2.cc
void FillElementOpsAvx2(KernelSet& ks);   // ops_avx2.cc
void FillPanelAvx2(KernelSet& ks);        // panel_avx2.cc
void FillAttentionAvx2(KernelSet& ks);    // attention_avx2.cc
void FillBasicAvx512(KernelSet& ks);      // quant_basic_avx512.cc
void FillKQuantAvx512(KernelSet& ks);     // kquants_avx512.cc
void FillElementOpsAvx512(KernelSet& ks);  // ops_avx512.cc
void FillPanelAvx512(KernelSet& ks);      // panel_avx512.cc
void FillAttentionAvx512(KernelSet& ks);  // attention_avx512.cc
#endif
#if defined(__ARM_NEON) || defined(__aarch64__)
void FillBasicNeon(KernelSet& ks);       // quant_neon.cc
void FillKQuantNeon(KernelSet& ks);      // kquants_neon.cc
void FillElementOpsNeon(KernelSet& ks);  // ops_neon.cc
#endif

// Sets a type's TypeOps (scalar fill functions).
void SetTypeOps(KernelSet& ks, DType type, DType dot_type,
                void (*dequantize_row)(const void*, float*, int64_t),
                void (*quantize_row)(const float*, void*, int64_t),
                void (*vec_dot)(int64_t, const void*, const void*, float*));

}  // namespace internal

}  // namespace fg::kernels

#endif  // FGEMMA_KERNELS_KERNEL_SET_H_
