#!/usr/bin/env python3
"""llama.cpp (through llama-cpp-python) measured the way `fgemma bench` measures fgemma.

ppN: one eval of N prompt tokens from an empty context (batches of 512, logits of the last
token only). tgN: N evals of one token each from an empty context. Prints the same JSON list
as `fgemma bench --json` (test, threads, tokens_per_s = median, stddev, samples).
"""
import argparse
import json
import os
import statistics
import sys
import time


def bench_tokens(n, vocab):
    # Same generator as fgemma bench (xorshift64 from one seed), so both process equal ids.
    x = 0x2545F4914F6CDD1D
    out = []
    mask = (1 << 64) - 1
    for _ in range(n):
        x ^= (x << 13) & mask
        x ^= x >> 7
        x ^= (x << 17) & mask
        out.append(1000 + x % max(vocab - 1000, 1))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-p", "--n-prompt", default="64,512,1024")
    ap.add_argument("-n", "--n-gen", default="128")
    ap.add_argument("-t", "--threads", default="1,2")
    ap.add_argument("-r", "--repetitions", type=int, default=5)
    args = ap.parse_args()
    import llama_cpp  # imported late so --help works without it

    pps = [int(x) for x in args.n_prompt.split(",") if x]
    tgs = [int(x) for x in args.n_gen.split(",") if x]
    results = []
    for threads in [int(x) for x in args.threads.split(",") if x]:
        n_ctx = max(pps + tgs + [1])
        llm = llama_cpp.Llama(model_path=args.model, n_ctx=n_ctx, n_batch=512, n_ubatch=512,
                              n_threads=threads, n_threads_batch=threads, verbose=False,
                              logits_all=False)
        vocab = llm.n_vocab()
        tests = [("pp%d" % n, n, 0) for n in pps if n > 0] + [("tg%d" % n, 0, n) for n in tgs if n > 0]
        for name, n_prompt, n_gen in tests:
            toks = bench_tokens(max(n_prompt, n_gen), vocab)
            rates = []
            for r in range(-1, args.repetitions):  # r = -1: warm-up
                llm.reset()
                llm._ctx.kv_cache_clear() if hasattr(llm._ctx, "kv_cache_clear") else None
                t0 = time.perf_counter()
                if n_prompt:
                    llm.eval(toks[:n_prompt])
                else:
                    for t in toks[:n_gen]:
                        llm.eval([t])
                dt = time.perf_counter() - t0
                if r >= 0:
                    rates.append((n_prompt or n_gen) / dt)
            results.append({"engine": "llama.cpp", "model": os.path.basename(args.model),
                            "test": name, "threads": threads, "n_prompt": n_prompt, "n_gen": n_gen,
                            "repetitions": args.repetitions,
                            "tokens_per_s": statistics.median(rates),
                            "stddev": statistics.stdev(rates) if len(rates) > 1 else 0.0,
                            "samples": rates})
            print(f"llama.cpp {name} t={threads}: {statistics.median(rates):.2f} tok/s",
                  file=sys.stderr)
        del llm
    json.dump(results, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
