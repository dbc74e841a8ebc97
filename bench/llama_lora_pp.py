#!/usr/bin/env python3
"""llama.cpp's prompt-processing cost of a LoRA adapter: pp512 (one llama_decode of 512 tokens
from an empty cache, n_ubatch 512) with and without the adapter, alternating, medians.
llama-completion reports no prompt time when an adapter is set, so this drives llama.cpp's own
library through the pinned sdist's Python package (timing only llm.eval, the C call).
Usage: scripts/llama_cpp_python.sh bench/llama_lora_pp.py MODEL ADAPTER [ROUNDS]"""
import statistics
import sys
import time

import llama_cpp

model, adapter = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
llms = {
    "base": llama_cpp.Llama(model_path=model, n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=2,
                            verbose=False),
    "lora": llama_cpp.Llama(model_path=model, n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=2,
                            verbose=False, lora_path=adapter),
}
toks = [2] + [(i * 7919) % 200000 + 1000 for i in range(511)]
times = {k: [] for k in llms}
for _ in range(rounds):
    for k, llm in llms.items():
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(toks)
        times[k].append(time.perf_counter() - t0)
b, l = statistics.median(times["base"]), statistics.median(times["lora"])
print("llama.cpp pp512: base %.1f tok/s, with adapter %.1f tok/s, cost %+.1f %%" %
      (512 / b, 512 / l, 100 * (b and (l / b - 1))))
