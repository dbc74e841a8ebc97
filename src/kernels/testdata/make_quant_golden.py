"""Writes quant_golden.bin: block quantization and dequantization done by gguf-py
(gguf.quants, an independent numpy implementation of ggml's formats), for quant_test.cc.

Usage: python make_quant_golden.py [out_path]   (needs gguf==0.19.0 and numpy)

Record layout (little-endian):
  u32 kind        0: quantize + dequantize of `x`; 1: dequantize of given bytes only
  u32 ggml type id
  u32 n           elements
  kind 0: f32 x[n], then the quantized bytes, then f32 y[n]
  kind 1: the quantized bytes, then f32 y[n]
The byte count follows from the type (n / block * block_bytes).
"""
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

N = 256  # 8 blocks of 32


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "quant_golden.bin"
    rng = np.random.default_rng(20261129)
    recs = []
    for t in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0):
        x = rng.standard_normal(N).astype(np.float32)
        x[::37] *= 6  # outliers
        x[32:64] = np.abs(x[32:64])  # a block with no negative values (min > 0 for *_1)
        x[64:96] = 0  # an all-zero block
        q = quants.quantize(x.reshape(1, N), t).reshape(-1)
        y = quants.dequantize(q.reshape(1, -1), t).reshape(-1).astype(np.float32)
        recs.append(struct.pack("<III", 0, int(t), N) + x.tobytes() + q.tobytes() + y.tobytes())
    # IQ4_NL: gguf-py only dequantizes; random indices under sane f16 scales.
    blocks = []
    for b in range(N // 32):
        d = np.float16(rng.uniform(-0.05, 0.05)).tobytes()
        blocks.append(d + rng.integers(0, 256, 16, dtype=np.uint8).tobytes())
    q = np.frombuffer(b"".join(blocks), dtype=np.uint8)
    y = quants.dequantize(q.reshape(1, -1), T.IQ4_NL).reshape(-1).astype(np.float32)
    recs.append(struct.pack("<III", 1, int(T.IQ4_NL), N) + q.tobytes() + y.tobytes())
    with open(out, "wb") as f:
        f.write(b"".join(recs))


if __name__ == "__main__":
    main()
