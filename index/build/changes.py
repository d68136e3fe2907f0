"""What changed since the live generation: which of its rows and terms a re-index can reuse.

A first pass lists the tree and fingerprints every file (`fingerprints`: a file whose stat is
the recorded one keeps its recorded hash unread, git's racy-clean rule); `previous_generation`
says whether the live generation's rows and term ids can be reused at all; `plan` merges the
files to reuse with those read now, in path order, for the single-segment build (index/build/pipeline.py);
a delta re-index (index/build/delta.py) takes the changed files the first pass already read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from index.build.delta import in_base
from index.files import Listing, iter_files, iter_listed
from index.errors import IndexingError
from index.store import TermCorpus
from index.store import DELTA, SegmentInfo, load_segments
from index.store import ChunkTable, FileEntry, IndexDir, Manifest
from index.types import Selection, SourceFile

__all__ = ["Listed", "Previous", "fingerprints", "ids_in_range", "invalid_count", "plan", "previous_generation",
           "selection_from_json", "selection_json", "unchanged"]

_RACY_NS = 2_000_000_000  # a file changed this close before a scan is read again by the next one
# Text of changed files the first pass keeps for a delta re-index, so it need not walk the tree
# again to read them (a walk of 54k files is about 2 s); past this, the second walk reads them.
_KEEP_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Listed:
    """A selected file as the first pass saw it: enough to decide what to reuse."""

    path: str
    sha: str
    size: int
    mtime_ns: int
    invalid_utf8: bool


def fingerprints(
    root: Path, index_dir: Path, selection: Selection, skipped: Counter[str], manifest: Manifest
) -> tuple[list[Listed], dict[str, SourceFile] | None]:
    """Every selected file's path and content hash. A file whose size and mtime are those the
    previous build recorded keeps its recorded hash unread, as git's index does, provided its
    mtime is older than that build's scan by more than `_RACY_NS`: an edit made after the file
    was read then necessarily moved its mtime (file times tick coarsely, so a file changed in the
    same tick as it was read could otherwise look unchanged). Other files are read, one at a time;
    those that changed are returned too, up to `_KEEP_BYTES` of text (else None)."""
    old = manifest.files
    started = manifest.stats.get("scan_started_ns")
    invalid = set(_paths(manifest.stats.get("invalid_utf8_files")))

    def must_read(f: Listing) -> bool:
        e = old.get(f.path)
        trusted = isinstance(started, int) and f.mtime_ns < started - _RACY_NS
        return not (trusted and e is not None and e.size == f.size and e.mtime_ns == f.mtime_ns)

    listed = []
    read: dict[str, SourceFile] | None = {}
    kept = 0
    for f in iter_listed(root, selection, (Path(index_dir),), skipped, must_read):
        if isinstance(f, Listing):
            listed.append(Listed(f.path, old[f.path].sha, f.size, f.mtime_ns, f.path in invalid))
            continue
        listed.append(Listed(f.path, f.sha, f.size, f.mtime_ns, f.invalid_utf8))
        if read is not None and ((e := old.get(f.path)) is None or e.sha != f.sha):
            kept += len(f.text)
            if kept > _KEEP_BYTES:
                read = None
            else:
                read[f.path] = f
    return listed, read


def _paths(value: object) -> list[str]:
    return [p for p in value if isinstance(p, str)] if isinstance(value, list) else []


def invalid_count(listed: list[Listed]) -> int:
    return sum(f.invalid_utf8 for f in listed)


def selection_json(selection: Selection) -> dict[str, object]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(selection).items()}


def selection_from_json(sel: Mapping[str, Any]) -> Selection:
    """The Selection a manifest recorded with `selection_json` (defaults for what it lacks)."""
    default = Selection()
    return Selection(
        max_file_bytes=int(sel.get("max_file_bytes", default.max_file_bytes)),
        exclude=tuple(sel.get("exclude", ())),
        include=tuple(sel.get("include", ())),
        skip_secrets=bool(sel.get("skip_secrets", True)),
    )


@dataclass(frozen=True)
class Previous:
    """The live generation, when its chunks and terms can be reused (the terms are mapped, not read)."""

    path: Path
    manifest: Manifest
    corpus: TermCorpus  # the base segment's terms
    segments: SegmentInfo | None  # None: a single-segment generation

    @property
    def n_base(self) -> int:
        return self.segments.n_base if self.segments is not None else self.manifest.chunks

    @property
    def reusable(self) -> dict[str, FileEntry]:
        """Files whose rows and terms a single-segment build copies: those in the base segment
        (a delta's files are read again when a delta is compacted)."""
        if self.segments is None:
            return self.manifest.files
        return {p: e for p, e in self.manifest.files.items() if in_base(e, self.n_base)}


def previous_generation(store: IndexDir, root: Path, rebuild: bool, chunking: dict[str, int]) -> Previous | None:
    """The live generation's chunks and terms when they can be reused, else None."""
    if rebuild or not store.exists():
        return None
    try:
        gen = store.current()
        manifest = store.manifest(gen)
        if manifest.chunking != chunking or manifest.root != str(Path(root).resolve()):
            return None
        ChunkTable(gen).close()  # the table must be there to copy rows from
        corpus = TermCorpus.load(gen / "lexical")
        segments = load_segments(gen)
        if segments is not None:
            ChunkTable(gen / DELTA).close()
            if len(TermCorpus.load(gen / DELTA / "lexical")) != segments.n_delta:
                return None
    except IndexingError:
        return None  # a damaged or foreign index is simply rebuilt from scratch
    n_base = segments.n_base if segments is not None else manifest.chunks
    if len(corpus) != n_base:
        return None
    return Previous(gen, manifest, corpus, segments)


def ids_in_range(corpus: TermCorpus) -> bool:
    """Every stored term id names a vocabulary entry (a damaged file must not be reused)."""
    if len(corpus.ids) == 0:
        return True
    ids = corpus.ids
    step = 8_000_000  # a slice at a time: bounded memory on a mapped file
    return all(ids[i : i + step].min() >= 0 and ids[i : i + step].max() < len(corpus.vocab) for i in range(0, len(ids), step))


def unchanged(manifest: Manifest, files: list[Listed], embedder: str | None, selection: Selection) -> bool:
    if manifest.embedder != embedder or manifest.selection != selection_json(selection):
        return False
    if len(manifest.files) != len(files):
        return False
    return all((e := manifest.files.get(f.path)) is not None and e.sha == f.sha for f in files)


def plan(
    root: Path,
    index_dir: Path,
    selection: Selection,
    old: dict[str, FileEntry],
    listed: list[Listed] | None,
    skipped: Counter[str],
) -> Iterator[Listed | SourceFile]:
    """Files in path order: a `Listed` for a file to copy from the previous generation, a
    `SourceFile` (read now) for one to chunk. Both passes list files in the same order, so the
    files read now are merged with the first pass's list in one walk."""
    if listed is None:
        yield from iter_files(root, selection, (Path(index_dir),), skipped)
        return
    reuse = {f.path for f in listed if (e := old.get(f.path)) is not None and e.sha == f.sha}
    fresh = iter_files(root, selection, (Path(index_dir),), skipped, skip=reuse)
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
