"""Writing a delta generation: the base segment hard-linked, a small delta and a deletion mask.

See index/store/segments.py for the layout and the query-time arithmetic. The delta holds every file
whose content differs from the base (changed or added since the base was built) and is written
whole at each re-index, from the previous delta's rows and term ids for files that did not
change since, and from the files read now: it stays simple (no delta of deltas) and small.
Nothing of the base is read except the term ids of the deleted chunks (their document
frequencies) and the base's document frequencies of the delta's terms.

When the delta and the deleted chunks together pass `max_fraction` of the base, `write_delta`
declines (returns None) and the caller writes a fresh single segment: past that point the
base's idf and length statistics drift further, every query pays for more deleted postings, and
the delta, rewritten at every re-index, stops being small. 10 % keeps the rewritten delta
under a tenth of a full build's work while compacting rarely: a one-file edit adds a few
chunks, so thousands of edits fit before a compaction.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from index.files import chunk_file
from index.errors import CorruptIndex
from index.store import K1, TERM_IDS, TERM_OFFSETS, B, TermCorpus, bm25_idf, bm25_weights, term_ids
from index.store import DELETED, DELETED_DF, DELTA, SEGMENTS, SegmentInfo
from index.store import ChunkWriter, FileEntry, Manifest
from index.tokenize import path_terms, terms
from index.types import Progress, SourceFile

__all__ = ["ListedFile", "DeltaResult", "write_delta", "deleted_base", "MAX_FRACTION"]

MAX_FRACTION = 0.1  # delta + deleted chunks, as a share of the base, above which a re-index compacts


class ListedFile(Protocol):
    """A file the first pass saw unchanged: its rows and terms are reused, it is not read."""

    @property
    def path(self) -> str: ...
    @property
    def sha(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def mtime_ns(self) -> int: ...
    @property
    def invalid_utf8(self) -> bool: ...


@dataclass(frozen=True)
class DeltaResult:
    entries: dict[str, FileEntry]
    reused: int  # chunks kept from the base or copied from the previous delta
    invalid: list[str]  # files with invalid UTF-8, in path order
    n_delta: int
    n_deleted: int


def in_base(entry: FileEntry, n_base: int) -> bool:
    """Whether a file's chunks are rows of the base segment (a delta file's ids start at n_base)."""
    return entry.first_chunk + entry.n_chunks <= n_base


def deleted_base(manifest: Manifest, info: SegmentInfo | None, kept: set[str]) -> np.ndarray:
    """Sorted base ids that no kept file points to: the deletion mask of the next generation.
    The base ids still live are exactly those of the previous generation's base files, so the
    mask grows by the base files not kept (a few) and only those are looked at."""
    n_base = info.n_base if info is not None else manifest.chunks
    gone = [manifest.files[p] for p in manifest.files.keys() - kept]
    ranges = [np.arange(e.first_chunk, e.first_chunk + e.n_chunks) for e in gone if in_base(e, n_base)]
    before = [info.deleted] if info is not None else []
    return np.unique(np.concatenate([*before, *ranges, np.zeros(0, dtype=np.int64)])).astype(np.int64)


def write_delta(
    tmp: Path,
    previous: Path,
    manifest: Manifest,
    corpus: TermCorpus,
    info: SegmentInfo | None,
    items: Iterable[SourceFile | ListedFile],
    deleted: np.ndarray,
    chunking: dict[str, int],
    max_fraction: float = MAX_FRACTION,
    on_progress: Callable[[Progress], None] = lambda _: None,
) -> DeltaResult | None:
    """Write the generation `tmp` as `previous`'s base plus a delta of `items` (files in path
    order; a `SourceFile` is chunked now, a listed file reuses its rows). `deleted` comes from
    `deleted_base` over the files to keep. None when the delta would pass `max_fraction` of the
    base or the base cannot be hard-linked: the caller then writes a single segment."""
    n_base = info.n_base if info is not None else manifest.chunks
    if len(deleted) > max_fraction * n_base or not _link_base(previous, tmp):
        return None
    old_delta = previous / DELTA if info is not None else None
    old_corpus = TermCorpus.load(old_delta / "lexical") if old_delta is not None else None
    vocab = list(old_corpus.vocab) if old_corpus is not None else []
    lookup = {t: i for i, t in enumerate(vocab)}
    rows = ChunkWriter(tmp / DELTA, old_delta, start=n_base)
    docs: list[np.ndarray] = []
    entries: dict[str, FileEntry] = {}
    invalid: list[str] = []
    reused = 0
    try:
        for n, item in enumerate(items, 1):
            if n % 500 == 0:
                on_progress(Progress("chunk", n, n))
            first = rows.count
            if isinstance(item, SourceFile):
                extra = path_terms(item.path)
                for c in chunk_file(item, chunking["target_tokens"], chunking["max_tokens"], chunking["overlap_lines"]):
                    rows.add(c)
                    docs.append(term_ids(terms(c.text) + extra, lookup, vocab))
                entry = FileEntry(item.sha, item.size, item.mtime_ns, first, rows.count - first)
            else:
                e = manifest.files[item.path]
                reused += e.n_chunks
                if not in_base(e, n_base):
                    assert old_corpus is not None  # a file outside the base is in the previous delta
                    rows.copy(e.first_chunk, e.n_chunks)
                    docs += [old_corpus.doc(j - n_base) for j in range(e.first_chunk, e.first_chunk + e.n_chunks)]
                    e = FileEntry(e.sha, e.size, e.mtime_ns, first, e.n_chunks)
                same = (e.size, e.mtime_ns) == (item.size, item.mtime_ns)  # the usual case: no new object
                entry = e if same else FileEntry(item.sha, item.size, item.mtime_ns, e.first_chunk, e.n_chunks)
            entries[item.path] = entry
            if item.invalid_utf8:
                invalid.append(item.path)
    finally:
        rows.close()
    on_progress(Progress("chunk", len(entries), len(entries)))
    n_delta = rows.count - n_base
    if n_delta + len(deleted) > max_fraction * n_base:
        return None
    _write_lexical(tmp / DELTA, previous / "lexical", corpus, docs, vocab, deleted, n_base)
    (tmp / SEGMENTS).write_text(json.dumps({"n_base": n_base, "n_delta": n_delta, "n_deleted": len(deleted)}))
    on_progress(Progress("lexical", n_delta, n_delta))
    return DeltaResult(entries, reused, invalid, n_delta, len(deleted))


def _link_base(previous: Path, tmp: Path) -> bool:
    """Hard-link the base segment's files (never written again: a re-index writes new files)."""
    try:
        os.link(previous / "chunks.sqlite", tmp / "chunks.sqlite")
        (tmp / "lexical").mkdir()
        for f in (previous / "lexical").iterdir():
            os.link(f, tmp / "lexical" / f.name)
    except OSError:  # a file system without hard links: copying the base is what a full build does
        return False
    return True


def _write_lexical(
    out: Path, base_dir: Path, base: TermCorpus, docs: list[np.ndarray], vocab: list[str], deleted: np.ndarray, n_base: int
) -> None:
    """The delta's BM25 matrix with live statistics, its term ids, and the deletion statistics."""
    lexical = out / "lexical"
    lexical.mkdir(parents=True, exist_ok=True)
    del_terms, del_counts, del_length = _deleted_df(base, deleted)
    np.save(out / DELETED, deleted.astype(np.int64))
    with open(out / DELETED_DF, "wb") as f:
        np.savez(f, terms=del_terms, counts=del_counts)
    lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
    ids = np.concatenate(docs).astype(np.int64) if docs else np.zeros(0, dtype=np.int64)
    used = np.unique(ids)
    remap = np.full(max(len(vocab), 1), -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    ids = remap[ids] if len(ids) else ids
    words = [vocab[i] for i in used.tolist()]
    n_delta = len(docs)
    doc_of = np.repeat(np.arange(n_delta, dtype=np.int64), lengths)
    keys, tf = np.unique(ids << 32 | doc_of, return_counts=True)  # sorted by term, then document
    term, row = keys >> 32, keys & 0xFFFFFFFF
    df_delta = np.bincount(term, minlength=len(words))
    df_live = _base_df(base_dir, base, words, del_terms, del_counts) + df_delta
    n_live = n_base - len(deleted) + n_delta
    total = int(base.offsets[-1]) - del_length + int(lengths.sum())
    avgdl = total / n_live if n_live else 1.0
    norm = K1 * (1 - B + B * lengths / max(avgdl, 1e-9))
    weights = bm25_weights(bm25_idf(df_live, n_live)[term], tf, norm[row])
    indptr = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum(df_delta, out=indptr[1:])
    np.save(lexical / "bm25.data.npy", weights)
    np.save(lexical / "bm25.rows.npy", row.astype(np.int32))
    np.save(lexical / "bm25.indptr.npy", indptr)
    (lexical / "vocab.json").write_text(json.dumps(words), encoding="utf-8")
    (lexical / "lexical.json").write_text(json.dumps({"n_docs": n_delta, "k1": K1, "b": B, "avgdl": avgdl}))
    offsets = np.zeros(n_delta + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    np.save(lexical / TERM_OFFSETS, offsets)
    ids.astype(np.int32).tofile(lexical / TERM_IDS)


def _deleted_df(base: TermCorpus, deleted: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(base term ids, documents among the deleted ones containing each, their total length)."""
    if len(deleted) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0
    offsets = base.offsets
    breaks = np.flatnonzero(np.diff(deleted) != 1) + 1  # deleted ids come in runs, one per file
    parts = [base.ids[offsets[run[0]] : offsets[run[-1] + 1]] for run in np.split(deleted, breaks)]
    ids = np.concatenate(parts).astype(np.int64)
    if len(ids) and (ids.min() < 0 or ids.max() >= len(base.vocab)):
        raise CorruptIndex("the base segment's term ids are damaged: run `bridge index --rebuild`")
    lengths = (offsets[deleted + 1] - offsets[deleted]).astype(np.int64)
    doc_of = np.repeat(np.arange(len(deleted), dtype=np.int64), lengths)
    keys = np.unique(ids << 32 | doc_of)
    terms_, counts = np.unique(keys >> 32, return_counts=True)
    return terms_, counts, int(lengths.sum())


def _base_df(base_dir: Path, base: TermCorpus, words: list[str], del_terms: np.ndarray, del_counts: np.ndarray) -> np.ndarray:
    """Live document frequency within the base (base df minus deleted) of each delta term."""
    indptr = np.load(base_dir / "bm25.indptr.npy", mmap_mode="r")
    lookup = _base_lookup(base, words)
    out = np.zeros(len(words), dtype=np.int64)
    for j, word in enumerate(words):
        i = lookup.get(word)
        if i is not None:
            at = int(np.searchsorted(del_terms, i))
            gone = int(del_counts[at]) if at < len(del_terms) and del_terms[at] == i else 0
            out[j] = int(indptr[i + 1] - indptr[i]) - gone
    return out


def _base_lookup(base: TermCorpus, words: list[str]) -> dict[str, int]:
    """Base ids of `words`: one pass over the base vocabulary, no dictionary of all of it."""
    wanted = set(words)
    return {t: i for i, t in enumerate(base.vocab) if t in wanted}
