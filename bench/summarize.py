#!/usr/bin/env python3
"""Summary of a bench/compare.sh run: medians, spread and fgemma/llama.cpp ratios.

  bench/summarize.py DIR ROUNDS [--json FILE] [--label LABEL] [--command TEXT]

DIR holds compare.sh's per-round files: fg_K.json (fgemma bench --json), ll_K.json
(bench/llama_bench.py) and, with time to call, fgttc_K.json / llttc_K.json, for K = 1..ROUNDS.
Prints the Markdown tables of docs/benchmarks.md (samples of all rounds pooled per test).

--json FILE also writes both engines' rows as one results file (format "fgemma-compare/1"),
the input of bench/plot.py:
  {"format": "fgemma-compare/1", "label": ..., "model": ..., "date": ..., "machine": ...,
   "rounds": N, "command": ...,
   "speed": [{"test": "pp64", "threads": 1, "unit": "tok/s",
              "fgemma": {"median", "sd", "samples"}, "llama_cpp": {...} or null}, ...],
   "ttc": [{"catalog", "test": "ttc_cold", "threads", "prompt_tokens", "generated_tokens",
            "peak_rss_fgemma_mib", "unit": "ms", "fgemma": {...}, "llama_cpp": {...} or null}]}
Standard library only.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import sys


def spread(samples):
    return {"median": statistics.median(samples),
            "sd": statistics.stdev(samples) if len(samples) > 1 else 0,
            "samples": samples}


def compared(a, b, ratio_suffix):
    """fgemma's and llama.cpp's spreads (llama.cpp's None without samples) and the three table
    cells: both medians ± sd and the ratio of the medians."""
    sa, sb = spread(a), spread(b) if b else None
    if sb is None:
        return sa, None, [f"{sa['median']:.1f} ± {sa['sd']:.1f}", "-", "-"]
    return sa, sb, [f"{sa['median']:.1f} ± {sa['sd']:.1f}", f"{sb['median']:.1f} ± {sb['sd']:.1f}",
                    f"{sa['median'] / sb['median']:.2f}{ratio_suffix}"]


def table_row(cells):
    print("| " + " | ".join(str(c) for c in cells) + " |")


def load(out, rounds, prefix):
    acc = {}
    for k in range(1, rounds + 1):
        for r in json.load(open(f"{out}/{prefix}_{k}.json")):
            acc.setdefault((r["test"], r["threads"]), []).extend(r["samples"])
    return acc


def load_ttc(out, rounds, prefix):
    acc, info = {}, {}
    for k in range(1, rounds + 1):
        for r in json.load(open(f"{out}/{prefix}_{k}.json")):
            key = (r["catalog"], r["test"], r["threads"])
            acc.setdefault(key, []).extend(r["samples_ms"])
            info[key] = r
    return acc, info


def machine():
    cpu = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{cpu}, {os.cpu_count()} cores, load average {load1:.1f} at the end"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="folder of compare.sh's per-round JSON files")
    ap.add_argument("rounds", type=int, help="number of rounds (files fg_1.json .. fg_N.json)")
    ap.add_argument("--json", metavar="FILE", help="also write the results file for bench/plot.py")
    ap.add_argument("--label", default="", help="label of the run in the results file "
                    "(e.g. the quant type; default: the model file's name)")
    ap.add_argument("--command", default="", help="the command line, recorded in the results file")
    args = ap.parse_args()
    out, rounds = args.dir, args.rounds
    if rounds < 1:
        ap.error("ROUNDS must be >= 1")

    results = {"format": "fgemma-compare/1", "label": args.label, "model": "",
               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "machine": machine(), "rounds": rounds, "command": args.command,
               "speed": [], "ttc": []}
    for r in json.load(open(f"{out}/fg_1.json")):
        results["model"] = r.get("model", "")
        break

    fg, ll = load(out, rounds, "fg"), load(out, rounds, "ll")
    print("| test | threads | fgemma tok/s (median ± sd) | llama.cpp tok/s (median ± sd) | ratio |")
    print("|---|---|---|---|---|")
    for key in sorted(fg, key=lambda k: (k[1], k[0][:2], int(k[0][2:]))):
        a, b, cols = compared(fg[key], ll.get(key, []), "x")
        results["speed"].append({"test": key[0], "threads": key[1], "unit": "tok/s",
                                 "fgemma": a, "llama_cpp": b})
        table_row([key[0], key[1]] + cols)
    if os.path.exists(f"{out}/fgttc_1.json"):
        fg, fi = load_ttc(out, rounds, "fgttc")
        ll, _ = load_ttc(out, rounds, "llttc")
        print()
        print("| catalog | test | threads | prompt+generated tokens | fgemma ms (median ± sd) | llama.cpp ms (median ± sd) | fgemma / llama.cpp time | peak RSS fgemma MiB |")
        print("|---|---|---|---|---|---|---|---|")
        for key in sorted(fg):
            r = fi[key]
            a, b, cols = compared(fg[key], ll.get(key, []), "")
            results["ttc"].append({"catalog": key[0], "test": key[1], "threads": key[2],
                                   "prompt_tokens": r["prompt_tokens"],
                                   "generated_tokens": r["generated_tokens"],
                                   "peak_rss_fgemma_mib": r["peak_rss_mib"], "unit": "ms",
                                   "fgemma": a, "llama_cpp": b})
            table_row([key[0], key[1], key[2], f"{r['prompt_tokens']}+{r['generated_tokens']}"]
                      + cols + [f"{r['peak_rss_mib']:.1f}"])

    if args.json:
        if not results["label"]:
            results["label"] = os.path.splitext(results["model"])[0] or "model"
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")
        print(f"summarize: wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
