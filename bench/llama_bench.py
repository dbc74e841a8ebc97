#!/usr/bin/env python3
"""llama.cpp (through llama-cpp-python) measured the way `fgemma bench` measures fgemma.

ppN: one eval of N prompt tokens from an empty context (batches of 512, logits of the last
token only). tgN: N evals of one token each from an empty context. Prints the same JSON list
as `fgemma bench --json` (test, threads, tokens_per_s = median, stddev, samples).

--ttc FILE replays the time-to-call rows of a `fgemma bench --tools ... --json` run with the same
token ids: ttc_cold evaluates the whole prompt from an empty context, ttc_warm keeps the catalog
prefix in llama.cpp's KV cache (its own prompt cache: the cache is cut back to the prefix, as
llama-cpp-python does for a prompt sharing a prefix with the previous one) and evaluates the
rest; both then evaluate the output tokens one at a time, each step computing the full logits
and picking the argmax, as an unconstrained greedy decoder does.
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


def seq_rm(llm, p0):
    """Drops the KV cache from position p0 on (the API moved between llama-cpp-python versions)."""
    ctx = llm._ctx
    for name in ("kv_cache_seq_rm", "memory_seq_rm"):
        if hasattr(ctx, name):
            getattr(ctx, name)(-1, p0, -1)
            return
    raise RuntimeError("llama-cpp-python has no kv_cache_seq_rm/memory_seq_rm")


def ttc(args, llama_cpp):
    import numpy as np
    rows = [r for r in json.load(open(args.ttc)) if r.get("test", "").startswith("ttc_")]
    results = []
    llms = {}
    for row in rows:
        threads = row["threads"]
        if threads not in llms:
            llms[threads] = llama_cpp.Llama(model_path=args.model, n_ctx=2048, n_batch=512,
                                            n_ubatch=512, n_threads=threads,
                                            n_threads_batch=threads, verbose=False,
                                            logits_all=False)
        llm = llms[threads]
        prompt, out = row["prompt_ids"], row["output_ids"]
        prefix = row["prefix_tokens"]
        warm = row["test"] == "ttc_warm"

        n_vocab = llm.n_vocab()

        def step_tokens():
            for t in out:
                # The greedy choice over the last token's logits (llama.cpp's own buffer).
                np.argmax(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,)))
                llm.eval([t])

        times = []
        llm.reset()
        seq_rm(llm, 0)
        llm.eval(prompt[:prefix])
        for r in range(-1, args.repetitions):
            if warm:
                llm.n_tokens = prefix
                seq_rm(llm, prefix)
                t0 = time.perf_counter()
                llm.eval(prompt[prefix:])
            else:
                llm.reset()
                seq_rm(llm, 0)
                t0 = time.perf_counter()
                llm.eval(prompt)
            step_tokens()
            dt = (time.perf_counter() - t0) * 1e3
            if r >= 0:
                times.append(dt)
        med = statistics.median(times)
        results.append({"engine": "llama.cpp", "model": os.path.basename(args.model),
                        "test": row["test"], "catalog": row["catalog"], "threads": threads,
                        "repetitions": args.repetitions, "ms": med,
                        "stddev_ms": statistics.stdev(times) if len(times) > 1 else 0.0,
                        "samples_ms": times,
                        "prompt_tokens": len(prompt), "generated_tokens": len(out)})
        print(f"llama.cpp {row['test']} {row['catalog']} t={threads}: {med:.1f} ms",
              file=sys.stderr)
    json.dump(results, sys.stdout, indent=2)
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-p", "--n-prompt", default="64,512,1024")
    ap.add_argument("-n", "--n-gen", default="128")
    ap.add_argument("-t", "--threads", default="1,2")
    ap.add_argument("-r", "--repetitions", type=int, default=5)
    ap.add_argument("--ttc", metavar="FILE",
                    help="replay the ttc rows of a fgemma bench --json file (see above)")
    args = ap.parse_args()
    import llama_cpp  # imported late so --help works without it
    if args.ttc:
        ttc(args, llama_cpp)
        return

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
