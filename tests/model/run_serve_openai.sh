#!/usr/bin/env bash
# ctest's model_serve_openai: tests/model/serve_openai.py under the pinned venv's pytest, with
# the real model; exit 77 (ctest: skipped) with the reason when the model or the venv is missing.
set -euo pipefail
if [ -z "${FGEMMA_MODEL:-}" ] || [ ! -f "$FGEMMA_MODEL" ]; then
  echo "SKIPPED: FGEMMA_MODEL is not set to the real model (make test sets it)"; exit 77
fi
py="${FGEMMA_VENV:-}/bin/python"
if [ -n "${FGEMMA_VENV:-}" ] && [ -x "$py" ] && ! "$py" -c "import openai" 2>/dev/null; then
  echo "SKIPPED: no openai in $FGEMMA_VENV (scripts/setup_venv.sh installs the pinned one)"; exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
exec bash "$here/../bindings/run_pytest.sh" "$here/serve_openai.py"
