"""BM25 built in bounded memory: term ids and postings go to disk as documents arrive.

`LexicalIndex.build` needs every term occurrence of the repository in memory at once (about
5 GB at 870k chunks). `LexicalWriter` instead keeps only the vocabulary, one int per document
and a batch of documents' terms:

- each document's term ids are appended to `terms.ids.i32` (the reusable `TermCorpus`);
- every `run_postings` occurrences, the batch becomes a sorted run of (term, doc, tf) triples
  in three raw files, and the document frequencies are added up;
- `finish` merges the runs by blocks of terms, computes the BM25 weights (the same float
  arithmetic as `LexicalIndex.build`, so the matrix is identical) and writes the `.npy` files
  that `LexicalIndex.load` maps, sequentially. The runs are deleted.

Every file lives in the generation's temporary folder, so a killed build leaves nothing that a
reader could see.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, Self

import numpy as np

from index.errors import IndexingError
from index.store.lexical import K1, TERM_IDS, TERM_OFFSETS, B, TermCorpus, bm25_idf, bm25_weights, term_ids

__all__ = ["LexicalWriter", "ReusedSlices"]

_RUN_POSTINGS = 4_000_000  # occurrences per run: ~100 MB of sort work, a few hundred KB per run file
_BLOCK_POSTINGS = 8_000_000  # postings merged at once by `finish`


class LexicalWriter:
    """Receives documents in id order; writes `directory`'s lexical files on `finish`."""

    def __init__(
        self,
        directory: Path,
        vocab: Sequence[str] = (),
        run_postings: int | None = None,
        block_postings: int | None = None,
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self._vocab = list(vocab)
        self._lookup = {term: i for i, term in enumerate(self._vocab)}
        self._run_postings = run_postings or _RUN_POSTINGS
        self._block_postings = block_postings or _BLOCK_POSTINGS
        # Open for the writer's whole life (closed by `finish`); a failed build discards the folder.
        self._ids: BinaryIO = open(directory / TERM_IDS, "wb")  # noqa: SIM115
        self._lengths: list[np.ndarray] = []  # one int32 array per add call, concatenated at the end
        self._n_docs = 0
        self._pending: list[np.ndarray] = []  # term ids of the documents not yet in a run
        self._pending_lengths: list[np.ndarray] = []
        self._pending_size = 0
        self._first_pending = 0  # document id of the first pending document
        self._runs: list[tuple[Path, int]] = []  # (run stem, postings)
        self._df = np.zeros(0, dtype=np.int64)

    @property
    def n_docs(self) -> int:
        return self._n_docs

    @property
    def run_postings(self) -> int:
        """Term occurrences per sorted run: a caller batching documents keeps its batches this size."""
        return self._run_postings

    def add_terms(self, terms: Sequence[str]) -> None:
        ids = term_ids(terms, self._lookup, self._vocab)
        self.add_ids(ids, np.array([len(ids)], dtype=np.int32))

    def add_ids(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        """Documents already as term ids of this vocabulary: `ids` concatenated, `lengths` per document."""
        ids = np.ascontiguousarray(ids, dtype=np.int32)
        self._ids.write(ids.tobytes())
        lengths = np.asarray(lengths, dtype=np.int32)
        self._lengths.append(lengths)
        self._pending.append(ids)
        self._pending_lengths.append(lengths)
        self._pending_size += len(ids)
        self._n_docs += len(lengths)
        if self._pending_size >= self._run_postings:
            self._flush_run()

    def _flush_run(self) -> None:
        if not self._pending_lengths:
            return
        ids = np.concatenate(self._pending).astype(np.int64)
        lengths = np.concatenate(self._pending_lengths)
        docs = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        keys, tf = np.unique(ids << 32 | docs, return_counts=True)  # sorted by term, then document
        terms = (keys >> 32).astype(np.int32)
        stem = self.directory / f"run{len(self._runs):05d}"
        terms.tofile(f"{stem}.terms")
        ((keys & 0xFFFFFFFF) + self._first_pending).astype(np.int32).tofile(f"{stem}.docs")
        tf.astype(np.int32).tofile(f"{stem}.tf")
        self._runs.append((stem, len(keys)))
        counts = np.bincount(terms, minlength=len(self._vocab))
        if len(self._df) < len(counts):
            self._df = np.concatenate([self._df, np.zeros(len(counts) - len(self._df), dtype=np.int64)])
        self._df[: len(counts)] += counts
        self._first_pending = self._n_docs
        self._pending, self._pending_lengths, self._pending_size = [], [], 0

    def finish(self) -> tuple[int, int]:
        """Write the BM25 matrix, the vocabulary and the term corpus; (documents, terms)."""
        self._flush_run()
        self._ids.close()
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, dtype=np.int32)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        np.save(self.directory / TERM_OFFSETS, offsets)
        df = np.concatenate([self._df, np.zeros(len(self._vocab) - len(self._df), dtype=np.int64)])
        used = np.flatnonzero(df > 0)
        if len(used) < len(self._vocab):
            self._remap_ids(used)
        vocab = [self._vocab[i] for i in used.tolist()]
        (self.directory / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
        df_used = df[used]
        indptr = np.zeros(len(used) + 1, dtype=np.int64)
        np.cumsum(df_used, out=indptr[1:])
        np.save(self.directory / "bm25.indptr.npy", indptr)
        self._merge(df, lengths, int(indptr[-1]))
        (self.directory / "lexical.json").write_text(json.dumps({"n_docs": self._n_docs, "k1": K1, "b": B}))
        return self._n_docs, len(used)

    def _remap_ids(self, used: np.ndarray) -> None:
        """Renumber term ids densely over the terms in use, in place, a slice at a time."""
        remap = np.full(len(self._vocab), -1, dtype=np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        path = self.directory / TERM_IDS
        total = path.stat().st_size // 4
        with open(path, "r+b") as f:
            for start in range(0, total, self._block_postings):
                f.seek(start * 4)
                part = np.fromfile(f, dtype=np.int32, count=min(self._block_postings, total - start))
                f.seek(start * 4)
                f.write(remap[part].tobytes())

    def _merge(self, df: np.ndarray, lengths: np.ndarray, nnz: int) -> None:
        """Write bm25.data.npy and bm25.rows.npy column block by column block: each block's
        postings are gathered from every run (runs are sorted by term, and in document order
        among themselves, so a stable sort by term leaves documents ascending in a column)."""
        n_docs = self._n_docs
        idf = bm25_idf(df, n_docs)
        norm = K1 * (1 - B + B * lengths / max(lengths.mean(), 1e-9)) if n_docs else np.zeros(0)
        bounds = _term_blocks(df, self._block_postings)
        cuts = [self._run_cuts(stem, bounds) for stem, _ in self._runs]
        with _NpyOut(self.directory / "bm25.data.npy", np.float32, nnz) as data_out, _NpyOut(
            self.directory / "bm25.rows.npy", np.int32, nnz
        ) as rows_out:
            for block in range(len(bounds) - 1):
                parts = [
                    _read_run(stem, int(cut[block]), int(cut[block + 1]))
                    for (stem, _), cut in zip(self._runs, cuts)
                    if cut[block + 1] > cut[block]
                ]
                if not parts:
                    continue
                terms = np.concatenate([p[0] for p in parts])
                order = np.argsort(terms, kind="stable")
                terms = terms[order]
                rows = np.concatenate([p[1] for p in parts])[order]
                tf = np.concatenate([p[2] for p in parts])[order].astype(np.int64)
                data_out.write(bm25_weights(idf[terms], tf, norm[rows]))
                rows_out.write(rows)
        for stem, _ in self._runs:
            for suffix in (".terms", ".docs", ".tf"):
                os.unlink(f"{stem}{suffix}")

    @staticmethod
    def _run_cuts(stem: Path, bounds: np.ndarray) -> np.ndarray:
        terms = np.fromfile(f"{stem}.terms", dtype=np.int32)
        return np.searchsorted(terms, bounds, side="left")


class ReusedSlices:
    """Consecutive reused documents handed to the lexical writer as one slice (up to a bound),
    not file by file: a one-file re-index of 50k files made 50k small calls."""

    def __init__(self, corpus: TermCorpus, lexical: LexicalWriter) -> None:
        self.corpus, self.lexical = corpus, lexical
        self.limit = lexical.run_postings  # term ids per slice: one sorted run's worth, bounded memory
        self.first = self.n = 0

    def add(self, first: int, n: int) -> None:
        offsets = self.corpus.offsets
        contiguous = self.n and first == self.first + self.n
        if not contiguous or offsets[first + n] - offsets[self.first] > self.limit:
            self.flush()
            self.first = first
        self.n += n

    def flush(self) -> None:
        if self.n:
            span = self.corpus.offsets[self.first : self.first + self.n + 1]
            self.lexical.add_ids(self.corpus.ids[span[0] : span[-1]], np.diff(span))
        self.first = self.n = 0


def _term_blocks(df: np.ndarray, postings: int) -> np.ndarray:
    """Term id boundaries [0, ..., n_terms] so that each block holds about `postings` postings."""
    if len(df) == 0:
        return np.array([0, 0], dtype=np.int64)
    ends = np.cumsum(df)
    marks = np.searchsorted(ends, np.arange(postings, int(ends[-1]), postings), side="right")
    return np.unique(np.concatenate([[0], marks, [len(df)]])).astype(np.int64)


def _read_run(stem: Path, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    out = []
    for suffix in (".terms", ".docs", ".tf"):
        with open(f"{stem}{suffix}", "rb") as f:
            f.seek(lo * 4)
            out.append(np.fromfile(f, dtype=np.int32, count=hi - lo))
    return out[0], out[1], out[2]


class _NpyOut:
    """A one-dimensional .npy file of known length, written sequentially."""

    def __init__(self, path: Path, dtype: type, length: int) -> None:
        self.path, self.dtype, self.length = path, np.dtype(dtype), length
        self.written = 0

    def __enter__(self) -> Self:
        self.file = open(self.path, "wb")
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": (self.length,)}
        np.lib.format.write_array_header_1_0(self.file, header)
        return self

    def write(self, array: np.ndarray) -> None:
        self.file.write(np.ascontiguousarray(array, dtype=self.dtype).tobytes())
        self.written += len(array)

    def __exit__(self, *exc: object) -> None:
        self.file.close()
        if exc[0] is None and self.written != self.length:
            raise IndexingError(f"{self.path}: wrote {self.written} of {self.length} values: run `bridge index --rebuild`")
