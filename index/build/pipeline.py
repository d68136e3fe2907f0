"""The write path: discover → chunk → lexical → publish (vectors follow: index/build/fill.py).

Work is reused by content: a file whose bytes did not change keeps its chunks and their BM25
terms from the previous generation, and embeddings come from a cache keyed by (embedder id,
chunk hash), so re-indexing after an edit re-chunks, re-tokenises and re-embeds only that file.
A re-index writes a delta generation (index/build/delta.py): the previous base segment hard-linked,
the changed files' chunks in a small delta, the base chunks they replace masked; only when the
delta passes `max_delta` of the base (or on `rebuild`) is a single segment written, its BM25
rebuilt whole from the stored term ids (index/store/postings.py) in memory bounded by a batch.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from index.build.changes import (
    Listed,
    Previous,
    fingerprints,
    ids_in_range,
    invalid_count,
    plan,
    previous_generation,
    selection_json,
    unchanged,
)
from index.files import chunk_file
from index.build.delta import MAX_FRACTION, DeltaResult, deleted_base, write_delta
from index.embed import resolve_spec
from index.errors import EmptyRepository, writing
from index.history import HistoryReport, remove_history, update_history
from index.store import LexicalWriter, ReusedSlices
from index.store import (
    FORMAT_VERSION,
    SEGMENTED_FORMAT,
    ChunkWriter,
    FileEntry,
    IndexDir,
    Manifest,
)
from index.history import SubjectEncoder, subject_spec
from index.tokenize import path_terms, terms
from index.types import Progress, Selection, SourceFile

__all__ = ["BuildOptions", "BuildReport", "build_index"]

ProgressFn = Callable[[Progress], None]
StopFn = Callable[[], bool]


@dataclass(frozen=True)
class BuildOptions:
    selection: Selection = field(default_factory=Selection)
    target_tokens: int = 250
    max_tokens: int = 400
    overlap_lines: int = 3
    embedder: str | None = "minilm"  # spec for index.embed.load_embedder; None: lexical only
    rebuild: bool = False  # ignore the previous generation's chunks
    # A re-index writes a delta segment over the previous base (index/build/delta.py) until the delta
    # and the deleted chunks pass this share of the base; 0: always a single segment.
    max_delta: float = MAX_FRACTION
    history: bool = True  # index the git history as evidence (index/history/commits.py); off: none is kept
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
    history: HistoryReport | None = None  # None: history turned off (and removed); `.head` None: not git


def _noop(_: Progress) -> None:
    pass


def build_index(
    root: Path, index_dir: Path, options: BuildOptions = BuildOptions(), on_progress: ProgressFn = _noop
) -> BuildReport:
    """Write a new generation for `root` (lexical part only; index/build/fill.py adds the vectors).

    Streams: files are read one at a time, their chunks and terms go to the new generation's
    files as they are made (index/store/postings.py, `ChunkWriter`), and an unchanged file's chunks and
    terms are copied from the previous generation without being read back into Python objects.
    Memory is bounded by one batch and the vocabulary, not by the size of the repository."""
    store = IndexDir(index_dir)
    seconds: dict[str, float] = {}
    with store.writer_lock(options.lock_timeout):
        started_ns = time.time_ns()  # before any file is listed or read
        store.prune()
        t = time.perf_counter()
        skipped: Counter[str] = Counter()
        previous = previous_generation(store, root, options.rebuild, options.chunking())
        options = replace(options, embedder=resolve_spec(options.embedder, previous.manifest.embedder if previous else None))
        listed: list[Listed] | None = None
        read: dict[str, SourceFile] | None = {}  # changed files the first pass read; None: too many kept
        if previous is not None:  # a first pass decides what to reuse; a fresh build needs none
            listed, read = fingerprints(root, index_dir, options.selection, skipped, previous.manifest)
            seconds["discover"] = time.perf_counter() - t
            on_progress(Progress("discover", len(listed), len(listed)))
            if not listed:
                raise EmptyRepository(f"no indexable files under {root}: check the path and its .gitignore")
            if unchanged(previous.manifest, listed, options.embedder, options.selection):
                history = _update_history(root, index_dir, options, seconds)
                return BuildReport(
                    str(index_dir), previous.path.name, False, len(listed), previous.manifest.chunks,
                    previous.manifest.chunks, 0, dict(sorted(skipped.items())), invalid_count(listed), seconds, history,
                )
        t = time.perf_counter()
        with writing(index_dir):
            tmp = store.new_generation()
            try:
                delta = _try_delta(root, index_dir, tmp, previous, listed, read, options, on_progress)
                if delta is not None:
                    files, reused, invalid, again = delta
                else:
                    if any(tmp.iterdir()):  # a declined delta's files: start the generation afresh
                        shutil.rmtree(tmp)
                        tmp.mkdir()
                    if previous is not None and not ids_in_range(previous.corpus):
                        previous = None  # a damaged base is not reused: rebuilt from the files
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
                    selection=selection_json(options.selection),
                    files=files,
                    chunks=n_chunks,
                    stats={"skipped": skips, "invalid_utf8": len(invalid), "invalid_utf8_files": invalid,
                           "scan_started_ns": started_ns},
                    format_version=SEGMENTED_FORMAT if delta is not None else FORMAT_VERSION,
                )
                (tmp / "manifest.json").write_text(manifest.to_json(), encoding="utf-8")
                gen = store.publish(tmp)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        seconds["write"] = time.perf_counter() - t
        history = _update_history(root, index_dir, options, seconds)
        on_progress(Progress("write", 1, 1))
        return BuildReport(
            str(index_dir), gen.name, True, len(files), n_chunks, reused, n_chunks - reused,
            skips, len(invalid), seconds, history,
        )


def _update_history(root: Path, index_dir: Path, options: BuildOptions, seconds: dict[str, float]) -> HistoryReport | None:
    """Bring the commit history up to date (None: removed, as turned off); its time goes in `seconds`."""
    t = time.perf_counter()
    report = None
    if options.history:
        spec = subject_spec(options.embedder)
        # Subjects with no earlier vectors to extend wait for fill_vectors (index/build/fill.py).
        report = update_history(root, index_dir, subjects=SubjectEncoder(spec) if spec else None, later=True)
    else:
        remove_history(index_dir)
    seconds["history"] = time.perf_counter() - t
    return report


def _try_delta(
    root: Path,
    index_dir: Path,
    tmp: Path,
    previous: Previous | None,
    listed: list[Listed] | None,
    read: dict[str, SourceFile] | None,
    options: BuildOptions,
    on_progress: ProgressFn,
) -> tuple[dict[str, FileEntry], int, list[str], Counter[str]] | None:
    """The generation `tmp` as the previous base plus a delta (index/build/delta.py), or None when a
    single segment is due: a first or forced build, a changed chunking, or a delta
    past `options.max_delta` of the base."""
    if previous is None or listed is None or options.max_delta <= 0:
        return None
    old = previous.manifest.files
    kept = [f.path for f in listed if (e := old.get(f.path)) is not None and e.sha == f.sha]
    kept_set = set(kept)
    deleted = deleted_base(previous.manifest, previous.segments, kept_set)
    skipped: Counter[str] = Counter()
    items: Iterable[Listed | SourceFile]
    if read is not None:  # the first pass read every changed file: no second walk
        items = (f if f.path in kept_set else read[f.path] for f in listed)
    else:
        items = plan(root, index_dir, options.selection, old, listed, skipped)
    result: DeltaResult | None = write_delta(
        tmp, previous.path, previous.manifest, previous.corpus, previous.segments, items, deleted,
        options.chunking(), options.max_delta, on_progress,
    )
    if result is None:
        return None
    return result.entries, result.reused, result.invalid, skipped


def _stream(
    root: Path,
    index_dir: Path,
    tmp: Path,
    previous: Previous | None,
    listed: list[Listed] | None,
    options: BuildOptions,
    on_progress: ProgressFn,
) -> tuple[dict[str, FileEntry], int, list[str], Counter[str]]:
    """Chunk and tokenise every file into the generation `tmp`, reusing unchanged files' rows and
    term ids from `previous`; only new and changed files are read (again). Returns the files'
    entries, the reused chunk count, the files with invalid UTF-8 and the skips."""
    old = previous.reusable if previous else {}
    corpus = previous.corpus if previous else None
    lexical = LexicalWriter(tmp / "lexical", corpus.vocab if corpus else ())
    chunks = ChunkWriter(tmp, previous.path if previous else None)
    entries: dict[str, FileEntry] = {}
    reused = 0
    invalid: list[str] = []  # paths of files with invalid UTF-8, in path order
    skipped: Counter[str] = Counter()
    run = ReusedSlices(corpus, lexical) if corpus is not None else None
    try:
        for n, item in enumerate(plan(root, index_dir, options.selection, old, listed, skipped), 1):
            first = chunks.count
            if isinstance(item, Listed):
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
