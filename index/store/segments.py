"""Reading a generation made of a base segment, a delta segment and a deletion mask.

Why: re-indexing one file of a million-chunk repository used to copy every chunk row and rebuild
BM25 from every stored term id (17-20 s). A delta re-index (index/build/delta.py) instead hard-links the
previous generation's base segment, unchanged, and writes only:

    g<time>-<pid>/
      chunks.sqlite, lexical/   the base segment: hard links to the same immutable files
      segments.json             n_base, n_delta, n_deleted; absent in a single-segment generation
      delta/chunks.sqlite       chunk rows of files changed or added since the base (ids n_base...)
      delta/lexical/            their BM25 matrix (rows 0..n_delta-1) and term ids, own vocabulary
      delta/deleted.npy         base chunk ids no longer live (files changed or removed)
      delta/deleted_df.npz      per base term id, how many deleted chunks contain it

Chunk ids stay one space: base ids below n_base, delta ids after, deleted base ids left as holes
that no search returns (their BM25 score is 0, the chunk table does not give them out, the
vector fill does not embed them).

BM25 statistics are combined at query time. A base weight has its term's idf baked in, so a
query term's base postings are scaled by idf_live / idf_base, where df_live = df_base -
df(deleted) + df(delta) and N_live likewise; the delta's weights were computed at re-index time
with those same live statistics and the live average length. Base weights keep the base's
average chunk length: that drift (|avgdl_live / avgdl_base - 1|, which bounds the relative
error of every base weight) is the only difference from a full rebuild, and it vanishes when
the delta is compacted into a new single segment.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from index.errors import CorruptIndex
from index.store.layout import ChunkTable
from index.store.lexical import LexicalIndex, bm25_idf
from index.types import Chunk

__all__ = ["SEGMENTS", "DELTA", "SegmentInfo", "load_segments", "SegmentedTable", "SegmentedLexical", "open_table", "open_lexical"]

SEGMENTS = "segments.json"
DELTA = "delta"
DELETED = "deleted.npy"
DELETED_DF = "deleted_df.npz"


@dataclass(frozen=True)
class SegmentInfo:
    n_base: int  # chunk ids below this are the base segment's
    n_delta: int  # ids n_base .. n_base + n_delta - 1 are the delta's
    deleted: np.ndarray  # sorted base ids that are no longer live

    @property
    def n_ids(self) -> int:
        return self.n_base + self.n_delta

    @property
    def n_live(self) -> int:
        return self.n_base - len(self.deleted) + self.n_delta


def load_segments(generation: Path) -> SegmentInfo | None:
    """The generation's segment layout, or None for a single-segment generation."""
    path = generation / SEGMENTS
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
        deleted = np.load(generation / DELTA / DELETED)
        info = SegmentInfo(int(meta["n_base"]), int(meta["n_delta"]), np.asarray(deleted, dtype=np.int64))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorruptIndex(f"segments of {generation} are unreadable ({exc}): run `bridge index --rebuild`") from exc
    if len(info.deleted) != int(meta.get("n_deleted", -1)):
        raise CorruptIndex(f"segments of {generation} are inconsistent: run `bridge index --rebuild`")
    return info


class SegmentedTable:
    """The chunk rows of both segments as one table; deleted base rows are never given out."""

    def __init__(self, generation: Path, info: SegmentInfo) -> None:
        self.info = info
        self.base = ChunkTable(generation)
        self.delta = ChunkTable(generation / DELTA)
        self._deleted: frozenset[int] | None = None
        self._lock = threading.Lock()

    def _gone(self) -> frozenset[int]:
        with self._lock:
            if self._deleted is None:
                self._deleted = frozenset(self.info.deleted.tolist())
            return self._deleted

    def get(self, ids: list[int]) -> dict[int, Chunk]:
        gone = self._gone()
        base = [i for i in ids if i < self.info.n_base and i not in gone]
        delta = [i for i in ids if i >= self.info.n_base]
        return self.base.get(base) | self.delta.get(delta)

    def items(self) -> list[tuple[int, Chunk]]:
        gone = self._gone()
        return [(i, c) for i, c in self.base.items() if i not in gone] + self.delta.items()

    def all(self) -> list[Chunk]:
        """Live chunks in id order (ids have holes: use `items` where the id matters)."""
        return [c for _, c in self.items()]

    def symbols(self) -> list[tuple[int, str]]:
        gone = self._gone()
        return [(i, s) for i, s in self.base.symbols() if i not in gone] + self.delta.symbols()

    def close(self) -> None:
        self.base.close()
        self.delta.close()


class SegmentedLexical:
    """BM25 over the base and delta matrices with live statistics (see the module docstring)."""

    def __init__(self, generation: Path, info: SegmentInfo) -> None:
        self.info = info
        self.base = LexicalIndex.load(generation / "lexical")
        self.delta = LexicalIndex.load(generation / DELTA / "lexical")
        if self.base.n_docs != info.n_base or self.delta.n_docs != info.n_delta:
            raise CorruptIndex(f"segments of {generation} do not match their BM25 matrices: run `bridge index --rebuild`")
        try:
            with np.load(generation / DELTA / DELETED_DF) as data:
                self._del_terms, self._del_counts = data["terms"], data["counts"]
        except (OSError, ValueError, KeyError) as exc:
            raise CorruptIndex(f"deletion statistics in {generation} are unreadable ({exc})") from exc
        self.n_docs = info.n_ids  # length of a score array: every chunk id, holes included

    def _idf_ratios(self, base_ids: np.ndarray, df_delta: np.ndarray) -> np.ndarray:
        """idf_live / idf_base of base terms, df_live = df_base - df(deleted) + df(delta)."""
        info = self.info
        df_base = self.base.dfs(base_ids)
        at = np.minimum(np.searchsorted(self._del_terms, base_ids), max(len(self._del_terms) - 1, 0))
        gone = np.where(self._del_terms[at] == base_ids, self._del_counts[at], 0) if len(self._del_terms) else 0
        ratios: np.ndarray = bm25_idf(df_base - gone + df_delta, info.n_live) / bm25_idf(df_base, info.n_base)
        return ratios

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        """Score of every chunk id; deleted ids score 0. As LexicalIndex.scores, each distinct
        term's posting slice is read once and weighted by its count (and here its idf ratio)."""
        counts = Counter(terms)
        base, delta, info = self.base, self.delta, self.info
        found: list[tuple[int | None, int | None, int]] = []
        for t, n in counts.items():
            b, d = base.term_id(t), delta.term_id(t)
            if b is not None or d is not None:
                found.append((b, d, n))
        found.sort(key=lambda f: -1 if f[0] is None else f[0])  # base postings in term order: a forward walk
        in_base = [(b, d, n) for b, d, n in found if b is not None]
        ratios = self._idf_ratios(np.array([b for b, _, _ in in_base], dtype=np.int64),
                                  np.array([delta.df(d) if d is not None else 0 for _, d, _ in in_base], dtype=np.int64))
        parts: list[tuple[np.ndarray, np.ndarray, float, int]] = []  # (documents, weights, factor, id offset)
        for (b, _, n), ratio in zip(in_base, ratios.tolist()):
            assert b is not None
            parts.append((*base.postings(b), n * ratio, 0))
        parts += [(*delta.postings(d), float(n), info.n_base) for _, d, n in found if d is not None]
        if not parts:
            return np.zeros(info.n_ids, dtype=np.float32)
        # Scaled while copied into one buffer: the same passes over the postings as a plain concatenation.
        total = sum(len(p[0]) for p in parts)
        rows, weights = np.empty(total, dtype=np.int32), np.empty(total, dtype=np.float32)
        at = 0
        for r, w, factor, offset in parts:
            end = at + len(r)
            np.add(r, np.int32(offset), out=rows[at:end])
            np.multiply(w, np.float32(factor), out=weights[at:end])
            at = end
        out = np.bincount(rows, weights=weights, minlength=info.n_ids)
        out[info.deleted] = 0.0
        return out.astype(np.float32)


def open_table(generation: Path) -> ChunkTable | SegmentedTable:
    """The chunk rows of a generation, of one segment or two."""
    info = load_segments(generation)
    return ChunkTable(generation) if info is None else SegmentedTable(generation, info)


def open_lexical(generation: Path) -> LexicalIndex | SegmentedLexical:
    """The BM25 scorer of a generation, of one segment or two."""
    info = load_segments(generation)
    return LexicalIndex.load(generation / "lexical") if info is None else SegmentedLexical(generation, info)
