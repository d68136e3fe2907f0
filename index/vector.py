"""Dense vectors in faiss: exact inner product (vectors are normalised, so cosine) up to
`ANN_THRESHOLD` vectors, HNSW above it. Ids are chunk ids, so a partly embedded index works:
hybrid search uses whatever vectors exist while the rest are still being computed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from index.errors import CorruptIndex

__all__ = ["VectorIndex", "ANN_THRESHOLD"]

ANN_THRESHOLD = 100_000
_HNSW_M = 32


def _faiss() -> Any:
    import faiss

    # One query is a few hundred microseconds of work; faiss's OpenMP threads cost 15-20 ms of
    # start-up per query and fight the server's worker threads (measured in bench/load_bench.py).
    faiss.omp_set_num_threads(1)
    return faiss


class VectorIndex:
    def __init__(self, index: Any, dim: int) -> None:  # a faiss index (faiss ships no type hints)
        self._index = index
        self.dim = dim

    @property
    def count(self) -> int:
        return int(self._index.ntotal)

    @staticmethod
    def build(ids: np.ndarray, vectors: np.ndarray) -> VectorIndex:
        faiss = _faiss()
        dim = int(vectors.shape[1])
        if len(ids) > ANN_THRESHOLD:
            inner = faiss.IndexHNSWFlat(dim, _HNSW_M, faiss.METRIC_INNER_PRODUCT)
        else:
            inner = faiss.IndexFlatIP(dim)
        index = faiss.IndexIDMap2(inner)
        if len(ids):
            index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), ids.astype(np.int64))
        return VectorIndex(index, dim)

    def save(self, path: Path) -> None:
        """Write atomically: readers either see the previous file or the whole new one."""
        tmp = path.with_name(path.name + ".tmp")
        try:
            _faiss().write_index(self._index, str(tmp))
        except RuntimeError as exc:  # faiss reports a failed write (disk full) this way
            tmp.unlink(missing_ok=True)
            raise OSError(f"cannot write {tmp}: {str(exc).rsplit(': ', 1)[-1]}") from exc
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)

    @staticmethod
    def load(path: Path) -> VectorIndex:
        try:
            index = _faiss().read_index(str(path))
        except RuntimeError as exc:
            raise CorruptIndex(f"vector index {path} is unreadable ({exc}): run `bridge index --rebuild`") from exc
        return VectorIndex(index, int(index.d))

    def top(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The k nearest chunk ids with their cosine similarity, best first."""
        if self.count == 0 or k <= 0:
            return []
        faiss = _faiss()
        q = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        params = None
        if allowed is not None:
            allowed_ids = np.flatnonzero(allowed).astype(np.int64)
            if len(allowed_ids) == 0:
                return []
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(allowed_ids))
        scores, ids = self._index.search(q, min(k, self.count), params=params)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]
