"""scripts/setup.sh picks the llama.cpp back end from the machine (checked with --print-backend, which builds nothing)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "setup.sh"


def _tool(folder: Path, name: str, output: str = "", code: int = 0) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\nprintf '{output}'\nexit {code}\n")
    path.chmod(0o755)


def _backend(bin_dir: Path, **env: str) -> tuple[str, str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_LLAMA")}
    full.update(PATH=f"{bin_dir}:/usr/bin:/bin", CUDA_HOME=str(bin_dir.parent), **env)
    done = subprocess.run(
        ["bash", str(SETUP), "--print-backend"], env=full, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    name, _, args = done.stdout.strip().partition(" ")
    return name, args


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    return folder


def test_a_cuda_toolkit_with_a_gpu_builds_cuda_for_that_gpu_only(bin_dir: Path) -> None:
    _tool(bin_dir, "nvcc")
    _tool(bin_dir, "nvidia-smi", "9.0\\n")
    name, args = _backend(bin_dir)
    assert name == "cuda-sm90"
    assert "-DGGML_CUDA=on" in args and "-DCMAKE_CUDA_ARCHITECTURES=90" in args
    assert f"-DCMAKE_CUDA_COMPILER={bin_dir}/nvcc" in args


def test_a_cuda_toolkit_without_a_gpu_keeps_the_portable_cpu_build(bin_dir: Path) -> None:
    _tool(bin_dir, "nvcc")
    _tool(bin_dir, "nvidia-smi", code=9)
    assert _backend(bin_dir) == ("portable", "-DGGML_NATIVE=OFF")


def test_cuda_can_be_forced_without_a_gpu_and_turned_off_with_one(bin_dir: Path) -> None:
    _tool(bin_dir, "nvcc")
    _tool(bin_dir, "nvidia-smi", code=9)
    assert _backend(bin_dir, BRIDGE_LLAMA_CUDA="1")[0] == "cuda"
    _tool(bin_dir, "nvidia-smi", "8.6\\n")
    assert _backend(bin_dir, BRIDGE_LLAMA_CUDA="0")[0] == "portable"


def test_cmake_arguments_from_the_environment_get_their_own_wheel_cache(bin_dir: Path) -> None:
    metal = _backend(bin_dir, BRIDGE_LLAMA_CMAKE_ARGS="-DGGML_METAL=on")
    vulkan = _backend(bin_dir, BRIDGE_LLAMA_CMAKE_ARGS="-DGGML_VULKAN=on")
    assert metal[1] == "-DGGML_METAL=on" and vulkan[1] == "-DGGML_VULKAN=on"
    assert metal[0].startswith("custom-") and vulkan[0].startswith("custom-") and metal[0] != vulkan[0]


def _setup(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SETUP), *args], capture_output=True, text=True, timeout=30, check=False)


def test_an_unknown_option_is_a_usage_error_that_says_what_to_pass() -> None:
    done = _setup("--core")
    assert done.returncode == 2
    assert "unknown option --core: use --print-backend or --llama-server, or name extras (e.g. chat, or all,test)" in done.stderr


def test_an_unknown_extra_is_a_usage_error_that_lists_the_extras_of_pyproject() -> None:
    done = _setup("chat,gpu")
    assert done.returncode == 2
    assert "unknown extra gpu: use none or some of: chat, dense, milvus, plots, all, test" in done.stderr


def test_the_constraints_file_pins_every_package_exactly_but_not_the_project_itself() -> None:
    pins = [line for line in (ROOT / "constraints.txt").read_text().splitlines() if line and not line.startswith("#")]
    names = {line.split("==")[0].lower().replace("_", "-") for line in pins}
    assert all(line.count("==") == 1 and " @ " not in line for line in pins)
    assert {"mcp", "torch", "llama-cpp-python", "pytest"} <= names
    assert "mcp-retrieval-bridge" not in names and "mcp_retrieval_bridge" not in names


def test_a_built_llama_server_is_found_in_the_cache_of_its_back_end_without_building(bin_dir: Path, tmp_path: Path) -> None:
    backend, _ = _backend(bin_dir)
    cached = tmp_path / "servers" / f"{backend}-0.3.36" / "bin" / "llama-server"
    cached.parent.mkdir(parents=True)
    _tool(cached.parent, "llama-server")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_LLAMA")}
    env.update(PATH=f"{bin_dir}:/usr/bin:/bin", CUDA_HOME=str(bin_dir.parent), BRIDGE_LLAMA_SERVER_DIR=str(tmp_path / "servers"))
    done = subprocess.run(["bash", str(SETUP), "--llama-server"], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(cached)
