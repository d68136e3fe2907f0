"""BM25 over code-aware terms, as a precomputed sparse matrix in numpy.

Engine choice (see bench/DECISIONS.md): rank-bm25 scores every document in Python for every query
(~30 ms at 22k chunks here); precomputing each (term, document) weight, as bm25s does, makes a
query sum the posting lists of its terms only. bm25s's index build loops in Python (1.5 s at 22k
chunks), so the matrix is built here with a few vectorised numpy passes instead. Scoring is Okapi
BM25 (k1=1.2, b=0.75) with the Lucene idf, log(1 + (N - df + 0.5) / (df + 0.5)), which stays
positive for common terms; the "okapi" variant (rank-bm25's idf) is kept for the agreement test.

Terms of every chunk are stored as ids into one vocabulary (`TermCorpus`) so that an incremental
re-index reuses the terms of unchanged chunks instead of tokenising the whole repository again.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from index.errors import CorruptIndex

__all__ = ["TermCorpus", "CorpusBuilder", "term_ids", "LexicalIndex", "Variant", "bm25_idf", "bm25_weights"]

Variant = Literal["lucene", "okapi"]
K1 = 1.2
B = 0.75
_VOCAB = "vocab.json"
_TERMS = "terms.npz"  # written by `TermCorpus.save`
TERM_IDS = "terms.ids.i32"  # written by the streaming build (index/store/postings.py): raw int32, mapped
TERM_OFFSETS = "terms.offsets.npy"


def bm25_idf(df: np.ndarray, n_docs: int, variant: Variant = "lucene") -> np.ndarray:
    if variant == "okapi":  # rank-bm25's BM25Okapi (common terms floored at 0 here, not at eps·mean)
        return np.maximum(np.log((n_docs - df + 0.5) / (df + 0.5)), 0.0)
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


def bm25_weights(idf: np.ndarray, tf: np.ndarray, norm: np.ndarray) -> np.ndarray:
    """Weight of each posting from its term's idf, its tf and its document's length norm."""
    weights: np.ndarray = (idf * tf * (K1 + 1) / (tf + norm)).astype(np.float32)
    return weights


@dataclass(frozen=True)
class TermCorpus:
    """Term ids of every document, concatenated (`ids[offsets[i]:offsets[i+1]]` is document i)."""

    vocab: tuple[str, ...]
    ids: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def doc(self, i: int) -> np.ndarray:
        return self.ids[self.offsets[i] : self.offsets[i + 1]]

    def save(self, directory: Path) -> None:
        with open(directory / _TERMS, "wb") as f:
            np.savez(f, ids=self.ids, offsets=self.offsets)
        (directory / _VOCAB).write_text(json.dumps(list(self.vocab)), encoding="utf-8")

    @staticmethod
    def load(directory: Path) -> TermCorpus:
        try:
            if (directory / TERM_IDS).is_file():
                offsets = np.load(directory / TERM_OFFSETS)
                ids = np.memmap(directory / TERM_IDS, dtype=np.int32, mode="r") if offsets[-1] else np.zeros(0, np.int32)
                if len(ids) != offsets[-1]:
                    raise ValueError(f"{len(ids)} term ids, offsets say {offsets[-1]}")
            else:
                with np.load(directory / _TERMS) as data:
                    ids, offsets = data["ids"], data["offsets"]
            vocab = tuple(json.loads((directory / _VOCAB).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError) as exc:
            raise CorruptIndex(f"lexical terms in {directory} are unreadable ({exc})") from exc
        return TermCorpus(vocab, ids, offsets)


def term_ids(terms: Sequence[str], lookup: dict[str, int], vocab: list[str]) -> np.ndarray:
    """Each term's id, new terms appended to `vocab` (and `lookup`) in first-seen order."""
    ids = np.empty(len(terms), dtype=np.int32)
    for j, term in enumerate(terms):
        i = lookup.get(term)
        if i is None:
            i = lookup[term] = len(vocab)
            vocab.append(term)
        ids[j] = i
    return ids


class CorpusBuilder:
    """Collects documents as term lists or as id slices of an earlier corpus (same vocabulary)."""

    def __init__(self, vocab: Sequence[str] = ()) -> None:
        self._vocab = list(vocab)
        self._lookup = {term: i for i, term in enumerate(self._vocab)}
        self._docs: list[np.ndarray] = []

    def add_terms(self, terms: Sequence[str]) -> None:
        self._docs.append(term_ids(terms, self._lookup, self._vocab))

    def add_ids(self, ids: np.ndarray) -> None:
        self._docs.append(ids)

    def build(self) -> TermCorpus:
        """Concatenate, dropping vocabulary entries no document uses any more."""
        lengths = np.fromiter((len(d) for d in self._docs), dtype=np.int64, count=len(self._docs))
        offsets = np.zeros(len(self._docs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.concatenate(self._docs) if self._docs else np.zeros(0, dtype=np.int32)
        used = np.unique(ids)
        remap = np.full(max(len(self._vocab), 1), -1, dtype=np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        vocab = tuple(self._vocab[i] for i in used.tolist())
        return TermCorpus(vocab, remap[ids] if len(ids) else ids, offsets)


def _times(weights: np.ndarray, count: int) -> np.ndarray:
    return weights if count == 1 else weights.astype(np.float64) * count


class LexicalIndex:
    """BM25 weights precomputed per (document, term) in a compressed sparse column matrix.

    Column t lists the documents containing term t with their full BM25 weight, so a query sums
    a few columns with one `np.bincount`: no per-document Python work at query time, and build is
    a handful of vectorised passes over the term ids (≈0.2 s for 20k chunks, where bm25s spent
    1.5 s in Python loops, which made one-file re-indexing miss its 2 s target).
    """

    def __init__(self, data: np.ndarray, rows: np.ndarray, indptr: np.ndarray, vocab: dict[str, int], n_docs: int) -> None:
        # Plain views of the mapped files: slicing a np.memmap goes through Python-level code.
        self._data, self._rows, self._indptr = np.asarray(data), np.asarray(rows), np.asarray(indptr)
        self._vocab = vocab
        self.n_docs = n_docs

    @staticmethod
    def build(corpus: TermCorpus, variant: Variant = "lucene") -> LexicalIndex:
        n_docs, n_terms = len(corpus), len(corpus.vocab)
        vocab = {term: i for i, term in enumerate(corpus.vocab)}
        lengths = np.diff(corpus.offsets)
        if n_docs == 0 or n_terms == 0:
            empty = np.zeros(0, dtype=np.float32)
            return LexicalIndex(empty, empty.astype(np.int32), np.zeros(n_terms + 1, np.int64), vocab, n_docs)
        docs = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
        keys, tf = np.unique(corpus.ids.astype(np.int64) * n_docs + docs, return_counts=True)  # sorted by term, doc
        terms, rows = keys // n_docs, keys % n_docs
        df = np.bincount(terms, minlength=n_terms)
        idf = bm25_idf(df, n_docs, variant)
        norm = K1 * (1 - B + B * lengths / max(lengths.mean(), 1e-9))
        data = bm25_weights(idf[terms], tf, norm[rows])
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        return LexicalIndex(data, rows.astype(np.int32), indptr, vocab, n_docs)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for name, array in (("data", self._data), ("rows", self._rows), ("indptr", self._indptr)):
            np.save(directory / f"bm25.{name}.npy", array)
        (directory / "lexical.json").write_text(json.dumps({"n_docs": self.n_docs, "k1": K1, "b": B}))

    @staticmethod
    def load(directory: Path) -> LexicalIndex:
        try:
            n_docs = int(json.loads((directory / "lexical.json").read_text())["n_docs"])
            arrays = [np.load(directory / f"bm25.{n}.npy", mmap_mode="r") for n in ("data", "rows", "indptr")]
            vocab = {t: i for i, t in enumerate(json.loads((directory / _VOCAB).read_text(encoding="utf-8")))}
        except (OSError, ValueError, KeyError) as exc:
            raise CorruptIndex(f"lexical index in {directory} is unreadable ({exc}): run `bridge index --rebuild`") from exc
        if len(arrays[2]) != len(vocab) + 1 or len(arrays[0]) != len(arrays[1]):
            raise CorruptIndex(f"lexical index in {directory} is inconsistent: run `bridge index --rebuild`")
        data, rows, indptr = arrays
        return LexicalIndex(data, rows, indptr, vocab, n_docs)

    def term_id(self, term: str) -> int | None:
        return self._vocab.get(term)

    def df(self, term_id: int) -> int:
        """Documents containing the term: one posting each."""
        return int(self._indptr[term_id + 1] - self._indptr[term_id])

    def dfs(self, term_ids: np.ndarray) -> np.ndarray:
        """`df` of many terms at once."""
        counts: np.ndarray = (self._indptr[term_ids + 1] - self._indptr[term_ids]).astype(np.int64)
        return counts

    def postings(self, term_id: int) -> tuple[np.ndarray, np.ndarray]:
        """(documents, weights) of one term's column."""
        lo, hi = self._indptr[term_id], self._indptr[term_id + 1]
        return self._rows[lo:hi], self._data[lo:hi]

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        """BM25 score of every document for these query terms (a repeated term counts again).

        A whole bug report repeats its terms many times, so each distinct term's posting slice is
        read once and weighted by its count: the weights are float32 and are summed in float64,
        so count × weight is the same number as adding the weight count times (the documents'
        scores equal the term-by-term sum). Slices of the mapped arrays are contiguous reads;
        a fancy index over the concatenated positions was most of a long query's time."""
        counts = Counter(i for t in terms if (i := self._vocab.get(t)) is not None)
        if not counts:
            return np.zeros(self.n_docs, dtype=np.float32)
        indptr = self._indptr
        ids = sorted(counts)  # postings in term order: a forward walk through the mapped files
        rows = np.concatenate([self._rows[indptr[i] : indptr[i + 1]] for i in ids])
        weights = np.concatenate([_times(self._data[indptr[i] : indptr[i + 1]], counts[i]) for i in ids])
        return np.bincount(rows, weights=weights, minlength=self.n_docs).astype(np.float32)

    def top(self, terms: Sequence[str], k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The k best documents with a positive score, best first; `allowed` is a boolean mask."""
        scores = self.scores(terms)
        if allowed is not None:
            scores = np.where(allowed, scores, 0.0)
        positive = int(np.count_nonzero(scores > 0))
        k = min(k, positive)
        if k <= 0:
            return []
        part = np.argpartition(-scores, k - 1)[:k]
        order = part[np.lexsort((part, -scores[part]))]
        return [(int(i), float(scores[i])) for i in order]
