"""Which MiniLM path this machine gets, and how to say so: precision (bf16, float32 or int8) and backends.

`choose_minilm` picks the kind a new index gets from the CPU (AMX: bf16 on OpenVINO; elsewhere int8 on
ONNX Runtime, index/embed/int8.py), `resolve_spec` keeps the kind an index already has, `describe_path`
says which path and why (`bridge index`, `bridge status`). The variables decide instead of the CPU:
BRIDGE_MINILM_PRECISION (auto | bf16 | fp32 | int8), BRIDGE_MINILM_BULK (auto | openvino | torch) and
BRIDGE_MINILM_QUERY (auto | openvino | onnxruntime). The embedder itself is index/embed/minilm.py.
"""

from __future__ import annotations

import os
from pathlib import Path

from index.errors import EmbedderError

__all__ = ["INT8_SPEC", "QUERY_ENV", "bf16_is_fast", "bulk_backend", "choose_minilm", "describe_path", "has_amx",
           "query_backend", "resolve_spec"]

INT8_SPEC = "minilm-int8"
_PRECISION_ENV = "BRIDGE_MINILM_PRECISION"  # auto | bf16 | fp32 | int8
_BULK_ENV = "BRIDGE_MINILM_BULK"  # auto | openvino | torch
QUERY_ENV = "BRIDGE_MINILM_QUERY"  # auto | openvino | onnxruntime


def _precision() -> str:
    choice = os.environ.get(_PRECISION_ENV, "auto")
    if choice not in ("auto", "bf16", "fp32", "int8"):
        raise EmbedderError(f"{_PRECISION_ENV}={choice} is not a precision: use auto, bf16, fp32 or int8")
    return choice


def bf16_is_fast(backend: str = "torch") -> bool:
    """True when `backend` runs bfloat16 matrix products in hardware here (else bf16 is emulated, slower)."""
    choice = _precision()
    if choice != "auto":
        return choice == "bf16"
    return _bf16_in_hardware(backend)


def _bf16_in_hardware(backend: str) -> bool:
    if backend == "openvino":
        from index.embed.bulk import openvino_has_bf16

        return openvino_has_bf16()
    import torch

    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def has_amx() -> bool:
    """True when the CPU has AMX tiles (bf16 matrix products at several times AVX-512's rate).

    Where the kernel lists the CPU's flags (Linux), `amx_tile` there, and bf16 as this process sees
    it: bench/avx2_only hides bf16 and AMX from CPUID, not from the kernel's list. Reading the list
    and asking OpenVINO takes 0.5 s; importing torch for its CPUID probe, 2.8 s of every `bridge
    status`. Elsewhere torch's probe (private API; without it the answer is False, which costs speed
    on AMX, never correctness)."""
    flags = _kernel_cpu_flags()
    if flags is not None:
        return "amx_tile" in flags and _bf16_in_hardware(bulk_backend())
    import torch

    probe = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return bool(probe and probe())


def _kernel_cpu_flags() -> set[str] | None:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    line = next((line for line in text.splitlines() if line.startswith("flags")), None)
    return set(line.split(":", 1)[1].split()) if line is not None else None


def choose_minilm() -> str:
    """The MiniLM a new index should use here: 'minilm' (float32 vectors, bf16 arithmetic) where the
    CPU has AMX, else INT8_SPEC where ONNX Runtime is installed. Measured on 2 cores against plain
    torch in the same run (bench/RESULTS.md): bf16 on AMX 4.5-6x; without AMX int8 2.1-2.3x on AVX2
    alone (float32 1.2-1.4x) and 3.0-3.2x with AVX512-BF16 and VNNI (bf16 2.5-2.8x), with recall held.
    BRIDGE_MINILM_PRECISION=int8 or bf16/fp32 decides instead of the CPU."""
    import importlib.util

    choice = _precision()
    if choice != "auto":
        return INT8_SPEC if choice == "int8" else "minilm"
    if importlib.util.find_spec("onnxruntime") is None:
        return "minilm"
    return "minilm" if has_amx() else INT8_SPEC


def resolve_spec(spec: str | None, previous: str | None = None) -> str | None:
    """The spec an index is built with: "minilm" means the bundled MiniLM on the path `choose_minilm`
    picks, except that an index that has MiniLM vectors keeps the kind it has (a re-index after an
    edit never re-embeds everything because a variable or the machine changed; --rebuild chooses
    afresh). Every other spec is itself."""
    if spec != "minilm":
        return spec
    if previous in ("minilm", INT8_SPEC):
        return previous
    return choose_minilm()


def describe_path(spec: str | None) -> str:
    """How this machine computes the vectors of `spec`, and why, in a few words (for `bridge index`
    and `bridge status`); other specs are described by their name alone."""
    if spec not in ("minilm", INT8_SPEC):
        return spec or "none"
    if _precision() != "auto":
        why = f"set by {_PRECISION_ENV}"
    elif spec == choose_minilm():
        why = "this CPU has AMX" if has_amx() else "this CPU has no AMX"
    else:  # an index keeps its kind (resolve_spec) or was given one: the CPU is not why
        why = "the index's own kind; --rebuild picks this CPU's"
    if spec == INT8_SPEC:
        return f"int8 on ONNX Runtime, a stream per core; {why}"
    backend = bulk_backend()
    precision = "bf16" if bf16_is_fast(backend) else "float32"
    return f"{precision} on {'OpenVINO' if backend == 'openvino' else 'torch'}; {why}"


def bulk_backend() -> str:
    """'openvino' (the fast one) when it is installed, else 'torch'; BRIDGE_MINILM_BULK forces one."""
    return _backend(_BULK_ENV, "torch")


def query_backend() -> str:
    """'openvino' (the fast one) when it is installed, else 'onnxruntime'; BRIDGE_MINILM_QUERY forces one."""
    return _backend(QUERY_ENV, "onnxruntime")


def _backend(env: str, fallback: str) -> str:
    choice = os.environ.get(env, "auto")
    if choice in ("openvino", fallback):
        return choice
    if choice != "auto":
        raise EmbedderError(f"{env}={choice} is not a backend: use auto, openvino or {fallback}")
    import importlib.util

    return "openvino" if importlib.util.find_spec("openvino") else fallback
