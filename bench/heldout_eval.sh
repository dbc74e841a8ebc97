#!/usr/bin/env bash
# Call accuracy on the 8 held-out catalogs of data/calls/ (never trained on, not even as
# distractors), through `fgemma eval`: valid calls, right function, right function and
# arguments, per catalog and overall. Extra arguments go to fgemma eval (--lora A, --no-lora,
# --limit N, --json, -m MODEL, -t N).
#   bench/heldout_eval.sh --limit 20                 # the shipped adapter (default model)
#   bench/heldout_eval.sh --no-lora --limit 20       # the base model alone
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
fgemma=${FGEMMA:-$here/build/fgemma}
catalogs=$(python3 -c "import json; print(' '.join(json.load(open('$here/data/calls/stats.json'))['eval_catalogs']))")
args=()
for c in $catalogs; do
  args+=(--tools "$here/data/calls/catalogs/$c.json" --data "$here/data/calls/eval_requests/$c.jsonl")
done
exec "$fgemma" eval "${args[@]}" "$@"
