#!/usr/bin/env python3
"""How far llama.cpp is from its own goldens: the session goldens' prompts through other correct
configurations of llama.cpp, and through another build of it.

scripts/gen_goldens_session.py runs llama.cpp one way (n_ubatch 512, 2 threads, f32 KV cache,
no flash attention, this machine's best SIMD). Issue 3 asked fgemma for final-position logits
within NMSE 1e-3 of those goldens and identical 32-token greedy continuations on all 10
prompts. This script measures what llama.cpp itself gives under the same comparison when only
its arithmetic changes: token-by-token prefill (its decode kernels instead of its batch
kernels), flash attention, its default f16 KV cache, and (run it with a second llama-cpp-python
built for another ISA, --build NAME) another SIMD path. Configurations that keep the arithmetic
(n_ubatch 64, 1 thread) show it is deterministic.

For every configuration and prompt it records, against the golden configuration run in the same
process: the final-position logits NMSE and the first greedy step that differs (null: all 32
equal); and against the stored goldens (tests/data/session_goldens.json and the f16 logits
files): the same two, so a run of another build compares with the stored ones.

Usage: python scripts/llama_self_spread.py MODEL.gguf [--build NAME] [--configs a,b,...]
       [--out tests/data/llama_self_spread.json]
Results are merged into --out under "builds" -> NAME -> configuration -> prompt.
The committed file holds two builds of llama-cpp-python 0.3.36 on the development machine:
  avx512: pip install -r scripts/requirements-reference.txt (GGML_NATIVE: AVX-512, VNNI, BF16)
          python scripts/llama_self_spread.py MODEL --build avx512
  avx2:   CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
          -DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF"
          pip install --no-cache-dir llama-cpp-python==0.3.36   (in a second venv)
          python scripts/llama_self_spread.py MODEL --build avx2 --configs golden,ubatch1
Needs llama-cpp-python (scripts/requirements-reference.txt) and numpy.
"""
import argparse
import datetime
import json
import os
import sys
import time

import llama_cpp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data")

sys.path.insert(0, HERE)
import gen_goldens_session as goldens  # noqa: E402  (the prompts and llama.cpp's configuration)

# The golden configuration (gen_goldens_session.py) and the changes made to it.
BASE = goldens.LLAMA_CONFIG
CONFIGS = {
    "golden": {},
    "ubatch64": dict(n_batch=64, n_ubatch=64),
    "threads1": dict(n_threads=1, n_threads_batch=1),
    **goldens.LLAMA_VARIANTS,
}


def nmse(got, want):
    want = want.astype(np.float64)
    return float(((got.astype(np.float64) - want) ** 2).sum() / (want ** 2).sum())


def first_diff(a, b):
    return next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), None)


def run(model, cfg):
    llm = llama_cpp.Llama(model_path=model, logits_all=True, verbose=False, **{**BASE, **cfg})
    out = {}
    for name, text in goldens.PROMPTS:
        final, gen, _ = goldens.greedy(llm, llm.tokenize(text.encode(), add_bos=True, special=True))
        out[name] = (final, gen)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--build", default="default", help="name of this llama-cpp-python build")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="configurations to run")
    ap.add_argument("--out", default=os.path.join(DATA, "llama_self_spread.json"))
    args = ap.parse_args()
    if not os.path.isfile(args.model):
        ap.error(f"model file {args.model!r} not found")
    names = args.configs.split(",")
    for n in names:
        if n not in CONFIGS:
            ap.error(f"unknown configuration {n!r} (known: {', '.join(CONFIGS)})")
    if "golden" not in names:
        names.insert(0, "golden")

    stored = json.load(open(os.path.join(DATA, "session_goldens.json")))
    stored = {p["name"]: p for p in stored["prompts"]}
    stored_logits = {}
    for name, p in stored.items():
        if p["full_logits"]:
            h = np.fromfile(os.path.join(DATA, f"session_logits_{name}.f16"), dtype="<f2")
            stored_logits[name] = h.astype(np.float32)

    results, base = {}, None
    for cname in names:
        t0 = time.time()
        r = run(args.model, CONFIGS[cname])
        if cname == "golden":
            base = r
        rows = {}
        for name, _ in goldens.PROMPTS:
            final, gen = r[name]
            row = {"nmse": nmse(final, base[name][0]), "first_diff": first_diff(gen, base[name][1]),
                   "first_diff_vs_stored": first_diff(gen, stored[name]["greedy"])}
            if name in stored_logits:
                row["nmse_vs_stored"] = nmse(final, stored_logits[name])
            rows[name] = row
        results[cname] = rows
        same = sum(v["first_diff"] is None for v in rows.values())
        print(f"{args.build}/{cname} ({time.time() - t0:.0f} s): {same}/{len(rows)} prompts "
              f"identical for {goldens.STEPS} steps; max NMSE "
              f"{max(v['nmse'] for v in rows.values()):.2e}", file=sys.stderr)

    doc = {"builds": {}}
    if os.path.exists(args.out):
        doc = json.load(open(args.out))
    doc["generator"] = "scripts/llama_self_spread.py"
    doc["model"] = os.path.basename(args.model)
    doc["steps"] = goldens.STEPS
    doc["builds"][args.build] = {
        "llama_cpp_python": llama_cpp.__version__,
        "system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "configs": {k: {"change": CONFIGS[k], "prompts": v} for k, v in results.items()},
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
