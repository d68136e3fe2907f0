#!/usr/bin/env bash
# Set up .venv: a thin wrapper over the package extras (pyproject.toml, docs/install.md), pinned by
# constraints.txt (scripts/lock.sh refreshes it). Idempotent: a second run on an unchanged
# pyproject.toml, constraints.txt and setup.sh returns at once (stamp files in .venv).
#
#   bash scripts/setup.sh            everything: .[all,test] (chat, dense vectors, Milvus, plots, test tools)
#   bash scripts/setup.sh EXTRAS     the core (search and serve) plus these comma-separated extras, e.g.
#                                    `chat` (what scripts/demo.sh answers with first) or `none` (the core alone)
#   bash scripts/setup.sh --print-backend  which llama.cpp build this machine gets (builds nothing)
#   bash scripts/setup.sh --llama-server  build (once) and print llama.cpp's llama-server (docs/clients.md)
#
# Two things pip alone would get wrong here:
#  - torch: an unpinned torch pulls a multi-GB CUDA build; torch==2.13.0 is the CPU build.
#  - llama-cpp-python ships only as an sdist. Its default build is tuned to the build machine's
#    CPU (GGML_NATIVE=ON); on CPUs with AMX that build crashed in ggml's AMX matmul inside VMs,
#    so we build a portable wheel once (GGML_NATIVE=OFF keeps AVX2/FMA/F16C) and cache it.
#
# Which llama.cpp back end is built (one cached wheel per back end and set of CMake arguments):
#  - BRIDGE_LLAMA_CMAKE_ARGS set: exactly those CMake arguments, e.g. "-DGGML_METAL=on" (macOS) or
#    "-DGGML_VULKAN=on" (needs the Vulkan SDK).
#  - otherwise, CUDA when a CUDA toolkit (nvcc on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin)
#    and a GPU (nvidia-smi) are both present, built for that GPU's architecture only. A toolkit
#    without a GPU (a CI image, a build container) keeps the CPU build: a CUDA wheel cannot even be
#    imported without the driver. BRIDGE_LLAMA_CUDA=1 builds CUDA whenever nvcc is found (for all
#    of llama.cpp's default architectures when no GPU is visible); BRIDGE_LLAMA_CUDA=0 never does.
#  - otherwise the portable CPU build.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
llama_version=0.3.36
wheel_root=${BRIDGE_WHEELS:-$HOME/.cache/mcp-retrieval-bridge/wheels}

find_nvcc() {
  local candidate
  for candidate in "$(command -v nvcc 2>/dev/null || true)" "${CUDA_HOME:-}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then echo "$candidate"; return 0; fi
  done
  return 1
}

# The first GPU's compute capability as CMake wants it ("9.0" -> "90"); empty without a visible GPU.
cuda_arch() {
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  local cap
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .\r' || true)
  case $cap in ''|*[!0-9]*) ;; *) echo "$cap" ;; esac
}

cuda=${BRIDGE_LLAMA_CUDA:-auto}
case $cuda in auto|0|1) ;; *) echo "error: BRIDGE_LLAMA_CUDA=$cuda: use auto, 0 or 1" >&2; exit 2 ;; esac
nvcc=$(find_nvcc || true)
arch=$(cuda_arch)
if [ -n "${BRIDGE_LLAMA_CMAKE_ARGS:-}" ]; then
  cmake_args=$BRIDGE_LLAMA_CMAKE_ARGS
  backend=custom-$(printf '%s' "$cmake_args" | cksum | cut -d' ' -f1)
elif [ -n "$nvcc" ] && { [ "$cuda" = 1 ] || { [ "$cuda" = auto ] && [ -n "$arch" ]; }; }; then
  cmake_args="-DGGML_NATIVE=OFF -DGGML_CUDA=on -DCMAKE_CUDA_COMPILER=$nvcc"
  backend=cuda
  if [ -n "$arch" ]; then
    cmake_args="$cmake_args -DCMAKE_CUDA_ARCHITECTURES=$arch"
    backend=cuda-sm$arch
  fi
else
  if [ "$cuda" = 1 ]; then
    echo "error: BRIDGE_LLAMA_CUDA=1 but no nvcc found: install the CUDA toolkit or set CUDA_HOME" >&2
    exit 1
  fi
  if [ -n "$nvcc" ] && [ "$cuda" = auto ]; then
    echo "note: CUDA toolkit at $nvcc but no GPU visible (nvidia-smi): CPU build (BRIDGE_LLAMA_CUDA=1 forces CUDA)" >&2
  fi
  cmake_args="-DGGML_NATIVE=OFF"
  backend=portable
fi
wheels=$wheel_root/llama-$backend
if [ "${1:-}" = "--print-backend" ]; then  # which build this machine gets, without building anything
  echo "$backend $cmake_args"
  exit 0
fi
# llama.cpp's own llama-server (an MCP host: docs/clients.md), from the same llama.cpp and back end,
# cached under ~/.cache/mcp-retrieval-bridge/llama-server; prints its path. scripts/test.sh builds it.
if [ "${1:-}" = "--llama-server" ]; then
  exec bash scripts/llama_server.sh "$llama_version" "$backend" "$cmake_args"
fi

extras=${1:-all,test}
case $extras in
  --*) echo "error: unknown option $extras: use --print-backend or --llama-server, or name extras (e.g. chat, or all,test)" >&2; exit 2 ;;
esac
known=$("$python" -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]))')
wanted=
for extra in ${extras//,/ }; do
  [ "$extra" = none ] && continue
  case " $known " in
    *" $extra "*) wanted=${wanted:+$wanted,}$extra ;;
    *) echo "error: unknown extra $extra: use none or some of: ${known// /, }" >&2; exit 2 ;;
  esac
done
case ",$wanted," in *,chat,*|*,all,*) chat=1 ;; *) chat=0 ;; esac
case ",$wanted," in *,dense,*|*,all,*) dense=1 ;; *) dense=0 ;; esac
spec=.${wanted:+[$wanted]}

[ -x .venv/bin/python ] || "$python" -m venv .venv
# --no-compile: byte-compiling every installed file (torch alone has thousands) took about 40 % of a
# fresh set-up; Python compiles each module on first import instead and keeps the .pyc.
pip() { .venv/bin/python -m pip "$@"; }
install() { pip install -q --disable-pip-version-check --no-compile "$@"; }
# What the installed packages were made from: a changed pyproject.toml, constraints.txt or setup.sh installs again.
inputs=$(cat pyproject.toml constraints.txt scripts/setup.sh | cksum | cut -d' ' -f1)
if [ "$chat" = 1 ]; then
  if ! ls "$wheels"/llama_cpp_python-"$llama_version"-*.whl >/dev/null 2>&1; then
    echo "building llama-cpp-python $llama_version ($backend: $cmake_args; about 10-15 minutes on 2 cores, once)" >&2
    jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
    if ! CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL="$jobs" pip wheel -q --disable-pip-version-check \
      --no-deps --no-cache-dir -w "$wheels" "llama-cpp-python==$llama_version"; then
      echo "error: building llama-cpp-python ($backend) failed; for the CPU build run BRIDGE_LLAMA_CUDA=0 bash scripts/setup.sh, or set BRIDGE_LLAMA_CMAKE_ARGS" >&2
      exit 1
    fi
  fi
  stamp=.venv/.llama-$backend-$llama_version
  if [ ! -f "$stamp" ]; then
    install --force-reinstall --no-deps "$wheels"/llama_cpp_python-"$llama_version"-*.whl
    rm -f .venv/.llama-*-"$llama_version"
    touch "$stamp"
  fi
  echo "llama.cpp back end: $backend" >&2
fi

if [ -f ".venv/.setup-all,test-$inputs" ] || [ -f ".venv/.setup-${wanted:-none}-$inputs" ]; then
  echo ".venv already set up (${wanted:-none})" >&2
  exit 0
fi

# One pip call, pinned by constraints.txt; torch named beside the extras so that pip takes its CPU build.
torch=()
[ "$dense" = 1 ] && torch=(torch==2.13.0)
install -c constraints.txt "${torch[@]}" -e "$spec"
touch ".venv/.setup-${wanted:-none}-$inputs"
echo "ready: .venv/bin/bridge (${wanted:-core only})" >&2
