#!/usr/bin/env bash
# fgemma against llama.cpp's own tools on the same GGUF, alternating, in one run; prints medians,
# spread and the fgemma/llama.cpp ratio per test. Usage:
#   bench/compare.sh [-m MODEL] [-p 64,512] [-n 128] [-t 1,2] [-r 5] [-k ROUNDS] [-c CATALOGS]
#                    [-o RESULTS.json] [-l LABEL]
# The peers are built by scripts/build_llama_cpp.sh (`make llama-cpp`: llama.cpp's defaults,
# -march=native, from the source the pinned llama-cpp-python sdist vendors; cached in
# BUILD/llama.cpp/cmake/bin, built here on first use):
#   ppN / tgN: llama-bench (-p/-n/-t/-r as given), against `fgemma bench`;
#   -c examples/home_15.json,...: time to call (cold and warm) per catalog, against llama-server
#     replaying fgemma's prompt and output token ids over HTTP (bench/server_ttc.py).
# -o FILE: also write both engines' rows (medians, spread, samples) as a results file for
# bench/plot.py, labelled LABEL (e.g. Q4_K_M; default: the model file's name). The tables are
# printed by bench/summarize.py. Relative paths are from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
bin="$BUILD/llama.cpp/cmake/bin"
model="" pp=64,512 tg=128 th=1,2 reps=5 rounds=2 cats="" json="" label=""
cmdline="$*"
while getopts "m:p:n:t:r:k:c:o:l:" o; do
  case $o in m) model=$OPTARG;; p) pp=$OPTARG;; n) tg=$OPTARG;; t) th=$OPTARG;; r) reps=$OPTARG;;
    k) rounds=$OPTARG;; c) cats=$OPTARG;; o) json=$OPTARG;; l) label=$OPTARG;;
    *) echo "usage: $0 [-m MODEL] [-p LIST] [-n LIST] [-t LIST] [-r N] [-k ROUNDS] [-c CATALOGS] [-o RESULTS.json] [-l LABEL]" >&2; exit 2;; esac
done
[ -n "$model" ] || model=$(cat "$BUILD/model_path.txt")
[ -x "$bin/llama-bench" ] && [ -x "$bin/llama-server" ] || scripts/build_llama_cpp.sh "$BUILD"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for k in $(seq 1 "$rounds"); do
  if [ -n "$pp$tg" ]; then
    echo "round $k/$rounds: fgemma" >&2
    "$BUILD/fgemma" bench -m "$model" -p "$pp" -n "$tg" -t "$th" -r "$reps" --json > "$out/fg_$k.json"
    echo "round $k/$rounds: llama-bench" >&2
    "$bin/llama-bench" -m "$model" -p "${pp:-0}" -n "${tg:-0}" -t "$th" -r "$reps" -o json \
      2>/dev/null > "$out/lb_$k.json"
  else
    echo '[]' > "$out/fg_$k.json"
    echo '[]' > "$out/lb_$k.json"
  fi
  # llama-bench's rows in summarize.py's format: test (ppN / tgN), threads, samples (tok/s).
  python3 - "$out/lb_$k.json" > "$out/ll_$k.json" <<'PY'
import json, sys
rows = []
for x in json.load(open(sys.argv[1])):
    if x["n_prompt"] == 0 and x["n_gen"] == 0:
        continue
    test = "pp%d" % x["n_prompt"] if x["n_gen"] == 0 else "tg%d" % x["n_gen"]
    rows.append({"engine": "llama.cpp (llama-bench)", "test": test, "threads": x["n_threads"],
                 "samples": x["samples_ts"]})
json.dump(rows, sys.stdout, indent=2)
PY
  if [ -n "$cats" ]; then
    echo "round $k/$rounds: fgemma time to call" >&2
    "$BUILD/fgemma" bench -m "$model" -p "" -n "" -t "$th" -r "$reps" --tools "$cats" --json \
      > "$out/fgttc_$k.json"
    echo "round $k/$rounds: llama-server time to call" >&2
    python3 bench/server_ttc.py --server "$bin/llama-server" -m "$model" -r "$reps" \
      --ttc "$out/fgttc_$k.json" > "$out/llttc_$k.json"
  fi
done
python3 bench/summarize.py "$out" "$rounds" ${json:+--json "$json"} --label "$label" \
  --command "bench/compare.sh $cmdline"
