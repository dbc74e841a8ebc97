#!/usr/bin/env python3
"""Lists an IREE parameter archive as IREE's own runtime reads it: JSON [{key, length, crc32}].

Used by tests/iree/irpa_test.cc to check fgemma's .irpa writer against IREE.
Usage: irpa_check.py FILE.irpa
"""
import json
import sys
import zlib

import iree.runtime as rt


def main():
    idx = rt.ParameterIndex()
    idx.load(sys.argv[1])
    out = []
    for key, entry in idx.items():
        data = rt.parameter_index_entry_as_numpy_flat_ndarray(entry).tobytes()
        out.append({"key": key, "length": entry.length, "crc32": zlib.crc32(data)})
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
