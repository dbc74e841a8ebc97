#!/usr/bin/env python3
"""Writes tests/data/kquants_ggml_quant.json: fixed f32 rows and the bytes llama.cpp's reference
quantizers (ggml quantize_row_{q4_K,q5_K,q6_K,q8_K}_ref, called through ctypes from the
libggml-base shipped with llama-cpp-python) make of them, for src/kernels/kquants_test.cc.

Usage: gen_kquants_ggml.py OUT.json
Needs numpy and llama-cpp-python (scripts/requirements.txt).
"""
import ctypes
import glob
import json
import os
import sys
from importlib import metadata

import numpy as np

BLOCK_BYTES = {"Q4_K": 144, "Q5_K": 176, "Q6_K": 210, "Q8_K": 292}
N = 256 * 6


def find_libggml_base() -> str:
    import llama_cpp  # noqa: F401  (only to locate the package)
    pkg = os.path.dirname(llama_cpp.__file__)
    for pattern in ("lib/libggml-base.so", "lib/libggml-base.so.*", "../lib/libggml-base.so"):
        hits = sorted(glob.glob(os.path.join(pkg, pattern)))
        if hits:
            return hits[0]
    raise SystemExit("libggml-base.so not found next to llama_cpp")


def make_input() -> np.ndarray:
    rng = np.random.default_rng(2024)
    x = np.empty(N, dtype=np.float32)
    x[0:256] = rng.normal(0, 0.02, 256)                  # weight-like
    x[256:512] = rng.normal(0.01, 0.05, 256)             # offset: mins matter
    x[512:768] = rng.normal(0, 1.0, 256) * np.where(rng.random(256) < 0.03, 20, 1)  # outliers
    x[768:1024] = rng.uniform(-3, 3, 256)                # activation-like
    x[1024:1280] = np.abs(rng.normal(0, 0.1, 256))       # one-signed
    x[1280:1536] = rng.normal(0, 1e-3, 256)              # small scale
    return x.astype(np.float32)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    lib = ctypes.CDLL(find_libggml_base())
    x = make_input()
    out = {
        "generator": "scripts/gen_kquants_ggml.py",
        "llama_cpp_python": metadata.version("llama_cpp_python"),
        "n": N,
        "input": [float("%.9g" % v) for v in x],
        "quantized": {},
    }
    # The JSON must give back exactly these f32 values.
    assert np.array_equal(np.array(out["input"], dtype=np.float32), x)
    for name, bb in BLOCK_BYTES.items():
        fn = getattr(lib, "quantize_row_%s_ref" % name.lower().replace("_k", "_K"))
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        buf = np.zeros(N // 256 * bb, dtype=np.uint8)
        fn(x.ctypes.data, buf.ctypes.data, N)
        out["quantized"][name] = buf.tobytes().hex()
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
