"""The storage seam: where a searcher reads the live generation of an index from.

A `Store` names its live generation (`live`, cheap, asked before every search) and opens it
(`open`); a `Generation` answers what search and rank need: BM25 scores for some terms, chunk
rows by id, the nearest vectors, the manifest and the file tables. Two stores exist:
`LocalStore` (this module: the generations of one index folder, the default) and
`index.milvus.MilvusStore` (a collection per build on Milvus, an alias as the live pointer).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from index.errors import CorruptIndex
from index.rank import FileEvidence
from index.store import IndexDir, Manifest, VectorIndex, open_lexical, open_table
from index.types import Chunk

__all__ = ["Vectors", "Generation", "Store", "LocalStore", "LocalGeneration", "file_evidence"]


class Vectors(Protocol):
    @property
    def count(self) -> int: ...

    def top(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]: ...


class Generation(Protocol):
    """One immutable build of an index, as search reads it."""

    name: str
    manifest: Manifest
    files: FileEvidence
    paths: np.ndarray  # path of every chunk id (object array), for glob filters

    def bm25(self, terms: Sequence[str], allowed: np.ndarray | None) -> np.ndarray:
        """Score of every chunk id (0 where unknown); `allowed` may restrict the candidates."""
        ...

    def chunks(self, ids: list[int]) -> dict[int, Chunk]: ...

    def vectors(self) -> Vectors | None: ...

    def vector_meta(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class Store(Protocol):
    @property
    def location(self) -> str:
        """What error messages name: a folder or a Milvus URI and alias."""
        ...

    def live(self) -> str:
        """Name of the live generation; raises NoIndex, CorruptIndex or StoreUnavailable."""
        ...

    def open(self, name: str) -> Generation: ...


def file_evidence(manifest: Manifest, symbols: Any, n_ids: int | None = None) -> tuple[FileEvidence, np.ndarray]:
    """The file tables of a manifest and the path of every chunk id (`n_ids`: the length of the
    id space when it has holes, as a delta generation's does)."""
    entries = manifest.files.values()
    files = FileEvidence(
        list(manifest.files),
        np.fromiter((e.first_chunk for e in entries), dtype=np.int64, count=len(entries)),
        np.fromiter((e.n_chunks for e in entries), dtype=np.int64, count=len(entries)),
        symbols,
        n_ids,
    )
    paths = np.asarray(files.paths, dtype=object)[files.chunk_file] if files.paths else np.empty(0, dtype=object)
    return files, paths


class LocalStore(IndexDir):
    """The generations of one index folder (index/store/layout.py)."""

    @property
    def location(self) -> str:
        return str(self.path)

    def live(self) -> str:
        return self.current().name

    def open(self, name: str) -> LocalGeneration:
        return LocalGeneration(self.path / name, self.manifest(self.path / name))


class LocalGeneration:
    def __init__(self, path: Path, manifest: Manifest) -> None:
        self.path = path
        self.name = path.name
        self.manifest = manifest
        self.table = open_table(path)  # a delta generation's two segments read as one (index/store/segments.py)
        self.lexical = open_lexical(path)
        self.files, self.paths = file_evidence(manifest, self.table.symbols, self.lexical.n_docs)
        self._lock = threading.Lock()
        self._vectors: tuple[int, VectorIndex] | None = None

    def bm25(self, terms: Sequence[str], allowed: np.ndarray | None) -> np.ndarray:
        return self.lexical.scores(terms)

    def chunks(self, ids: list[int]) -> dict[int, Chunk]:
        return self.table.get(ids)

    def vectors(self) -> VectorIndex | None:
        """The vector file, reloaded when the background fill has rewritten it."""
        path = self.path / "vectors.faiss"
        try:
            mtime = path.stat().st_mtime_ns
        except FileNotFoundError:
            return None
        with self._lock:
            if self._vectors is None or self._vectors[0] != mtime:
                self._vectors = (mtime, VectorIndex.load(path))
            return self._vectors[1]

    def vector_meta(self) -> dict[str, Any]:
        path = self.path / "vectors.json"
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CorruptIndex(f"vector metadata {path} is unreadable ({exc}): run `bridge index --rebuild`") from exc
        if not isinstance(meta, dict):
            raise CorruptIndex(f"vector metadata {path} is damaged: run `bridge index --rebuild`")
        return meta

    def close(self) -> None:
        self.table.close()
