"""Dense vectors in faiss: every vector scanned (inner product; vectors are normalised, so cosine)
up to `ANN_THRESHOLD` vectors, an inverted-file index (IVF) above it. Ids are chunk ids, so a partly
embedded index works: hybrid search uses whatever vectors exist while the rest are still being
computed.

Why IVF and not HNSW above the threshold (the ANN benchmark, since retired, on the static vectors of 1.15M
chunks, bench/archive/RESULTS-journal.md): hybrid search asks for the DENSE_CHUNKS (1,000) nearest chunks. IVF
with 2,048 lists and nprobe 64 finds 99.3 % / 98.1 % / 95.1 % of the exact 10 / 100 / 1,000 nearest
in 6.5 ms of CPU (exact search: 109 ms) and builds in 28 s of CPU; HNSW (M 16, efSearch 1,000)
answers in 2 ms but finds fewer (97.8 / 98.4 / 92.3 %) and takes 157 s of CPU to build, paid again
at every progress checkpoint of `fill_vectors`. (faiss's HNSW keeps its default efSearch of 16
when asked for 1,000 neighbours: it then found 13 % of them.) A narrow path glob leaves few
allowed vectors in the probed lists, so `top` probes more lists the fewer are allowed.

The vectors are stored in float16, in the exact scan as in the IVF's lists. An exact query reads
every vector, so it is bound by memory: 59,390 MiniLM vectors (384 dims) took 8.0 ms in float32
and 3.4 ms in float16 (one thread), and a whole-report hybrid search on that index 49 ms instead
of 54 (bench/archive/RESULTS-journal.md).
A float16 vector differs from its float32 self by under 1e-3 of its length, so only near-exact
ties can swap; indexes written in float32 by earlier versions are read and searched as before.
In the IVF (463k static vectors of shared/bench, the same benchmark) float16 halves the index,
460 -> 234 MiB, and a query's scan, 3.2 -> 2.4 ms, with the same recall of the exact 10/100/1,000
nearest to three decimals: 1.15M chunks hold 0.6 GB of vectors instead of 1.2 GB.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from index.errors import CorruptIndex

__all__ = ["ANN_THRESHOLD", "VectorIndex", "ivf_lists"]

ANN_THRESHOLD = 100_000
NPROBE = 64  # lists scanned per query: recall@1000 0.95 of exact at 5 ms per query (bench/archive/RESULTS-journal.md)
_TRAIN_PER_LIST = 40  # faiss asks for at least 39 training vectors per centroid


def _faiss() -> Any:
    import faiss

    # One query is a few hundred microseconds of work; faiss's OpenMP threads cost 15-20 ms of
    # start-up per query and fight the server's worker threads (measured in bench/load_bench.py).
    faiss.omp_set_num_threads(1)
    return faiss


def ivf_lists(n: int) -> int:
    """Lists for n vectors: about 2·√n (1M vectors: 2,048), a power of two for round numbers."""
    return 1 << max(6, round(math.log2(2 * math.sqrt(max(n, 1)))))


class VectorIndex:
    def __init__(self, index: Any, dim: int) -> None:  # a faiss index (faiss ships no type hints)
        self._index = index
        self.dim = dim
        inner = _faiss().downcast_index(index.index) if hasattr(index, "index") else index
        self._ivf = inner if isinstance(inner, _faiss().IndexIVF) else None
        # An HNSW file written by earlier versions: searched with ef >= k, not faiss's default of 16.
        self._hnsw = inner if isinstance(inner, _faiss().IndexHNSW) else None
        self._exact = isinstance(inner, (_faiss().IndexFlat, _faiss().IndexScalarQuantizer))

    @property
    def count(self) -> int:
        return int(self._index.ntotal)

    @property
    def exact(self) -> bool:
        """True when every vector is scanned (no approximate neighbour search)."""
        return self._exact

    @staticmethod
    def build(ids: np.ndarray, vectors: np.ndarray, nprobe: int = NPROBE) -> VectorIndex:
        """Every vector scanned, in float16, up to ANN_THRESHOLD vectors; IVF above. The IVF centroids
        are trained on an evenly spaced sample of the vectors, so the same vectors give the same index."""
        faiss = _faiss()
        dim = int(vectors.shape[1])
        data = np.ascontiguousarray(vectors, dtype=np.float32)
        if len(ids) > ANN_THRESHOLD:
            lists = ivf_lists(len(ids))
            quantizer = faiss.IndexFlatIP(dim)
            inner = faiss.IndexIVFScalarQuantizer(quantizer, dim, lists, faiss.ScalarQuantizer.QT_fp16,
                                                  faiss.METRIC_INNER_PRODUCT, False)  # raw vectors, not residuals
            sample = data[:: max(1, len(data) // (_TRAIN_PER_LIST * lists))]
            inner.train(sample)
            inner.nprobe = nprobe
        else:
            inner = faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
        index = faiss.IndexIDMap2(inner)
        if len(ids):
            index.add_with_ids(data, ids.astype(np.int64))
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
        """The k nearest chunk ids with their cosine similarity, best first (approximate above
        ANN_THRESHOLD vectors)."""
        if self.count == 0 or k <= 0:
            return []
        faiss = _faiss()
        q = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        params = None
        if self._hnsw is not None:
            params = faiss.SearchParametersHNSW(efSearch=max(k, int(self._hnsw.hnsw.efSearch)))
        if allowed is not None:
            allowed_ids = np.flatnonzero(allowed).astype(np.int64)
            if len(allowed_ids) == 0:
                return []
            selector = faiss.IDSelectorBatch(allowed_ids)
            if self._ivf is not None:
                # As many allowed vectors scanned as without a filter: more lists when few are allowed.
                share = len(allowed_ids) / max(self.count, 1)
                nprobe = min(int(self._ivf.nlist), math.ceil(int(self._ivf.nprobe) / max(share, 1e-9)))
                params = faiss.SearchParametersIVF(sel=selector, nprobe=nprobe)
            elif params is not None:
                params.sel = selector
            else:
                params = faiss.SearchParameters(sel=selector)
        scores, ids = self._index.search(q, min(k, self.count), params=params)
        keep = ids[0] >= 0
        return list(zip(ids[0][keep].tolist(), scores[0][keep].astype(np.float64).tolist()))
