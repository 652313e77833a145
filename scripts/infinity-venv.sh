#!/usr/bin/env bash
# Create .venv-infinity: the Infinity embedding server (infinity-emb 0.0.78) in a venv of its own.
#
# Infinity caps numpy<2 and sentence-transformers<4, which the runtime venv (.venv) does not, so it
# lives apart. tests/contract/test_infinity.py serves the packaged MiniLM with it offline
# (HF_HUB_OFFLINE=1) and skips when this venv is absent. Idempotent: a stamp file records the pins,
# and a venv whose stamp matches is left alone. Usage: scripts/infinity-venv.sh [VENV_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${1:-${INFINITY_VENV:-.venv-infinity}}"
STAMP="$VENV/.installed"
# torch first, pinned to the CPU wheel these machines carry, so nothing pulls a CUDA build.
TORCH="torch==2.13.0"
INFINITY="infinity-emb[server,torch]==0.0.78"
# infinity-emb 0.0.78 caps numpy<2 and sentence-transformers<4 itself; the rest of its tree is open.
# These are the versions this script was tested with (serving the packaged MiniLM offline), pinned so
# that a new release of a dependency cannot break the contract test between two CI runs.
PINS=(
  "numpy==1.26.4" "sentence-transformers==3.4.1" "transformers==4.57.6" "huggingface-hub==0.36.2"
  "click==8.1.8" "typer==0.12.5" "fastapi==0.165.0" "uvicorn==0.32.1"
)
WANT="$TORCH $INFINITY ${PINS[*]}"

if [[ -x "$VENV/bin/infinity_emb" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
  echo "$VENV is up to date"
  exit 0
fi

start=$(date +%s)
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "$TORCH"
"$VENV/bin/python" -m pip install --quiet "$TORCH" "$INFINITY" "${PINS[@]}"
# A smoke check that the CLI imports (catches a broken resolution before any test runs).
"$VENV/bin/infinity_emb" v2 --help >/dev/null
echo "$WANT" >"$STAMP"
echo "$VENV ready in $(( $(date +%s) - start )) s ($(du -sh "$VENV" | cut -f1))"
