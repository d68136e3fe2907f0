#!/usr/bin/env bash
# Set up .venv with everything bridge needs. Idempotent: a second run takes seconds.
#
# Two things pip alone would get wrong here:
#  - torch: an unpinned torch pulls a multi-GB CUDA build; torch==2.13.0 is the CPU build.
#  - llama-cpp-python ships only as an sdist. Its default build is tuned to the build machine's
#    CPU (GGML_NATIVE=ON); on CPUs with AMX that build crashed in ggml's AMX matmul inside VMs,
#    so we build a portable wheel once (GGML_NATIVE=OFF keeps AVX2/FMA/F16C) and cache it.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
llama_version=0.3.36
wheels=${BRIDGE_WHEELS:-$HOME/.cache/mcp-retrieval-bridge/wheels/llama-portable}

[ -x .venv/bin/python ] || "$python" -m venv .venv
pip() { .venv/bin/python -m pip "$@"; }

pip install -q --disable-pip-version-check torch==2.13.0

if ! ls "$wheels"/llama_cpp_python-"$llama_version"-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $llama_version (portable; about 10-15 minutes, once)" >&2
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" pip wheel -q --disable-pip-version-check \
    --no-deps --no-cache-dir -w "$wheels" "llama-cpp-python==$llama_version"
fi
stamp=.venv/.llama-portable-$llama_version
if [ ! -f "$stamp" ]; then
  pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheels"/llama_cpp_python-"$llama_version"-*.whl
  touch "$stamp"
fi

pip install -q --disable-pip-version-check -e ".[test]"
echo "ready: .venv/bin/bridge" >&2
