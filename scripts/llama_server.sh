#!/usr/bin/env bash
# Build llama.cpp's own `llama-server` (an MCP host: docs/clients.md) from the llama.cpp vendored in the
# llama-cpp-python sdist that scripts/setup.sh builds, and cache it; prints the executable's path.
#
#   bash scripts/setup.sh --llama-server     the usual way: same back end (CPU, CUDA) as the wheel
#   bash scripts/llama_server.sh VERSION BACKEND "CMAKE ARGS"   what setup.sh runs
#
# Cached at $BRIDGE_LLAMA_SERVER_DIR (default ~/.cache/mcp-retrieval-bridge/llama-server)/BACKEND-VERSION/,
# so a second run returns at once. Built without the Web UI: the sdist has no prebuilt UI, and the UI
# options would download one (or run npm) at build time. Static libraries: one self-contained file.
# About 10-20 minutes on 2 cores, niced so the machine stays usable.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:?usage: llama_server.sh VERSION BACKEND "CMAKE ARGS"}
backend=${2:?usage: llama_server.sh VERSION BACKEND "CMAKE ARGS"}
cmake_args=${3:-}
root=${BRIDGE_LLAMA_SERVER_DIR:-$HOME/.cache/mcp-retrieval-bridge/llama-server}
dest=$root/$backend-$version
exe=$dest/bin/llama-server
if [ -x "$exe" ]; then
  echo "$exe"
  exit 0
fi
python=.venv/bin/python
[ -x "$python" ] || python=${PYTHON:-python3}
for tool in cmake c++; do
  command -v "$tool" >/dev/null || { echo "error: llama-server needs $tool: install it (Debian: apt-get install cmake g++)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/llama-server.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "building llama-server from llama-cpp-python $version's llama.cpp ($backend; about 10-20 minutes on 2 cores, once)" >&2
# pip's own cache keeps the sdist, so this downloads it once per machine.
"$python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
  -d "$work" "llama-cpp-python==$version"
tar -xzf "$work"/llama_cpp_python-"$version".tar.gz -C "$work"
src=$work/llama_cpp_python-$version/vendor/llama.cpp
# shellcheck disable=SC2086 # the CMake arguments are words on purpose
nice -n 10 cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF $cmake_args >"$work/configure.log" 2>&1 \
  || { tail -20 "$work/configure.log" >&2; echo "error: configuring llama-server ($backend) failed (log above)" >&2; exit 1; }
jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
nice -n 10 cmake --build "$work/build" --config Release --target llama-server -j "$jobs" >"$work/build.log" 2>&1 \
  || { tail -30 "$work/build.log" >&2; echo "error: building llama-server ($backend) failed (log above)" >&2; exit 1; }
mkdir -p "$dest.tmp/bin"
cp "$work/build/bin/llama-server" "$dest.tmp/bin/"
cp "$src/LICENSE" "$dest.tmp/LICENSE"
rm -rf "$dest" && mv "$dest.tmp" "$dest"
echo "$exe"
