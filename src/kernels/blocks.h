// The 32-element block formats of ggml, byte for byte as GGUF stores them.
// ref: ggml/src/ggml-common.h (block_q4_0 ... block_iq4_nl).
//
// Scales are IEEE half (stored as uint16_t, little-endian like the host). Nibble order within
// a block: byte j holds element j in its low nibble and element j + 16 in its high nibble.
// Q5 types keep the 5th bit of element j in bit j of the 32-bit qh word.
#ifndef FGEMMA_KERNELS_BLOCKS_H_
#define FGEMMA_KERNELS_BLOCKS_H_

#include <cstdint>

namespace fg::kernels {

inline constexpr int kQK = 32;  // elements per block of every type in this file

struct block_q4_0 {
  uint16_t d;       // scale (f16); x = d * (q - 8)
  uint8_t qs[16];   // 4-bit quants
};
static_assert(sizeof(block_q4_0) == 18);

struct block_q4_1 {
  uint16_t d;       // scale (f16)
  uint16_t m;       // min (f16); x = d * q + m
  uint8_t qs[16];
};
static_assert(sizeof(block_q4_1) == 20);

struct block_q5_0 {
  uint16_t d;       // x = d * (q - 16), q = low nibble | high bit << 4
  uint8_t qh[4];    // 5th bits, element j at bit j (bytes, so the struct is not padded)
  uint8_t qs[16];
};
static_assert(sizeof(block_q5_0) == 22);

struct block_q5_1 {
  uint16_t d;
  uint16_t m;       // x = d * q + m
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(block_q5_1) == 24);

struct block_q8_0 {
  uint16_t d;       // x = d * q
  int8_t qs[32];
};
static_assert(sizeof(block_q8_0) == 34);

struct block_q8_1 {
  uint16_t d;       // x = d * q
  uint16_t s;       // d * sum(qs) (f16): lets Q4_1/Q5_1 fold their min into one multiply
  int8_t qs[32];
};
static_assert(sizeof(block_q8_1) == 36);

struct block_iq4_nl {
  uint16_t d;       // x = d * kIq4nlValues[q]
  uint8_t qs[16];
};
static_assert(sizeof(block_iq4_nl) == 18);

// The non-linear 4-bit codebook of IQ4_NL. ref: ggml/src/ggml-common.h kvalues_iq4nl.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

inline uint32_t LoadQh(const uint8_t qh[4]) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
         static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

}  // namespace fg::kernels

#endif  // FGEMMA_KERNELS_BLOCKS_H_
