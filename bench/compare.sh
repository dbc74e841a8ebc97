#!/usr/bin/env bash
# fgemma against llama.cpp on the same GGUF, alternating, in one run; prints medians, spread and
# the fgemma/llama.cpp ratio per test. Usage:
#   bench/compare.sh [-m MODEL] [-p 64,512] [-n 128] [-t 1,2] [-r 5] [-k ROUNDS] [-c CATALOGS]
#                    [-o RESULTS.json] [-l LABEL]
# -c examples/home_15.json,...: also time to call (cold and warm) per catalog; llama.cpp replays
# fgemma's prompt and output token ids (bench/llama_bench.py --ttc).
# -o FILE: also write both engines' rows (medians, spread, samples) as a results file for
# bench/plot.py, labelled LABEL (e.g. Q4_K_M; default: the model file's name). The tables are
# printed by bench/summarize.py. Relative paths are from the repository root.
# Needs build/fgemma and a venv with llama-cpp-python (scripts/requirements-reference.txt):
#   scripts/setup_venv.sh build/venv scripts/requirements-reference.txt
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=${PY:-$BUILD/venv/bin/python}
model="" pp=64,512 tg=128 th=1,2 reps=5 rounds=2 cats="" json="" label=""
cmdline="$*"
while getopts "m:p:n:t:r:k:c:o:l:" o; do
  case $o in m) model=$OPTARG;; p) pp=$OPTARG;; n) tg=$OPTARG;; t) th=$OPTARG;; r) reps=$OPTARG;;
    k) rounds=$OPTARG;; c) cats=$OPTARG;; o) json=$OPTARG;; l) label=$OPTARG;;
    *) echo "usage: $0 [-m MODEL] [-p LIST] [-n LIST] [-t LIST] [-r N] [-k ROUNDS] [-c CATALOGS] [-o RESULTS.json] [-l LABEL]" >&2; exit 2;; esac
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
"$PY" bench/summarize.py "$out" "$rounds" ${json:+--json "$json"} --label "$label" \
  --command "bench/compare.sh $cmdline"
