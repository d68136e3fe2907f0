"""The write path: discover → chunk → lexical → publish, then fill in vectors progressively.

Work is reused by content: a file whose bytes did not change keeps its chunks and their BM25
terms from the previous generation, and embeddings come from a cache keyed by (embedder id,
chunk hash), so re-indexing after an edit re-chunks, re-tokenises and re-embeds only that file.
BM25 itself is rebuilt whole each time, from the stored term ids (index/postings.py), in memory
bounded by a batch: about a second per 100k chunks.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from index.chunk import chunk_file
from index.discover import Listing, iter_files, iter_listed
from index.errors import EmptyRepository, IndexingError, IndexWriteError
from index.history import remove_history, update_history
from index.lexical import TermCorpus
from index.postings import LexicalWriter
from index.store import ChunkTable, ChunkWriter, FileEntry, IndexDir, Manifest, default_home
from index.tokenize import path_terms, terms
from index.types import Progress, Selection, SourceFile
from index.vector import VectorIndex

if TYPE_CHECKING:
    from index.embed import Embedder

__all__ = ["BuildOptions", "BuildReport", "build_index", "fill_vectors", "FillReport"]

ProgressFn = Callable[[Progress], None]
_RACY_NS = 2_000_000_000  # a file changed this close before a scan is read again by the next one
StopFn = Callable[[], bool]


@dataclass(frozen=True)
class BuildOptions:
    selection: Selection = field(default_factory=Selection)
    target_tokens: int = 250
    max_tokens: int = 400
    overlap_lines: int = 3
    embedder: str | None = "minilm"  # spec for index.embed.load_embedder; None: lexical only
    rebuild: bool = False  # ignore the previous generation's chunks
    history: bool = True  # index the git history as evidence (index/history.py); off: none is kept
    lock_timeout: float = 10.0

    def chunking(self) -> dict[str, int]:
        return {"target_tokens": self.target_tokens, "max_tokens": self.max_tokens, "overlap_lines": self.overlap_lines}


@dataclass(frozen=True)
class BuildReport:
    index_dir: str
    generation: str
    changed: bool  # False when the repository was unchanged and no new generation was written
    files: int
    chunks: int
    reused_chunks: int
    new_chunks: int
    skipped: dict[str, int]
    invalid_utf8: int
    seconds: dict[str, float]


@dataclass(frozen=True)
class FillReport:
    embedded_chunks: int
    chunks: int
    newly_embedded: int
    seconds: float
    complete: bool


def _noop(_: Progress) -> None:
    pass


def build_index(
    root: Path, index_dir: Path, options: BuildOptions = BuildOptions(), on_progress: ProgressFn = _noop
) -> BuildReport:
    """Write a new generation for `root` (lexical part only; see `fill_vectors` for the rest).

    Streams: files are read one at a time, their chunks and terms go to the new generation's
    files as they are made (index/postings.py, `ChunkWriter`), and an unchanged file's chunks and
    terms are copied from the previous generation without being read back into Python objects.
    Memory is bounded by one batch and the vocabulary, not by the size of the repository."""
    store = IndexDir(index_dir)
    seconds: dict[str, float] = {}
    with store.writer_lock(options.lock_timeout):
        started_ns = time.time_ns()  # before any file is listed or read
        store.prune()
        t = time.perf_counter()
        skipped: Counter[str] = Counter()
        previous = _previous(store, root, options)
        listed: list[_Listed] | None = None
        if previous is not None:  # a first pass decides what to reuse; a fresh build needs none
            listed = _fingerprints(root, index_dir, options, skipped, previous.manifest)
            seconds["discover"] = time.perf_counter() - t
            on_progress(Progress("discover", len(listed), len(listed)))
            if not listed:
                raise EmptyRepository(f"no indexable files under {root}: check the path and its .gitignore")
            if _unchanged(previous.manifest, listed, options):
                seconds["history"] = _update_history(root, index_dir, options)
                return BuildReport(
                    str(index_dir), previous.path.name, False, len(listed), previous.manifest.chunks,
                    previous.manifest.chunks, 0, dict(sorted(skipped.items())), _invalid(listed), seconds,
                )
        t = time.perf_counter()
        with _writing(index_dir):
            tmp = store.new_generation()
            try:
                files, reused, invalid, again = _stream(root, index_dir, tmp, previous, listed, options, on_progress)
                if not files:
                    raise EmptyRepository(f"no indexable files under {root}: check the path and its .gitignore")
                # Both passes walk the same tree; a file that vanished in between counts once.
                skips = dict(sorted((skipped | again).items()))
                seconds["chunk"] = time.perf_counter() - t
                n_chunks = sum(e.n_chunks for e in files.values())
                on_progress(Progress("lexical", n_chunks, n_chunks))
                t = time.perf_counter()
                manifest = Manifest(
                    root=str(Path(root).resolve()),
                    built_at=datetime.now(UTC).isoformat(timespec="seconds"),
                    embedder=options.embedder,
                    chunking=options.chunking(),
                    selection=_selection_json(options.selection),
                    files=files,
                    chunks=n_chunks,
                    stats={"skipped": skips, "invalid_utf8": len(invalid), "invalid_utf8_files": invalid,
                           "scan_started_ns": started_ns},
                )
                (tmp / "manifest.json").write_text(manifest.to_json(), encoding="utf-8")
                gen = store.publish(tmp)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        seconds["write"] = time.perf_counter() - t
        seconds["history"] = _update_history(root, index_dir, options)
        on_progress(Progress("write", 1, 1))
        return BuildReport(
            str(index_dir), gen.name, True, len(files), n_chunks, reused, n_chunks - reused,
            skips, len(invalid), seconds,
        )


def _update_history(root: Path, index_dir: Path, options: BuildOptions) -> float:
    """Seconds spent bringing the commit history up to date (or removing it when turned off)."""
    t = time.perf_counter()
    if options.history:
        update_history(root, index_dir)
    else:
        remove_history(index_dir)
    return time.perf_counter() - t


@dataclass(frozen=True)
class _Listed:
    """A selected file as the first pass saw it: enough to decide what to reuse."""

    path: str
    sha: str
    size: int
    mtime_ns: int
    invalid_utf8: bool


def _fingerprints(
    root: Path, index_dir: Path, options: BuildOptions, skipped: Counter[str], manifest: Manifest
) -> list[_Listed]:
    """Every selected file's path and content hash. A file whose size and mtime are those the
    previous build recorded keeps its recorded hash unread, as git's index does, provided its
    mtime is older than that build's scan by more than `_RACY_NS`: an edit made after the file
    was read then necessarily moved its mtime (file times tick coarsely, so a file changed in the
    same tick as it was read could otherwise look unchanged). Other files are read, one at a time."""
    old = manifest.files
    started = manifest.stats.get("scan_started_ns")
    invalid = set(_paths(manifest.stats.get("invalid_utf8_files")))

    def must_read(f: Listing) -> bool:
        e = old.get(f.path)
        trusted = isinstance(started, int) and f.mtime_ns < started - _RACY_NS
        return not (trusted and e is not None and e.size == f.size and e.mtime_ns == f.mtime_ns)

    listed = []
    for f in iter_listed(root, options.selection, (Path(index_dir),), skipped, must_read):
        if isinstance(f, Listing):
            listed.append(_Listed(f.path, old[f.path].sha, f.size, f.mtime_ns, f.path in invalid))
        else:
            listed.append(_Listed(f.path, f.sha, f.size, f.mtime_ns, f.invalid_utf8))
    return listed


def _paths(value: object) -> list[str]:
    return [p for p in value if isinstance(p, str)] if isinstance(value, list) else []


def _invalid(listed: list[_Listed]) -> int:
    return sum(f.invalid_utf8 for f in listed)


@contextlib.contextmanager
def _writing(index_dir: Path) -> Iterator[None]:
    """A failed write (disk full, file size limit, permissions) becomes one clear IndexWriteError."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise IndexWriteError(
            f"cannot write the index at {index_dir} ({reason}): free disk space or pass another --index-dir, "
            "then run `bridge index` again; the previous index still answers"
        ) from exc


def _selection_json(selection: Selection) -> dict[str, object]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(selection).items()}


@dataclass(frozen=True)
class _Previous:
    """The live generation, when its chunks and terms can be reused (the terms are mapped, not read)."""

    path: Path
    manifest: Manifest
    corpus: TermCorpus


def _previous(store: IndexDir, root: Path, options: BuildOptions) -> _Previous | None:
    """The live generation's chunks and terms when they can be reused, else None."""
    if options.rebuild or not store.exists():
        return None
    try:
        gen = store.current()
        manifest = store.manifest(gen)
        if manifest.chunking != options.chunking() or manifest.root != str(Path(root).resolve()):
            return None
        ChunkTable(gen).close()  # the table must be there to copy rows from
        corpus = TermCorpus.load(gen / "lexical")
    except IndexingError:
        return None  # a damaged or foreign index is simply rebuilt from scratch
    if len(corpus) != manifest.chunks or not _ids_in_range(corpus):
        return None
    return _Previous(gen, manifest, corpus)


def _ids_in_range(corpus: TermCorpus) -> bool:
    """Every stored term id names a vocabulary entry (a damaged file must not be reused)."""
    if len(corpus.ids) == 0:
        return True
    ids = corpus.ids
    step = 8_000_000  # a slice at a time: bounded memory on a mapped file
    return all(ids[i : i + step].min() >= 0 and ids[i : i + step].max() < len(corpus.vocab) for i in range(0, len(ids), step))


def _unchanged(manifest: Manifest, files: list[_Listed], options: BuildOptions) -> bool:
    if manifest.embedder != options.embedder or manifest.selection != _selection_json(options.selection):
        return False
    if len(manifest.files) != len(files):
        return False
    return all((e := manifest.files.get(f.path)) is not None and e.sha == f.sha for f in files)


def _stream(
    root: Path,
    index_dir: Path,
    tmp: Path,
    previous: _Previous | None,
    listed: list[_Listed] | None,
    options: BuildOptions,
    on_progress: ProgressFn,
) -> tuple[dict[str, FileEntry], int, list[str], Counter[str]]:
    """Chunk and tokenise every file into the generation `tmp`, reusing unchanged files' rows and
    term ids from `previous`; only new and changed files are read (again). Returns the files'
    entries, the reused chunk count, the files with invalid UTF-8 and the skips."""
    old = previous.manifest.files if previous else {}
    corpus = previous.corpus if previous else None
    lexical = LexicalWriter(tmp / "lexical", corpus.vocab if corpus else ())
    chunks = ChunkWriter(tmp, previous.path if previous else None)
    entries: dict[str, FileEntry] = {}
    reused = 0
    invalid: list[str] = []  # paths of files with invalid UTF-8, in path order
    skipped: Counter[str] = Counter()
    run = _Reused(corpus, lexical) if corpus is not None else None
    try:
        for n, item in enumerate(_plan(root, index_dir, options, old, listed, skipped), 1):
            first = chunks.count
            if isinstance(item, _Listed):
                before = old[item.path]
                assert run is not None
                chunks.copy(before.first_chunk, before.n_chunks)
                run.add(before.first_chunk, before.n_chunks)
                reused += before.n_chunks
            else:
                if run is not None:
                    run.flush()  # the lexical writer takes documents in id order
                extra = path_terms(item.path)
                for c in chunk_file(item, options.target_tokens, options.max_tokens, options.overlap_lines):
                    chunks.add(c)
                    lexical.add_terms(terms(c.text) + extra)
            if item.invalid_utf8:
                invalid.append(item.path)
            entries[item.path] = FileEntry(item.sha, item.size, item.mtime_ns, first, chunks.count - first)
            if n % 50 == 0:
                on_progress(Progress("chunk", n, max(n, len(listed) if listed else n)))
        if run is not None:
            run.flush()
    finally:
        chunks.close()
    if listed is None:
        on_progress(Progress("discover", len(entries), len(entries)))
    on_progress(Progress("chunk", len(entries), len(entries)))
    lexical.finish()
    return entries, reused, invalid, skipped


class _Reused:
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


def _plan(
    root: Path,
    index_dir: Path,
    options: BuildOptions,
    old: dict[str, FileEntry],
    listed: list[_Listed] | None,
    skipped: Counter[str],
) -> Iterator[_Listed | SourceFile]:
    """Files in path order: a `_Listed` for a file to copy from the previous generation, a
    `SourceFile` (read now) for one to chunk. Both passes list files in the same order, so the
    files read now are merged with the first pass's list in one walk."""
    if listed is None:
        yield from iter_files(root, options.selection, (Path(index_dir),), skipped)
        return
    reuse = {f.path for f in listed if (e := old.get(f.path)) is not None and e.sha == f.sha}
    fresh = iter_files(root, options.selection, (Path(index_dir),), skipped, skip=reuse)
    pending = next(fresh, None)
    for f in listed:
        if f.path in reuse:
            yield f
            continue
        while pending is not None and pending.path != f.path and pending.path not in reuse:
            if pending.path < f.path:  # discover lists paths in plain string order
                yield pending  # appeared since the first pass
                pending = next(fresh, None)
            else:
                break
        if pending is not None and pending.path == f.path:
            yield pending
            pending = next(fresh, None)
        # else: gone since the first pass, like a file that vanishes while it is being listed
    while pending is not None:
        yield pending
        pending = next(fresh, None)


def fill_vectors(
    index_dir: Path,
    on_progress: ProgressFn = _noop,
    should_stop: StopFn = lambda: False,
    embedder: Embedder | None = None,
    batch_size: int = 64,
    checkpoint_seconds: float = 5.0,
    cache_path: Path | None = None,
) -> FillReport:
    """Embed the live generation's chunks that have no vector yet, publishing progress as it goes.

    `cache_path` puts the embedding cache elsewhere than the index folder, so that many indexes
    (e.g. one repository at many commits) share one cache.

    Vectors already in the cache are written at once; the rest are embedded in batches and the
    vector file is rewritten (atomically) every `checkpoint_seconds`, so searches use a growing
    share of dense vectors while this runs. The writer lock is held only while writing, so a
    re-index is never kept waiting; when one publishes a newer generation, this stops (its
    embeddings stay in the cache for the next fill). Stops early, keeping its work, on `should_stop()`.
    """
    from index.embed import EmbeddingCache, embed_with_cache, load_embedder

    store = IndexDir(index_dir)
    t0 = time.perf_counter()
    gen = store.current()
    manifest = store.manifest(gen)
    if manifest.embedder is None:
        return FillReport(0, manifest.chunks, 0, 0.0, True)
    if (gen / "vectors.faiss").is_file() and VectorIndex.load(gen / "vectors.faiss").count == manifest.chunks:
        # Already complete: do not load a second embedder just to find nothing to do. Opening and
        # closing the cache still folds back a write-ahead log that a killed run left behind.
        if store.embeddings_path.exists():
            EmbeddingCache(store.embeddings_path).close()
        return FillReport(manifest.chunks, manifest.chunks, 0, time.perf_counter() - t0, True)
    emb = embedder if embedder is not None else load_embedder(manifest.embedder, cache_dir=default_home() / "models")
    prepare = getattr(emb, "query_model", None)
    if callable(prepare):
        prepare()  # export the torch-free query model now, so the first search does not pay for it
    table = ChunkTable(gen)
    try:
        chunks = table.all()
    finally:
        table.close()
    hashes = [c.hash for c in chunks]
    cache = EmbeddingCache(cache_path or store.embeddings_path)
    superseded = False

    def checkpoint(have: dict[str, np.ndarray]) -> int:
        nonlocal superseded
        with store.writer_lock(timeout=600):
            if store.current() != gen:
                superseded = True
                return 0
            return _write_vectors(gen, emb, hashes, have)

    with _writing(index_dir):
        try:
            have = cache.get_many(emb.id, hashes)
            before = sum(h in have for h in hashes)
            checkpoint(have)
            todo = [(c.hash, c.text) for c in chunks if c.hash not in have]
            last, writing = time.perf_counter(), 0.0

            def progress(done: int, total: int) -> None:
                nonlocal last, writing
                on_progress(Progress("embed", before + done, len(chunks)))
                # A checkpoint rewrites the whole vector index (1.15M chunks, IVF: 28 s of CPU):
                # embed at least 4 times as long as the last one took, so writing stays under 20 %.
                if time.perf_counter() - last >= max(checkpoint_seconds, 4 * writing):
                    started = time.perf_counter()
                    checkpoint(have | cache.get_many(emb.id, [h for h, _ in todo]))
                    last = time.perf_counter()
                    writing = last - started

            stop = lambda: superseded or should_stop()
            if todo and not superseded:
                have.update(embed_with_cache(emb, cache, todo, batch_size, progress, stop))
            count = checkpoint(have) if not superseded else before
        finally:
            cache.close()
    return FillReport(count, len(chunks), count - before, time.perf_counter() - t0, count == len(chunks))


def _write_vectors(gen: Path, emb: Embedder, hashes: list[str], have: dict[str, np.ndarray]) -> int:
    ids = np.array([i for i, h in enumerate(hashes) if h in have], dtype=np.int64)
    vectors = np.stack([have[hashes[i]] for i in ids]) if len(ids) else np.zeros((0, emb.dim), np.float32)
    meta = gen / "vectors.json"
    tmp = meta.with_name("vectors.json.tmp")
    tmp.write_text(json.dumps({"embedder_id": emb.id, "dim": emb.dim}))
    tmp.replace(meta)
    VectorIndex.build(ids, vectors).save(gen / "vectors.faiss")
    return len(ids)
