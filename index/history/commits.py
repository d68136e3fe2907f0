"""The repository's own history as evidence: past commits like the question voted for their files.

A bug report often reads like the commit messages of earlier fixes to the same code ("fix
pretty printing of Matrix", "autodoc: handle partial methods"). So the messages (subject and
body) of the commits reachable from the indexed HEAD get a small BM25 index of their own, and
the VOTERS commits most similar to a question vote for the files they touched.

Each subject is also embedded (index/history/subjects.py) when the index is built with a model, so
that a report's title finds past commits that say the same thing in other words. A first index
leaves that to `fill_subjects`, which runs with the chunk vectors after the index is published:
MiniLM over sympy's 17k subjects takes 7 s that the first search need not wait for.

Bounded and incremental: at most MAX_COMMITS commits, newest first (read by index/history/git_log.py,
which leaves out merges and mass changes and names every file as at HEAD); a re-index whose HEAD
descends from the last one reads only the new commits and reuses the terms and subject vectors
of the rest. The history lives in INDEX_DIR/history/, next to the generations, behind its own
CURRENT pointer, so a reader never sees a half-written one.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from index.errors import CorruptIndex
from index.history.commit_text import CommitText
from index.history.git_log import MAX_FILES, PastCommit, git_location, is_ancestor, read_commits, renamed_paths
from index.history.subjects import SUBJECT_FILES, SubjectEncoder, SubjectVectors
from index.store import CorpusBuilder, LexicalIndex, TermCorpus
from index.tokenize import terms

__all__ = [
    "MAX_COMMITS",
    "VOTERS",
    "History",
    "HistoryReport",
    "LiveHistory",
    "fill_subjects",
    "remove_history",
    "update_from_git",
    "update_history",
    "vote_scores",
]

MAX_COMMITS = 20_000
VOTERS = 30
FOLDER = "history"
_POINTER = "CURRENT"
_META = "commits.json"
_FORMAT = 2  # 2: paths named as at HEAD (renames followed)


@dataclass(frozen=True)
class HistoryReport:
    head: str | None  # None: not a git repository, or history turned off
    commits: int
    new_commits: int
    seconds: float


def update_history(root: Path, index_dir: Path, limit: int = MAX_COMMITS,
                   subjects: SubjectEncoder | None = None, later: bool = False) -> HistoryReport:
    """Bring INDEX_DIR/history up to the HEAD of the git repository holding `root`; outside git,
    remove it (the signal then simply has no votes). `subjects` embeds the commit subjects (None:
    none are kept); with `later`, subjects that have no earlier vectors to extend are left to
    `fill_subjects`."""
    where = git_location(root)
    if where is None:
        remove_history(index_dir)
        return HistoryReport(None, 0, 0, 0.0)
    git_dir, head, prefix = where
    return update_from_git(git_dir, head, index_dir, prefix, limit, subjects, later)


def update_from_git(git_dir: Path, head: str, index_dir: Path, prefix: str = "", limit: int = MAX_COMMITS,
                    subjects: SubjectEncoder | None = None, later: bool = False) -> HistoryReport:
    """The history of `head`'s ancestors only: a benchmark tree at an old commit sees no later fix."""
    started = time.perf_counter()
    settings: dict[str, object] = {"format": _FORMAT, "prefix": prefix, "limit": limit, "max_files": MAX_FILES}
    old = _load_state(index_dir)
    if old is not None and (old.settings != settings or not is_ancestor(git_dir, old.head, head)):
        old = None  # other settings, or HEAD moved to another line of history: read it all again
    waiting = later and subjects is not None and old is not None and old.subjects is None
    if old is not None and old.head == head and (_same_subjects(old.subjects, subjects) or waiting):
        return HistoryReport(head, len(old.commits), 0, time.perf_counter() - started)
    new, renamed = ([], {}) if old is not None and old.head == head else read_commits(
        git_dir, head, limit, prefix, since=old.head if old else None)
    builder = CorpusBuilder(old.corpus.vocab if old else ())
    commits = []
    for read in new[:limit]:
        builder.add_terms(terms(read.message))
        commits.append(read.commit)
    fresh = len(commits)
    if old is not None:
        for i, commit in enumerate(old.commits[: limit - len(commits)]):
            builder.add_ids(old.corpus.doc(i))
            commits.append(renamed_paths(commit, renamed, prefix))
    vectors = None
    if subjects is not None:
        reused = old.subjects if old is not None and _same_subjects(old.subjects, subjects) else None
        if reused is not None or not later:
            vectors = SubjectVectors.extend(subjects, [c.subject for c in commits], fresh, reused)
    _write(index_dir, {"head": head, "settings": settings}, commits, builder.build(), vectors)
    return HistoryReport(head, len(commits), len(new), time.perf_counter() - started)


def fill_subjects(index_dir: Path, subjects: SubjectEncoder, lock: AbstractContextManager[object],
                  on_progress: Callable[[int, int], None] = lambda _done, _total: None) -> int:
    """Embed the stored history's commit subjects where a build left them for later (a first
    index publishes before any model is loaded: index/build/pipeline.py). The vectors are made outside
    `lock` (the index's writer lock) and written under it, unless a re-index wrote a newer history
    meanwhile (the next fill embeds that one). Returns how many subjects were embedded."""
    made_from = _current(index_dir)
    # Every fill asks (a watched index: after each re-index); reading sympy's whole history to find
    # its subjects already there took 0.13-0.19 s, their small description file takes nothing.
    if made_from is None or SubjectVectors.stored_spec(made_from) == subjects.spec:
        return 0
    state = _load_state(index_dir)
    if state is None or _same_subjects(state.subjects, subjects):
        return 0
    n = len(state.commits)
    on_progress(0, n)
    vectors = SubjectVectors.extend(subjects, [c.subject for c in state.commits], n, None)
    with lock:
        if _current(index_dir) != made_from:
            return 0
        _publish(index_dir, _with_subjects(made_from, vectors))
    on_progress(n, n)
    return n


def _same_subjects(stored: SubjectVectors | None, wanted: SubjectEncoder | None) -> bool:
    """Whether the stored subject vectors are what `wanted` would make (both absent counts)."""
    if wanted is None:
        return stored is None
    return stored is not None and stored.spec == wanted.spec


def remove_history(index_dir: Path) -> None:
    shutil.rmtree(Path(index_dir) / FOLDER, ignore_errors=True)


def _current(index_dir: Path) -> Path | None:
    folder = Path(index_dir) / FOLDER
    try:
        name = (folder / _POINTER).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return folder / name if name and "/" not in name and (folder / name).is_dir() else None


@dataclass(frozen=True)
class _State:
    head: str
    settings: dict[str, object]
    commits: tuple[PastCommit, ...]
    corpus: TermCorpus
    subjects: SubjectVectors | None


def _load_state(index_dir: Path) -> _State | None:
    """The stored state, or None when there is none or it cannot be read (then it is rebuilt)."""
    current = _current(index_dir)
    if current is None:
        return None
    try:
        meta = json.loads((current / _META).read_text(encoding="utf-8"))
        commits = tuple(PastCommit(c[0], int(c[1]), c[2], tuple(c[3])) for c in meta["commits"])
        corpus = TermCorpus.load(current)
        head, settings = str(meta["head"]), dict(meta["settings"])
    except (OSError, ValueError, KeyError, IndexError, TypeError, CorruptIndex):
        return None
    if len(corpus) != len(commits):
        return None
    return _State(head, settings, commits, corpus, SubjectVectors.load(current, len(commits)))


def _write(index_dir: Path, state: Mapping[str, object], commits: Sequence[PastCommit], corpus: TermCorpus,
           subjects: SubjectVectors | None = None) -> None:
    def fill(target: Path) -> None:
        rows = [[c.sha, c.time, c.subject, list(c.files)] for c in commits]
        (target / _META).write_text(json.dumps({**state, "commits": rows}), encoding="utf-8")
        corpus.save(target)
        LexicalIndex.build(corpus).save(target)
        if subjects is not None:
            subjects.save(target)

    _publish(index_dir, fill)


def _with_subjects(source: Path, subjects: SubjectVectors) -> Callable[[Path], None]:
    """A new version's content: `source`'s files, linked (they are never rewritten in place),
    and `subjects` instead of any it had: sympy's BM25 over 20k commits is not built again."""
    def fill(target: Path) -> None:
        for path in source.iterdir():
            if path.is_file() and path.name not in SUBJECT_FILES:
                try:
                    os.link(path, target / path.name)
                except OSError:
                    shutil.copy2(path, target / path.name)
        subjects.save(target)

    return fill


def _publish(index_dir: Path, fill: Callable[[Path], None]) -> None:
    """A new history version in its own folder, made current by one atomic rename of the pointer;
    the versions before it are removed."""
    folder = Path(index_dir) / FOLDER
    name = f"h{time.time_ns():020d}-{os.getpid()}"
    target = folder / name
    target.mkdir(parents=True)
    fill(target)
    pointer = folder / (_POINTER + ".tmp")
    pointer.write_text(name + "\n", encoding="utf-8")
    os.replace(pointer, folder / _POINTER)
    for stale in folder.iterdir():
        if stale.is_dir() and stale.name != name:
            shutil.rmtree(stale, ignore_errors=True)


class History:
    """The stored commits of one index and their BM25 index, for votes at query time."""

    def __init__(self, commits: Sequence[PastCommit], lexical: LexicalIndex, where: Path,
                 subjects: SubjectVectors | None = None) -> None:
        self.commits = tuple(commits)
        self.lexical = lexical
        self.where = where
        self.subjects = subjects  # the subjects' vectors, when the index was built with a model
        self._lock = threading.Lock()
        self._text: CommitText | None = None

    @staticmethod
    def load(index_dir: Path) -> History | None:
        """The current history, or None when there is none (no git, `--no-history`), it is damaged,
        or an earlier version wrote it (its paths are named otherwise; `bridge index` reads it again)."""
        current = _current(index_dir)
        if current is None:
            return None
        try:
            meta = json.loads((current / _META).read_text(encoding="utf-8"))
            if meta["settings"]["format"] != _FORMAT:
                return None
            commits = [PastCommit(c[0], int(c[1]), c[2], tuple(c[3])) for c in meta["commits"]]
            lexical = LexicalIndex.load(current)
        except (OSError, ValueError, KeyError, IndexError, TypeError, CorruptIndex):
            return None
        if lexical.n_docs != len(commits):
            return None
        return History(commits, lexical, current, SubjectVectors.load(current, len(commits)))

    def similar(self, query_terms: Sequence[str], k: int = VOTERS) -> list[tuple[int, float]]:
        """The k commits whose messages best match the query terms: (commit number, BM25 score)."""
        return self.lexical.top(query_terms, k) if self.commits else []

    def votes(self, query_terms: Sequence[str], k: int = VOTERS) -> dict[str, list[tuple[int, float]]]:
        """path -> the similar commits that touched it, with each commit's vote (its score shared
        among its files by the square root of their number, so a focused fix counts more)."""
        out: dict[str, list[tuple[int, float]]] = {}
        for number, score in self.similar(query_terms, k):
            files = self.commits[number].files
            share = score / math.sqrt(len(files))
            for path in files:
                out.setdefault(path, []).append((number, share))
        return out

    def commit_text(self) -> CommitText | None:
        """Every touched file's commit text (index/history/commit_text.py), built on first use from the
        stored message terms; None when those cannot be read."""
        with self._lock:
            if self._text is None:
                try:
                    corpus = TermCorpus.load(self.where)
                except CorruptIndex:
                    return None
                if len(corpus) != len(self.commits):
                    return None
                self._text = CommitText.build([c.files for c in self.commits], corpus)
            return self._text

    def describe(self, commits: Sequence[tuple[int, float]], shown: int = 3, kind: str = "similar past",
                 why: str = "") -> str:
        """`3 similar past commits: 1a2b3c4d5e fix X; ...` for a hit's evidence (`kind` before the
        noun, `why` after it); past `shown` commits, `9 similar past commits, the best 3: ...`."""
        best = sorted(commits, key=lambda c: -c[1])[:shown]
        named = "; ".join(f"{self.commits[i].sha[:10]} {self.commits[i].subject}" for i, _ in best)
        noun = "commit" if len(commits) == 1 else "commits"
        some = f", the best {len(best)}" if len(best) < len(commits) else ""
        return f"{len(commits)} {kind} {noun}{why}{some}: {named}"


class LiveHistory:
    """The current history of one index folder, reloaded when a re-index rewrites it (the CURRENT
    pointer's mtime changes); safe to share between threads."""

    def __init__(self, index_dir: Path) -> None:
        self._pointer = Path(index_dir) / FOLDER / _POINTER
        self._index_dir = Path(index_dir)
        self._lock = threading.Lock()
        self._loaded: tuple[int, History | None] | None = None

    def get(self) -> History | None:
        try:
            mtime = self._pointer.stat().st_mtime_ns
        except OSError:
            return None
        with self._lock:
            if self._loaded is None or self._loaded[0] != mtime:
                self._loaded = (mtime, History.load(self._index_dir))
            return self._loaded[1]


def vote_scores(votes: Mapping[str, Sequence[tuple[int, float]]], path_numbers: Mapping[str, int],
                n_files: int) -> np.ndarray:
    """Summed votes per file number (0 for files no similar commit touched)."""
    out = np.zeros(n_files)
    for path, commits in votes.items():
        i = path_numbers.get(path)
        if i is not None:
            out[i] = sum(score for _, score in commits)
    return out
