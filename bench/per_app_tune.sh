#!/usr/bin/env bash
# Per-app tuning, as an app developer would: one catalog of data/calls/ (a held-out one: never in
# train.jsonl), 30 of its labelled requests to train on, 50 others to score, `fgemma tune` from
# the shipped tune adapter (models/fgemma-tune-lora.gguf; --fresh: --init-lora none; with 30
# requests, the average of 3 runs by default: --average 1 for one run), then
# `fgemma eval` on the 50 (every default: the app's adapter is not marked for the tool prior,
# so its prior is the shipped call adapter's, --prior-lora).
# The split: bench/per_app_split.py (SPLIT=tools, the default: stratified by tool, seed
# SPLIT_SEED, default 1; SPLIT=lines: every 3rd line, the split used until 2026-12-05).
# --prior: also tune the app's own tool prior (`fgemma tune --objective channel` on the 30, from
# the shipped call adapter; about as long again) and score with it (--prior-lora). Extra tune
# flags go to both tunes.
# --examples: also list the 30 as examples of their tools in the tool prior's texts when scoring
# (`fgemma eval --examples`).
#   bench/per_app_tune.sh banking [--fresh] [--prior] [--examples] [extra fgemma tune flags...]
set -euo pipefail
work=${WORK:-$(mktemp -d)}
work_prior=$work/app_prior.gguf
here=$(cd "$(dirname "$0")/.." && pwd)
fgemma=${FGEMMA:-$here/build/fgemma}
app=${1:?usage: per_app_tune.sh CATALOG [--fresh] [--prior] [--examples] [tune flags]}; shift
init=(--init-lora "${FGEMMA_TUNE_LORA:-$here/models/fgemma-tune-lora.gguf}")
prior=()
examples=()
while [[ ${1:-} == --fresh || ${1:-} == --prior || ${1:-} == --examples ]]; do
  case $1 in
    --fresh) init=(--init-lora none) ;;
    --prior) prior=(--prior-lora "$work_prior") ;;
    --examples) examples=(--examples "$work/train.jsonl") ;;
  esac
  shift
done
python3 "$here/bench/per_app_split.py" "$app" "$work" --split "${SPLIT:-tools}" --seed "${SPLIT_SEED:-1}"
echo "per-app $app: in $work" >&2
start=$(date +%s)
"$fgemma" tune --tools "$here/data/calls/catalogs/$app.json" --data "$work/train.jsonl" \
  -o "$work/app.gguf" --checkpoint "$work/app.ckpt" "${init[@]}" "$@"
echo "tune took $(( $(date +%s) - start )) s" >&2
if (( ${#prior[@]} )); then
  start=$(date +%s)
  "$fgemma" tune --tools "$here/data/calls/catalogs/$app.json" --data "$work/train.jsonl" \
    -o "$work_prior" --objective channel "$@"
  echo "prior tune took $(( $(date +%s) - start )) s" >&2
fi
"$fgemma" eval --tools "$here/data/calls/catalogs/$app.json" --data "$work/test.jsonl" \
  --lora "$work/app.gguf" --misses -1 "${prior[@]}" "${examples[@]}"
