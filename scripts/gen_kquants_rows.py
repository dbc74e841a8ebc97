#!/usr/bin/env python3
"""Writes tests/data/kquants_real_rows.json: a few rows of the real model's K-quant tensors
dequantized by the gguf Python package (an implementation independent of fgemma's), for
tests/model/kquants_real_test.cc.

Usage: gen_kquants_rows.py MODEL.gguf OUT.json
Needs gguf (scripts/requirements.txt) and numpy.
"""
import json
import sys

import gguf
import numpy as np
from importlib import metadata

# (tensor, rows): blk.0.attn_output is Q4_K, blk.0.ffn_down Q6_K in gemma-3-270m Q4_K_M.
TENSORS = [("blk.0.attn_output.weight", [0, 639]), ("blk.0.ffn_down.weight", [0, 333])]


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    reader = gguf.GGUFReader(sys.argv[1])
    by_name = {t.name: t for t in reader.tensors}
    out = {"generator": "scripts/gen_kquants_rows.py", "gguf_version": metadata.version("gguf"), "tensors": []}
    for name, rows in TENSORS:
        t = by_name[name]
        cols = int(t.shape[0])  # ggml ne[0]: elements per row
        n_rows = int(t.shape[1])
        raw = np.asarray(t.data)  # (rows, bytes per row) for quantized types
        assert raw.shape[0] == n_rows, raw.shape
        entry = {
            "name": name,
            "type": t.tensor_type.name,
            "type_id": int(t.tensor_type),
            "cols": cols,
            "n_rows": n_rows,
            "file_offset": int(t.data_offset),  # byte offset of the tensor data in the file
            "row_bytes": int(raw.shape[1]),
            "rows": [],
        }
        for r in rows:
            vals = gguf.quants.dequantize(raw[r:r + 1], t.tensor_type).reshape(-1).astype(np.float32)
            assert vals.size == cols
            entry["rows"].append({"row": r, "values": [float("%.9g" % v) for v in vals]})
        out["tensors"].append(entry)
    with open(sys.argv[2], "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
