"""One published build on Milvus as search reads it: BM25 and dense searches, chunk rows, file tables."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from index.milvus.access import MilvusAccess
from index.milvus.client import encode_terms
from index.milvus.schema import CHUNK_FIELDS
from index.rank import FileEvidence
from index.search import file_evidence
from index.store import Manifest
from index.types import Chunk

__all__ = ["BM25_CANDIDATES", "MilvusGeneration", "MilvusVectors"]

BM25_CANDIDATES = 1000  # chunks Milvus returns per BM25 query (as many as the dense file ranking reads)
_MAX_TOPK = 16384


class MilvusGeneration:
    """One published build on Milvus, as search reads it: only the file tables are held here."""

    def __init__(self, store: MilvusAccess, name: str, manifest: Manifest) -> None:
        self.store = store
        self.name = name
        self.manifest = manifest
        self.files: FileEvidence
        self.files, self.paths = file_evidence(manifest, self._symbols)
        meta = manifest.stats.get("vectors")
        self._meta: dict[str, Any] = meta if isinstance(meta, dict) else {}

    def _symbols(self) -> list[tuple[int, str]]:
        rows = self.store.paged(self.name, self.manifest.chunks, 'symbol != ""', ["id", "symbol"])
        return [(int(r["id"]), str(r["symbol"])) for r in rows]

    def _filter(self, allowed: np.ndarray | None) -> str:
        if allowed is None or bool(allowed.all()):
            return ""
        paths = sorted(set(self.paths[allowed].tolist()))
        return f"path in {json.dumps(paths)}"

    def bm25(self, words: Sequence[str], allowed: np.ndarray | None) -> np.ndarray:
        scores = np.zeros(self.manifest.chunks, dtype=np.float32)
        if not words or (allowed is not None and not allowed.any()):
            return scores
        for hit in self.search(encode_terms(words), "sparse", "BM25", BM25_CANDIDATES, allowed):
            scores[int(hit["id"])] = abs(float(hit["distance"]))  # Milvus Lite reports -score, Milvus the score
        return scores

    def search(self, data: Any, field: str, metric: str, limit: int, allowed: np.ndarray | None) -> list[Any]:
        """The hits of one search on `field` (`sparse`: BM25 over our terms; `dense`: cosine)."""
        hits = self.store.call(
            "search",
            "search",
            self.name,
            data=[data],
            anns_field=field,
            limit=min(limit, _MAX_TOPK),
            filter=self._filter(allowed),
            output_fields=[],
            search_params={"metric_type": metric},
        )
        return list(hits[0])

    def chunks(self, ids: list[int]) -> dict[int, Chunk]:
        if not ids:
            return {}
        rows = self.store.call(
            "read chunks",
            "query",
            self.name,
            filter=f"id in {[int(i) for i in ids]}",
            output_fields=CHUNK_FIELDS,
            limit=len(ids),
        )
        return {
            int(r["id"]): Chunk(
                r["path"],
                int(r["start_line"]),
                int(r["end_line"]),
                r["language"] or None,
                r["symbol"] or None,
                "".join(r["text"]),
                r["hash"],
                int(r["tokens"]),
            )
            for r in rows
        }

    def vectors(self) -> MilvusVectors | None:
        return MilvusVectors(self) if self._meta else None

    def vector_meta(self) -> dict[str, Any]:
        return dict(self._meta)

    def close(self) -> None:
        pass  # the client belongs to the store


class MilvusVectors:
    def __init__(self, gen: MilvusGeneration) -> None:
        self._gen = gen

    @property
    def count(self) -> int:
        return self._gen.manifest.chunks

    def top(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        if k <= 0 or (allowed is not None and not allowed.any()):
            return []
        vector = np.asarray(query, dtype=np.float32).reshape(-1).tolist()
        return [(int(h["id"]), float(h["distance"])) for h in self._gen.search(vector, "dense", "COSINE", k, allowed)]
