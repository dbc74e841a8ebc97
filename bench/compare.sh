#!/usr/bin/env bash
# fgemma against llama.cpp on the same GGUF, alternating, in one run; prints medians, spread and
# the fgemma/llama.cpp ratio per test. Usage:
#   bench/compare.sh [-m MODEL] [-p 64,512] [-n 128] [-t 1,2] [-r 5] [-k ROUNDS] [-c CATALOGS]
# -c examples/home_15.json,...: also time to call (cold and warm) per catalog; llama.cpp replays
# fgemma's prompt and output token ids (bench/llama_bench.py --ttc).
# Needs build/fgemma and a venv with llama-cpp-python (scripts/requirements-reference.txt):
#   scripts/setup_venv.sh build/venv scripts/requirements-reference.txt
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=${PY:-$BUILD/venv/bin/python}
model="" pp=64,512 tg=128 th=1,2 reps=5 rounds=2 cats=""
while getopts "m:p:n:t:r:k:c:" o; do
  case $o in m) model=$OPTARG;; p) pp=$OPTARG;; n) tg=$OPTARG;; t) th=$OPTARG;; r) reps=$OPTARG;;
    k) rounds=$OPTARG;; c) cats=$OPTARG;;
    *) echo "usage: $0 [-m MODEL] [-p LIST] [-n LIST] [-t LIST] [-r N] [-k ROUNDS] [-c CATALOGS]" >&2; exit 2;; esac
done
[ -n "$model" ] || model=$(cat "$BUILD/model_path.txt")
out=$(mktemp -d)
for k in $(seq 1 "$rounds"); do
  echo "round $k/$rounds: fgemma" >&2
  "$BUILD/fgemma" bench -m "$model" -p "$pp" -n "$tg" -t "$th" -r "$reps" --json > "$out/fg_$k.json"
  echo "round $k/$rounds: llama.cpp" >&2
  "$PY" bench/llama_bench.py -m "$model" -p "$pp" -n "$tg" -t "$th" -r "$reps" > "$out/ll_$k.json"
  if [ -n "$cats" ]; then
    echo "round $k/$rounds: fgemma time to call" >&2
    "$BUILD/fgemma" bench -m "$model" -p "" -n "" -t "$th" -r "$reps" --tools "$cats" --json \
      > "$out/fgttc_$k.json"
    echo "round $k/$rounds: llama.cpp time to call" >&2
    "$PY" bench/llama_bench.py -m "$model" -t "$th" -r "$reps" --ttc "$out/fgttc_$k.json" \
      > "$out/llttc_$k.json"
  fi
done
"$PY" - "$out" "$rounds" <<'PYEOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(prefix):
    acc = {}
    for k in range(1, rounds + 1):
        for r in json.load(open(f"{out}/{prefix}_{k}.json")):
            acc.setdefault((r["test"], r["threads"]), []).extend(r["samples"])
    return acc
fg, ll = load("fg"), load("ll")
print("| test | threads | fgemma tok/s (median ± sd) | llama.cpp tok/s (median ± sd) | ratio |")
print("|---|---|---|---|---|")
for key in sorted(fg, key=lambda k: (k[1], k[0][:2], int(k[0][2:]))):
    a, b = fg[key], ll.get(key, [])
    ma = statistics.median(a); sa = statistics.stdev(a) if len(a) > 1 else 0
    if b:
        mb = statistics.median(b); sb = statistics.stdev(b) if len(b) > 1 else 0
        print(f"| {key[0]} | {key[1]} | {ma:.1f} ± {sa:.1f} | {mb:.1f} ± {sb:.1f} | {ma/mb:.2f}x |")
    else:
        print(f"| {key[0]} | {key[1]} | {ma:.1f} ± {sa:.1f} | - | - |")
import os
if os.path.exists(f"{out}/fgttc_1.json"):
    def load_ttc(prefix):
        acc, info = {}, {}
        for k in range(1, rounds + 1):
            for r in json.load(open(f"{out}/{prefix}_{k}.json")):
                key = (r["catalog"], r["test"], r["threads"])
                acc.setdefault(key, []).extend(r["samples_ms"])
                info[key] = r
        return acc, info
    fg, fi = load_ttc("fgttc")
    ll, _ = load_ttc("llttc")
    print()
    print("| catalog | test | threads | prompt+generated tokens | fgemma ms (median ± sd) | llama.cpp ms (median ± sd) | fgemma / llama.cpp time | peak RSS fgemma MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for key in sorted(fg):
        a, b = fg[key], ll.get(key, [])
        r = fi[key]
        ma = statistics.median(a); sa = statistics.stdev(a) if len(a) > 1 else 0
        toks = f"{r['prompt_tokens']}+{r['generated_tokens']}"
        if b:
            mb = statistics.median(b); sb = statistics.stdev(b) if len(b) > 1 else 0
            print(f"| {key[0]} | {key[1]} | {key[2]} | {toks} | {ma:.1f} ± {sa:.1f} | {mb:.1f} ± {sb:.1f} | {ma/mb:.2f} | {r['peak_rss_mib']:.1f} |")
        else:
            print(f"| {key[0]} | {key[1]} | {key[2]} | {toks} | {ma:.1f} ± {sa:.1f} | - | - | {r['peak_rss_mib']:.1f} |")
PYEOF
