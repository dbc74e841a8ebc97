#!/usr/bin/env bash
# Runs pytest from $FGEMMA_VENV (the pinned test venv); exit 77 (ctest: skipped) with the reason
# when there is none.
set -euo pipefail
py="${FGEMMA_VENV:-}/bin/python"
if [ -z "${FGEMMA_VENV:-}" ] || [ ! -x "$py" ]; then
  echo "SKIPPED: FGEMMA_VENV is not set (make test sets it to build/venv)"; exit 77
fi
if ! "$py" -c "import pytest" 2>/dev/null; then
  echo "SKIPPED: no pytest in $FGEMMA_VENV (scripts/setup_venv.sh installs the pinned one)"; exit 77
fi
exec "$py" -m pytest -q -p no:cacheprovider "$@"
