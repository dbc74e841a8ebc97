#!/usr/bin/env bash
# fgemma bench against llama.cpp's own llama-bench (built by scripts/build_llama_cpp.sh from the
# pinned llama-cpp-python sdist's source, its defaults: -march=native), same GGUF, same machine,
# alternating, R rounds of `-r REPS` each; prints each engine's median tokens/s per test and the
# ratio fgemma / llama.cpp. The honest peer for docs/benchmarks.md (the Python binding
# understates llama.cpp about 2x).
# Usage: bench/llama_bench_compare.sh [MODEL] [ROUNDS] [THREADS]   (defaults: the installed
# model, 3 rounds, 2 threads; tests pp512 and tg128)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-$(cat "$here/build/model_path.txt")}
rounds=${2:-3}
threads=${3:-2}
bin="$here/build/llama.cpp/cmake/bin"
[ -x "$bin/llama-bench" ] || "$here/scripts/build_llama_cpp.sh" "$here/build"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq "$rounds"); do
  "$here/build/fgemma" bench -m "$model" -p 512 -n 128 -t "$threads" -r 3 --json 2>/dev/null |
    python3 -c 'import json,sys
for x in json.load(sys.stdin): print("fgemma", x["test"], x["tokens_per_s"])' >> "$out"
  "$bin/llama-bench" -m "$model" -p 512 -n 128 -t "$threads" -r 3 -o json 2>/dev/null |
    python3 -c 'import json,sys
for x in json.load(sys.stdin):
    t = "pp%d" % x["n_prompt"] if x["n_gen"] == 0 else "tg%d" % x["n_gen"]
    print("llama.cpp", t, x["avg_ts"])' >> "$out"
done
python3 - "$out" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    e, t, v = line.split()
    rows.setdefault((e, t), []).append(float(v))
print("| test | fgemma tok/s (median) | llama-bench tok/s (median) | fgemma / llama.cpp |")
print("|---|---|---|---|")
for t in ("pp512", "tg128"):
    f = statistics.median(rows[("fgemma", t)])
    l = statistics.median(rows[("llama.cpp", t)])
    print("| %s | %.1f | %.1f | %.2fx |" % (t, f, l, f / l))
PY
