"""Bulk MiniLM encoding (indexing) on OpenVINO, without torch once the graph is exported.

Measured on a 2-core Xeon with AMX (bench/embed_bench.py, bench/archive/RESULTS-journal.md), 256-piece chunks:

- The graph is an ONNX export of the bundled weights (index/embed/minilm.py, once, locally) traced
  with transformers' "eager" attention: plain matrix products, mask and softmax, which the CPU
  plugin fuses into one attention kernel. The query graph, traced with PyTorch's fused
  attention, spells the mask out in Select/IsNaN nodes that OpenVINO cannot fuse (a third of
  the time went there). OpenVINO reads the ONNX file itself: its model converter
  (`ov.convert_model`) is not used because it sends usage telemetry unless told not to.
- bfloat16 inference (AMX where the CPU has it) gives the same vectors as float32 torch to a
  cosine of 0.99997, so the embedder id stays the reference one.
- One inference stream per core, each with one thread, fed length-sorted batches of up to 8
  texts: on shared, busy cores independent streams never wait for each other at a barrier as
  the threads of one multi-threaded operation do, and small batches keep the activations in
  the cores' caches.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from index.embed.feed import load_tokenizer, padded_feed
from index.errors import EmbedderError

__all__ = ["OpenVinoBulk", "bulk_onnx_path", "compile_minilm", "openvino_has_bf16", "usable_cores"]

_GRAPH_VERSION = 1  # bump when the exported graph changes
_MAX_BATCH = 8  # texts per inference request; larger batches measured slower here


def bulk_onnx_path(cache_dir: Path, fingerprint: str) -> Path:
    """Where the graph for bulk encoding of the MiniLM with this fingerprint is kept."""
    return cache_dir / "onnx" / f"minilm-{fingerprint}-eager-v{_GRAPH_VERSION}.onnx"


def _openvino() -> Any:
    """OpenVINO without its usage telemetry. `import openvino` also imports its model converter,
    which reports every import to a web analytics service unless the user has opted out; with the
    telemetry package hidden while it loads, the converter binds its own no-op stub instead.
    Nothing here uses the converter, and no request leaves the machine."""
    if "openvino" not in sys.modules and "openvino_telemetry" not in sys.modules:
        sys.modules["openvino_telemetry"] = None  # type: ignore[assignment]  # makes its import fail
        try:
            import openvino
        finally:
            del sys.modules["openvino_telemetry"]
    import openvino

    return openvino


def openvino_has_bf16() -> bool:
    """True when OpenVINO's CPU plugin runs bfloat16 natively here."""
    ov = _openvino()
    return "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one, e.g. in a container)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def compile_minilm(model_file: Path, config: dict[str, Any]) -> Any:
    """The exported MiniLM graph compiled for the CPU with `config` (OpenVINO's property names).

    OpenVINO keeps the compiled model in a cache beside the graph, keyed by the graph, the settings
    that shape it and its own version: a later process loads it in 0.08 s instead of compiling for
    0.53 s. A damaged blob or a cache that cannot be written only costs the compile: OpenVINO
    compiles again (tests/index/test_embed.py)."""
    cached = {**config, "CACHE_DIR": str(model_file.parent / "openvino-cache")}
    try:
        return _openvino().Core().compile_model(str(model_file), "CPU", cached)
    except RuntimeError as exc:  # OpenVINO reports unreadable files as RuntimeError
        raise EmbedderError(f"exported MiniLM {model_file} is unreadable ({exc}): delete it to export again") from exc


class OpenVinoBulk:
    """The exported MiniLM compiled for the CPU, with one inference stream per usable core."""

    def __init__(self, model_file: Path, tokenizer_file: Path, bf16: bool, cores: int | None = None) -> None:
        ov = _openvino()
        cores = cores or usable_cores()
        config: dict[str, Any] = {
            "PERFORMANCE_HINT": "THROUGHPUT",
            "NUM_STREAMS": cores,
            "INFERENCE_NUM_THREADS": cores,
            "INFERENCE_PRECISION_HINT": "bf16" if bf16 else "f32",
        }
        compiled = compile_minilm(model_file, config)
        self.streams = int(compiled.get_property("NUM_STREAMS"))
        self._queue = ov.AsyncInferQueue(compiled, self.streams)
        self._lock = threading.Lock()  # one queue: callers take turns
        self.tokenizer = load_tokenizer(tokenizer_file)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 rows, one per text, in the order given."""
        encodings = self.tokenizer.encode_batch(list(texts))
        # Longest first, so each request pads little; every stream gets work even for few texts.
        order = sorted(range(len(encodings)), key=lambda i: -len(encodings[i].ids))
        size = max(1, min(_MAX_BATCH, math.ceil(len(order) / self.streams)))
        out = np.zeros((len(order), 384), dtype=np.float32)

        def done(request: Any, rows: list[int]) -> None:
            out[rows] = request.get_output_tensor(0).data

        with self._lock:
            self._queue.set_callback(done)
            for start in range(0, len(order), size):
                rows = order[start : start + size]
                self._queue.start_async(padded_feed([encodings[i] for i in rows]), rows)
            self._queue.wait_all()
        return out
