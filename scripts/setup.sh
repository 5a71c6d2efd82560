#!/usr/bin/env bash
# Install regressbisect and its test dependencies into the current Python.
# torch is pinned to the CPU build first when no torch is present: an unpinned `torch` would pull a
# multi-GB CUDA build; pyproject accepts a range, so an existing torch (e.g. 2.11 on a GPU box) stays.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install -q "torch==2.13.0"
fi
"$PY" -m pip install -q -e ".[test]"
