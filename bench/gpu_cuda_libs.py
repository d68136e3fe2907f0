"""CMake arguments for the CUDA libraries a toolkit lacks (the library-finding part of gpu_check.sh).

    python bench/gpu_cuda_libs.py NVCC    # line 1: CMake arguments; line 2: folders for LD_LIBRARY_PATH

llama.cpp's CUDA back end links cudart, cuBLAS, cuBLASLt and the driver (libcuda), which CMake's
FindCUDAToolkit looks for as lib<name>.so in the toolkit. Some GPU images carry nvcc with a minimal
toolkit and take cuBLAS from PyTorch's pip wheels (site-packages/nvidia/cu13/{include,lib}, versioned
.so files only), and the driver's libcuda.so.1 without the unversioned link or its stub: there the
configure step fails on a missing `CUDA::cublas` target. For each library the toolkit lacks, this
names the file found elsewhere (CMake then takes it as found) and the header folder beside it; both
lines are empty when the toolkit has everything.
"""

from __future__ import annotations

import os
import shlex
import site
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

# CMake's cache variable suffix -> the library's file name stem.
LIBRARIES = {"cudart": "cudart", "cublas": "cublas", "cublasLt": "cublasLt", "cuda_driver": "cuda"}
TOOLKIT_LIB_DIRS = ("lib64", "lib", "lib64/stubs", "lib/stubs", "targets/x86_64-linux/lib", "targets/x86_64-linux/lib/stubs")
DRIVER_DIRS = ("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib")


@dataclass(frozen=True, slots=True)
class Found:
    cmake_args: tuple[str, ...]
    library_dirs: tuple[Path, ...]


def toolkit_roots(nvcc: Path, env: dict[str, str]) -> list[Path]:
    """Where the toolkit may live: beside nvcc (through links), $CUDA_HOME, $CUDA_PATH, /usr/local/cuda*."""
    roots = [nvcc.resolve().parent.parent]
    roots += [Path(env[name]) for name in ("CUDA_HOME", "CUDA_PATH") if env.get(name)]
    roots += [Path("/usr/local/cuda"), *sorted(Path("/usr/local").glob("cuda-*"))]
    return [root for root in dict.fromkeys(roots) if root.is_dir()]


def in_toolkit(stem: str, roots: Iterable[Path]) -> bool:
    return any((root / sub / f"lib{stem}.so").exists() for root in roots for sub in TOOLKIT_LIB_DIRS)


def versioned(stem: str, folders: Iterable[Path]) -> Path | None:
    """The shortest lib<stem>.so.N in the first folder that has one (libcublas.so.13 over .so.13.1.0)."""
    for folder in folders:
        hits = sorted(folder.glob(f"lib{stem}.so.*"), key=lambda p: (len(p.name), p.name))
        if hits:
            return hits[0]
    return None


def pip_lib_dirs(site_dirs: Iterable[Path]) -> list[Path]:
    """The lib folders of NVIDIA's pip wheels (nvidia/cu13/lib, nvidia/cublas/lib, ...)."""
    return [folder for base in site_dirs for folder in sorted((base / "nvidia").glob("**/lib")) if folder.is_dir()]


def driver_dirs(env: dict[str, str]) -> list[Path]:
    listed = [Path(p) for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
    try:
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        cache = ""
    cached = [Path(line.rsplit("=>", 1)[1].strip()).parent for line in cache.splitlines() if "libcuda.so.1" in line]
    return [*listed, *cached, *(Path(d) for d in DRIVER_DIRS)]


def find(roots: Sequence[Path], pip_dirs: Sequence[Path], driver_folders: Sequence[Path]) -> Found:
    """For each library no toolkit root has: its versioned file from the pip wheels (the driver: from the loader's folders)."""
    args: list[str] = []
    lib_dirs: list[Path] = []
    include_dirs: list[Path] = []
    for variable, stem in LIBRARIES.items():
        if in_toolkit(stem, roots):
            continue
        path = versioned(stem, driver_folders if stem == "cuda" else pip_dirs)
        if path is None:
            continue  # CMake then names what is missing
        args.append(f"-DCUDA_{variable}_LIBRARY={path}")
        lib_dirs.append(path.parent)
        if stem != "cuda" and (path.parent.parent / "include").is_dir():
            include_dirs.append(path.parent.parent / "include")
    if include_dirs:
        flags = " ".join(f"-I{d}" for d in dict.fromkeys(include_dirs))
        args += [f"-DCMAKE_CUDA_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}"]
    return Found(tuple(args), tuple(dict.fromkeys(lib_dirs)))


def main(argv: Sequence[str]) -> int:
    if len(argv) != 1:
        print("usage: python bench/gpu_cuda_libs.py NVCC", file=sys.stderr)
        return 2
    env = dict(os.environ)
    sites = [Path(p) for p in site.getsitepackages()]
    found = find(toolkit_roots(Path(argv[0]), env), pip_lib_dirs(sites), driver_dirs(env))
    print(" ".join(shlex.quote(a) for a in found.cmake_args))
    print(":".join(str(d) for d in found.library_dirs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
