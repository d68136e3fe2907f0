"""MiniLM in int8 on ONNX Runtime: the path for CPUs without AMX (laptops, AMD EPYC, older Xeons),
where float32 runs at about plain torch's speed and bf16, if there at all, gains less than int8.

Measured with bench/embed_bench.py on an AVX2-only CPU (an AMD EPYC with its AVX-512, VNNI and
bf16 hidden by bench/avx2_only/run.sh), 40-line stdlib pieces, against plain float32 torch in the
same run (bench/RESULTS.md has the current figures, bench/DECISIONS.md what was tried):

- The graph is the exported float32 MiniLM (index/embed/minilm.py) with ONNX Runtime's dynamic
  quantization: weights int8 per output channel in 7 bits (`reduce_range`), activations quantized
  per run. No calibration set, so the vectors depend on the weights alone. With 8-bit weights the
  AVX2 kernels (no VNNI) saturate their 16-bit sums, so the same graph gave other vectors there than
  on a CPU with VNNI (cosine 0.974 between the two at worst); with 7 bits no sum saturates and the
  two agree to 0.997, at the same speed on both.
- Vectors stay close to torch's (cosine 0.99 on average) but are not the same function, so they
  carry their own embedder id (`minilm-int8:…`, with the quantization's version) and never mix with
  float32 vectors in the cache.
- One ONNX Runtime session per usable core, one thread each, each taking the next text as soon as
  it is free: the layout of the OpenVINO bulk path (index/embed/bulk.py), for the same reason.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from index.embed.feed import load_tokenizer, padded_feed
from index.embed.quiet import quiet
from index.errors import EmbedderError

__all__ = ["INT8_VERSION", "OnnxStreams", "int8_onnx_path", "quantize_int8"]

INT8_VERSION = 2  # bump when the quantization changes: the vectors change, and so do the file and the embedder id


def int8_onnx_path(cache_dir: Path, fingerprint: str) -> Path:
    """Where the int8 graph of the MiniLM with this fingerprint is kept."""
    return cache_dir / "onnx" / f"minilm-{fingerprint}-int8-v{INT8_VERSION}.onnx"


def quantize_int8(source: Path, target: Path) -> Path:
    """Write the dynamically quantized int8 version of the float32 graph `source` to `target`,
    atomically (a process killed midway leaves no half-written graph for the next one to load)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, scratch = tempfile.mkstemp(prefix=".int8-", suffix=".onnx", dir=target.parent)
    os.close(fd)
    # The quantizer logs a suggestion to pre-process on the root logger (printed to stderr when the
    # application has no handler); a library must not print.
    advice = _DropAdvice()
    logging.getLogger().addFilter(advice)
    try:
        with quiet():
            quantize_dynamic(str(source), scratch, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
        os.replace(scratch, target)
    except Exception as exc:  # onnx and onnxruntime raise their own types for unreadable graphs
        raise EmbedderError(f"cannot quantize {source} ({exc}): delete it to export it again") from exc
    finally:
        logging.getLogger().removeFilter(advice)
        Path(scratch).unlink(missing_ok=True)
    return target


class _DropAdvice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def _session(model_file: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types for unreadable graphs
        raise EmbedderError(f"int8 MiniLM {model_file} is unreadable ({exc}): delete it to make it again") from exc


class OnnxStreams:
    """The int8 graph in `streams` single-thread ONNX Runtime sessions that run side by side."""

    def __init__(self, model_file: Path, tokenizer_file: Path, streams: int) -> None:
        self.streams = max(1, streams)
        self._sessions = [_session(model_file) for _ in range(self.streams)]
        self._pool = ThreadPoolExecutor(self.streams, thread_name_prefix="bridge-int8") if self.streams > 1 else None
        self.tokenizer = load_tokenizer(tokenizer_file)
        self.encode(["warm up"])  # a session's first run sets up its kernels: part of loading, not of the first search

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 rows, one per text, in the order given. One text per run: dynamic
        quantization scales each run's activations together, so a text run beside others would get a
        vector that depends on them (and on their padding); alone, its vector is its own, the same in
        a batch of indexing as in a query, and no time goes to padding (measured as fast as 8 a run)."""
        encodings = self.tokenizer.encode_batch(list(texts))
        pending = iter(sorted(range(len(encodings)), key=lambda i: -len(encodings[i].ids)))  # longest first
        lock = threading.Lock()
        out = np.zeros((len(encodings), 384), dtype=np.float32)

        def run(stream: int) -> None:  # each stream takes the next text as soon as it is free
            session = self._sessions[stream]
            while True:
                with lock:
                    i = next(pending, None)
                if i is None:
                    return
                out[i] = session.run(None, padded_feed([encodings[i]]))[0][0]

        if self._pool is None:
            run(0)
        else:
            list(self._pool.map(run, range(self.streams)))
        return out
