"""gpu_check.sh names to CMake the CUDA libraries a minimal toolkit lacks (bench/gpu_cuda_libs.py)."""

from __future__ import annotations

from pathlib import Path

from bench.gpu_cuda_libs import find, versioned


def _files(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")


def test_a_full_toolkit_needs_no_arguments(tmp_path: Path) -> None:
    toolkit = tmp_path / "cuda"
    _files(toolkit, "lib64/libcudart.so", "lib64/libcublas.so", "lib64/libcublasLt.so", "lib64/stubs/libcuda.so")
    _files(tmp_path, "site/nvidia/cu13/lib/libcublas.so.13")

    found = find([toolkit], [tmp_path / "site/nvidia/cu13/lib"], [])

    assert found.cmake_args == ()
    assert found.library_dirs == ()


def test_cublas_from_pytorchs_pip_wheels_is_named_with_its_headers(tmp_path: Path) -> None:
    toolkit = tmp_path / "cuda"
    _files(toolkit, "lib64/libcudart.so", "lib64/stubs/libcuda.so")
    pip = tmp_path / "site/nvidia/cu13"
    _files(pip, "lib/libcublas.so.13", "lib/libcublasLt.so.13", "include/cublas_v2.h")

    found = find([toolkit], [pip / "lib"], [])

    assert found.cmake_args == (
        f"-DCUDA_cublas_LIBRARY={pip}/lib/libcublas.so.13",
        f"-DCUDA_cublasLt_LIBRARY={pip}/lib/libcublasLt.so.13",
        f"-DCMAKE_CUDA_FLAGS=-I{pip}/include",
        f"-DCMAKE_CXX_FLAGS=-I{pip}/include",
    )
    assert found.library_dirs == (pip / "lib",)


def test_the_drivers_versioned_library_stands_in_for_a_missing_stub(tmp_path: Path) -> None:
    toolkit = tmp_path / "cuda"
    _files(toolkit, "lib64/libcudart.so", "lib64/libcublas.so", "lib64/libcublasLt.so")
    driver = tmp_path / "nvidia/lib64"
    _files(driver, "libcuda.so.1", "libcuda.so.580.159.04")

    found = find([toolkit], [], [tmp_path / "missing", driver])

    assert found.cmake_args == (f"-DCUDA_cuda_driver_LIBRARY={driver}/libcuda.so.1",)


def test_a_library_found_nowhere_is_left_for_cmake_to_name(tmp_path: Path) -> None:
    toolkit = tmp_path / "cuda"
    _files(toolkit, "lib64/libcudart.so", "lib64/libcublasLt.so", "lib64/stubs/libcuda.so")

    assert find([toolkit], [tmp_path / "site"], []).cmake_args == ()


def test_the_shortest_versioned_name_wins(tmp_path: Path) -> None:
    _files(tmp_path, "libcublas.so.13.1.0.3", "libcublas.so.13")

    assert versioned("cublas", [tmp_path]) == tmp_path / "libcublas.so.13"
