#!/usr/bin/env python3
"""fgemma from Python: one request to a function call (the JSON `fgemma call` prints), then
streamed text generation with --generate.

    pip install ./python          # ctypes over libfgemma.so: `make install`, or FGEMMA_LIBRARY
    python examples/python/call.py MODEL.gguf examples/smart_home.json "turn the light on"
"""
import sys

import fgemma


def main() -> int:
    if len(sys.argv) < 4:
        print(f"usage: {sys.argv[0]} MODEL.gguf CATALOG.json REQUEST [--generate]",
              file=sys.stderr)
        return 2
    model_path, catalog_path, request = sys.argv[1:4]
    try:
        with fgemma.Model(model_path) as model:
            with open(catalog_path, encoding="utf-8") as f:
                caller = model.caller(f.read())
            print(caller.call_json(request))  # caller.call(request) gives a dict
            if "--generate" in sys.argv[4:]:
                for piece in model.generate(request, max_tokens=16, temperature=0):
                    print(piece, end="", flush=True)
                print()
    except fgemma.FgemmaError as e:
        print(f"fgemma: {e.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
