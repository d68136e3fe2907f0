"""BM25 over code-aware terms, with bm25s as the engine.

Engine choice (see bench/RESULTS.md): rank-bm25 scores every document in Python for every query
(~43 ms at 9.4k chunks); bm25s precomputes each (term, document) weight into a sparse matrix, so
a query only sums the posting lists of its terms. The scoring is Okapi BM25 (k1=1.2, b=0.75) with
the Lucene idf, log(1 + (N - df + 0.5) / (df + 0.5)), which stays positive for common terms; the
"okapi" variant (rank-bm25's formula) is kept for the agreement test.

Terms of every chunk are stored as ids into one vocabulary (`TermCorpus`) so that an incremental
re-index reuses the terms of unchanged chunks instead of tokenising the whole repository again.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Sequence

import numpy as np

from index.errors import CorruptIndex

__all__ = ["TermCorpus", "CorpusBuilder", "LexicalIndex", "Variant"]

Variant = Literal["lucene", "okapi"]
K1 = 1.2
B = 0.75
_VOCAB = "vocab.json"
_TERMS = "terms.npz"


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
            with np.load(directory / _TERMS) as data:
                ids, offsets = data["ids"], data["offsets"]
            vocab = tuple(json.loads((directory / _VOCAB).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError) as exc:
            raise CorruptIndex(f"lexical terms in {directory} are unreadable ({exc})") from exc
        return TermCorpus(vocab, ids, offsets)


class CorpusBuilder:
    """Collects documents as term lists or as id slices of an earlier corpus (same vocabulary)."""

    def __init__(self, vocab: Sequence[str] = ()) -> None:
        self._vocab = list(vocab)
        self._lookup = {term: i for i, term in enumerate(self._vocab)}
        self._docs: list[np.ndarray] = []

    def add_terms(self, terms: Sequence[str]) -> None:
        lookup, vocab = self._lookup, self._vocab
        ids = np.empty(len(terms), dtype=np.int32)
        for j, term in enumerate(terms):
            i = lookup.get(term)
            if i is None:
                i = lookup[term] = len(vocab)
                vocab.append(term)
            ids[j] = i
        self._docs.append(ids)

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


def _quiet_bm25s():  # noqa: ANN202 - returns the module
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.ERROR)
    return bm25s


class LexicalIndex:
    """A bm25s index over a `TermCorpus`; document i is chunk id i."""

    def __init__(self, engine: object, vocab: dict[str, int], n_docs: int) -> None:
        self._engine = engine
        self._vocab = vocab
        self.n_docs = n_docs

    @staticmethod
    def build(corpus: TermCorpus, variant: Variant = "lucene") -> LexicalIndex:
        bm25s = _quiet_bm25s()
        engine = bm25s.BM25(
            k1=K1, b=B, method="atire", idf_method="robertson" if variant == "okapi" else "lucene"
        )
        vocab = {term: i for i, term in enumerate(corpus.vocab)}
        docs = [corpus.doc(i).tolist() for i in range(len(corpus))]
        if len(corpus) and vocab:
            engine.index((docs, vocab), create_empty_token=False, show_progress=False)
        return LexicalIndex(engine, vocab, len(corpus))

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        if self.n_docs and self._vocab:
            self._engine.save(str(directory), show_progress=False)
        (directory / "lexical.json").write_text(json.dumps({"n_docs": self.n_docs}))

    @staticmethod
    def load(directory: Path) -> LexicalIndex:
        try:
            n_docs = int(json.loads((directory / "lexical.json").read_text())["n_docs"])
            if not n_docs:
                return LexicalIndex(None, {}, 0)
            bm25s = _quiet_bm25s()
            engine = bm25s.BM25.load(str(directory), mmap=True, show_progress=False)
        except (OSError, ValueError, KeyError) as exc:
            raise CorruptIndex(f"lexical index in {directory} is unreadable ({exc})") from exc
        return LexicalIndex(engine, engine.vocab_dict, n_docs)

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        """BM25 score of every document for these query terms (repeated terms count again)."""
        ids = [self._vocab[t] for t in terms if t in self._vocab]
        if not ids:
            return np.zeros(self.n_docs, dtype=np.float32)
        return np.asarray(self._engine.get_scores_from_ids(ids), dtype=np.float32)

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
