#!/usr/bin/env bash
# What a LoRA adapter costs, fgemma against llama.cpp's own tools on the same GGUF and adapter:
# pp512 and tg128 with and without the adapter, engines and configurations alternating, R
# rounds, medians. fgemma: `fgemma bench`; llama.cpp: llama-completion (built by
# scripts/build_llama_cpp.sh) on a 512-token prompt generating 128 tokens, its own timings. With
# an adapter set, llama-completion reports no prompt time (0 ms), so llama.cpp's pp512 cost comes
# from bench/llama_lora_pp.py instead and only its tg128 is printed here.
# Usage: bench/lora_cost.sh [MODEL] [ADAPTER] [ROUNDS]   (default: the installed model, a
# rank-16 random adapter on all seven projections of every layer, 3 rounds; 2 threads)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-$(cat "$here/build/model_path.txt")}
adapter=${2:-$here/build/lora_cost_r16.gguf}
rounds=${3:-3}
fg="$here/build/fgemma"
llama="$here/build/llama.cpp/cmake/bin/llama-completion"
[ -x "$llama" ] || "$here/scripts/build_llama_cpp.sh" "$here/build"
[ -f "$adapter" ] || "$fg" mklora -m "$model" -o "$adapter" --rank 16 --alpha 32 --amplitude 0.01
prompt=$(mktemp)
trap 'rm -f "$prompt"' EXIT
# 511 tokens + BOS: the same text for both engines (llama.cpp tokenizes it itself).
python3 - "$prompt" <<'PY'
import sys
words = ("the light house keeper climbed the spiral stairs every evening at dusk counting the "
         "steps out loud as his father had taught him ").split()
open(sys.argv[1], "w").write(" ".join(words[i % len(words)] for i in range(420)))
PY
med() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
declare -A res
for r in $(seq "$rounds"); do
  for lora in "" "--lora $adapter"; do
    key=${lora:+lora}; key=${key:-base}
    out=$("$fg" bench -m "$model" -p 512 -n 128 -t 2 -r 3 --json $lora 2>/dev/null)
    res[fg_pp_$key]+="$(echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print([x["tokens_per_s"] for x in d if x["test"]=="pp512"][0])') "
    res[fg_tg_$key]+="$(echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print([x["tokens_per_s"] for x in d if x["test"]=="tg128"][0])') "
    log=$("$llama" -m "$model" -f "$prompt" -n 128 --temp 0 --ignore-eos -t 2 -no-cnv --no-warmup $lora 2>&1 < /dev/null || true)
    res[ll_pp_$key]+="$(echo "$log" | sed -n 's/.*prompt eval time.*tokens (.*ms per token, *\([0-9.]*\) tokens per second).*/\1/p') "
    res[ll_tg_$key]+="$(echo "$log" | sed -n 's/.* eval time.*runs *(.*ms per token, *\([0-9.]*\) tokens per second).*/\1/p' | tail -1) "
  done
done
printf "| engine | test | base tok/s | with adapter tok/s | cost |\n|---|---|---|---|---|\n"
for e in fg ll; do
  for t in pp tg; do
    [ "$e$t" = llpp ] && continue
    b=$(echo ${res[${e}_${t}_base]} | tr ' ' '\n' | med)
    l=$(echo ${res[${e}_${t}_lora]} | tr ' ' '\n' | med)
    name=$([ $e = fg ] && echo fgemma || echo llama.cpp)
    test=$([ $t = pp ] && echo pp512 || echo tg128)
    printf "| %s | %s | %.1f | %.1f | %+.1f %% |\n" "$name" "$test" "$b" "$l" "$(echo "100*($b/$l-1)" | bc -l)"
  done
done
