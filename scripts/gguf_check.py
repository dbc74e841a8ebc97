#!/usr/bin/env python3
"""Reads a GGUF file with the gguf package (llama.cpp's Python reader) and prints what it sees
as JSON, so C++ tests can check that files fgemma writes are accepted and read identically.

Usage: gguf_check.py FILE.gguf
Output: {"version", "alignment", "data_offset", "metadata": {key: {"type", "value"}},
         "key_order": [...], "tensors": [{"name", "type", "ne", "shape", "offset", "n_bytes",
         "crc32"}]}
"ne" is ggml's innermost-first order, "shape" outermost-first; "offset" is relative to the data
section; "crc32" is zlib's CRC-32 of the tensor's raw bytes.
"""
import json
import sys
import zlib

import gguf
import numpy as np


def field_value(field):
    types = field.types
    if not types:
        return None
    if types[0] == gguf.GGUFValueType.ARRAY:
        if types[-1] == gguf.GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8", errors="replace") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    if types[0] == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8", errors="replace")
    v = field.parts[field.data[0]].tolist()[0]
    if types[0] == gguf.GGUFValueType.BOOL:
        return bool(v)
    return v


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    reader = gguf.GGUFReader(sys.argv[1], "r")
    out = {"metadata": {}, "key_order": [], "tensors": []}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            if name == "GGUF.version":
                out["version"] = int(field.parts[field.data[0]][0])
            continue
        t = field.types
        type_name = t[0].name.lower()
        if t[0] == gguf.GGUFValueType.ARRAY:
            type_name = "array:" + t[-1].name.lower()
        out["metadata"][name] = {"type": type_name, "value": field_value(field)}
        out["key_order"].append(name)
    out["alignment"] = int(reader.alignment)
    out["data_offset"] = int(reader.data_offset)
    for t in reader.tensors:
        raw = np.ascontiguousarray(t.data).view(np.uint8).tobytes()
        ne = [int(x) for x in t.shape]
        out["tensors"].append({
            "name": t.name,
            "type": t.tensor_type.name,
            "ne": ne,
            "shape": list(reversed(ne)),
            "offset": int(t.data_offset) - int(reader.data_offset),
            "n_bytes": int(t.n_bytes),
            "crc32": zlib.crc32(raw) & 0xFFFFFFFF,
        })
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
