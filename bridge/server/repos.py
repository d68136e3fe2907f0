"""The repositories one server serves: each one's index opened (or built), watched and searched.

Search answers from the live index generation while a re-index writes the next one (generations
are immutable), so a re-index never blocks or fails a search; results carry `built_at` and
`stale_files` to say how fresh they are.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from bridge.errors import ServeError, ToolInputError
from bridge.extras import DENSE_MODULES, dense_missing, installed
from bridge.server.memory import limit_arenas, trim
from bridge.server.spec import RepoSpec, served_names
from index.build import BuildOptions, BuildReport, LiveIndex, build_index, selection_from_json
from index.errors import IndexingError
from index.files import resolve_path
from index.milvus import MilvusStore, build_milvus
from index.search import Searcher, lexical_only
from index.store import IndexDir, Manifest, default_index_dir
from index.types import Progress, Selection

__all__ = ["Repo", "RepoSet", "RepoSpec", "RepoStatus", "open_repo", "open_repos", "options_from_manifest"]

EventFn = Callable[[str, str, object], None]  # (repo name, "build" | "fill" | "error" | "notice", report, exception or text)
ProgressFn = Callable[[str, Progress], None]  # (repo name, progress of an initial build)


@dataclass(frozen=True)
class RepoStatus:
    reindexing: bool
    watching: bool
    last_error: str | None


def options_from_manifest(manifest: Manifest) -> BuildOptions:
    """The build settings an existing index was made with, so a re-index keeps them."""
    selection = selection_from_json(manifest.selection)
    chunking = manifest.chunking
    defaults = BuildOptions()
    return BuildOptions(
        selection=selection,
        target_tokens=chunking.get("target_tokens", defaults.target_tokens),
        max_tokens=chunking.get("max_tokens", defaults.max_tokens),
        overlap_lines=chunking.get("overlap_lines", defaults.overlap_lines),
        embedder=manifest.embedder,
    )


class _TrackedLiveIndex(LiveIndex):
    """A LiveIndex that counts running rebuilds, so status can say a re-index is under way."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._running = 0
        self._count_lock = threading.Lock()

    def build_now(self) -> BuildReport:
        with self._count_lock:
            self._running += 1
        try:
            return super().build_now()
        finally:
            with self._count_lock:
                self._running -= 1

    @property
    def rebuilding(self) -> bool:
        return self._running > 0


class _MilvusWriter:
    """`refresh_index` on a replica over Milvus: one build into a new collection, then the alias
    moves and every replica follows. Replicas do not watch files: one writer per repository
    (docs/milvus.md) keeps the index fresh."""

    def __init__(self, root: Path, store: MilvusStore, options: BuildOptions, notify: Callable[[str, object], None]) -> None:
        self.root, self.store, self.options, self._notify = root, store, options, notify
        self._running = 0
        self._lock = threading.Lock()

    @property
    def rebuilding(self) -> bool:
        return self._running > 0

    def start(self, watch: bool) -> None:
        pass  # nothing runs in the background

    def stop(self) -> None:
        pass

    def build_now(self) -> BuildReport:
        with self._lock:
            self._running += 1
        try:
            o = self.options
            name, changed, manifest, seconds = build_milvus(
                self.root, self.store, o.selection, (o.target_tokens, o.max_tokens, o.overlap_lines), o.embedder
            )
        except IndexingError as exc:
            self._notify("error", exc)
            raise
        finally:
            with self._lock:
                self._running -= 1
        skipped = manifest.stats.get("skipped", {})
        report = BuildReport(
            self.store.location, name, changed, len(manifest.files), manifest.chunks,
            0 if changed else manifest.chunks, manifest.chunks if changed else 0,
            dict(skipped) if isinstance(skipped, dict) else {}, int(str(manifest.stats.get("invalid_utf8", 0))), seconds,
        )
        self._notify("build", report)
        return report


@dataclass
class Repo:
    """One served repository. Thread-safe: tools call it from many worker threads at once."""

    name: str
    root: Path
    index_dir: Path
    options: BuildOptions
    searcher: Searcher
    live: _TrackedLiveIndex | _MilvusWriter
    watching: bool
    notify: Callable[[str, object], None] = lambda *_: None  # the same events the live index reports
    last_error: str | None = None
    _threads: list[threading.Thread] = field(default_factory=list)

    @property
    def selection(self) -> Selection:
        return self.options.selection

    def resolve(self, user_path: str) -> Path:
        """The real file behind a user's path, under the same rules as the index (or PathNotAllowed)."""
        return resolve_path(self.root, user_path, self.selection, (self.index_dir,), self.searcher.manifest.files)

    def refresh(self) -> BuildReport:
        """Re-index now (incremental); searches keep answering from the previous index meanwhile."""
        report = self.live.build_now()
        self.searcher.refresh()
        return report

    def note(self, kind: str, value: object) -> None:
        """Remember the last error of the background work until a build succeeds."""
        if kind == "error":
            self.last_error = str(value)
        elif kind == "build":
            self.last_error = None
        if kind in ("build", "fill"):
            # Here, on the thread that did the work, not in the next search.
            with contextlib.suppress(IndexingError):  # a search will report it
                self.searcher.warm()
            trim()  # the previous generation's memory is free now

    def status(self) -> RepoStatus:
        return RepoStatus(self.live.rebuilding, self.watching, self.last_error)

    def catch_up(self) -> None:
        """Re-index in the background: files may have changed while nobody was watching."""
        thread = threading.Thread(target=self._catch_up, name=f"bridge-catch-up-{self.name}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def warm_up(self) -> None:
        """Load the query embedder in the background, so the first hybrid search is not the slow one."""
        thread = threading.Thread(target=self._warm_up, name=f"bridge-warm-up-{self.name}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _warm_up(self) -> None:
        from index.errors import IndexingError

        try:
            self.searcher.search("warm up", k=1, mode="hybrid")
        except IndexingError as exc:
            self.notify("error", exc)

    def _catch_up(self) -> None:
        from index.errors import IndexingError

        try:
            self.live.build_now()
        except IndexingError as exc:
            self.notify("error", exc)

    def close(self) -> None:
        self.live.stop()
        for thread in self._threads:
            thread.join(10.0)


def open_repo(
    spec: RepoSpec,
    name: str,
    watch: bool = True,
    on_event: EventFn = lambda *_: None,
    on_progress: ProgressFn = lambda *_: None,
) -> Repo:
    """Open the index of `spec.root`, building it first (lexical part, synchronously) if missing.

    Vectors are then filled in on a background thread, and with `watch` the repository is
    re-indexed when files change (plus once at start, for changes made while not serving).
    """
    root = Path(os.path.realpath(spec.root.expanduser()))
    if not root.is_dir():
        raise ServeError(f"no folder at {spec.root}: pass the repository root with --repo")
    if spec.milvus_uri:
        return _open_milvus_repo(spec, root, name, on_event)
    index_dir = (spec.index_dir.expanduser().resolve() if spec.index_dir else default_index_dir(root))
    store = IndexDir(index_dir)
    existed = store.exists()
    if existed:
        manifest = store.manifest()
        if manifest.root != str(root):
            raise ServeError(
                f"index at {index_dir} belongs to {manifest.root}, not {root}: pass that repository or another --index-dir"
            )
        options = options_from_manifest(manifest)
    else:
        # A new index gets MiniLM vectors when the dense extra is installed, BM25 alone otherwise.
        dense = all(installed(m) for m in DENSE_MODULES)
        options = BuildOptions(selection=spec.selection or Selection(), embedder="minilm" if dense else None)
    if spec.selection is not None:
        options = replace(options, selection=spec.selection)
    if spec.no_vectors:
        options = replace(options, embedder=None)
    elif spec.embedder is not None:
        options = replace(options, embedder=spec.embedder)
    if not existed:
        build_index(root, index_dir, options, lambda p: on_progress(name, p))
    # Vectors this install cannot read (no dense extra) are neither filled nor searched, and kept as they are.
    lacking = dense_missing(options.embedder)
    searcher = Searcher(index_dir)
    holder: list[Repo] = []

    def event(kind: str, value: object) -> None:
        if holder:
            holder[0].note(kind, value)
        on_event(name, kind, value)

    live = _TrackedLiveIndex(root, index_dir, options, event, fill=lacking is None)
    repo = Repo(name, root, index_dir, options, searcher, live, watch, event)
    holder.append(repo)
    live.start(watch=watch)
    if lacking is not None:
        on_event(name, "notice", lexical_only(lacking))
    elif options.embedder:
        repo.warm_up()
    if watch and existed:
        repo.catch_up()
    return repo


def _open_milvus_repo(spec: RepoSpec, root: Path, name: str, on_event: EventFn) -> Repo:
    """A stateless replica: reads the live build of `root` on Milvus; builds nothing at start."""
    assert spec.milvus_uri is not None
    store = MilvusStore(spec.milvus_uri, root, spec.milvus_token)
    searcher = Searcher(store=store)  # NoIndex / StoreUnavailable: one line naming the URI
    options = options_from_manifest(searcher.manifest)
    if spec.no_vectors:
        options = replace(options, embedder=None)
    holder: list[Repo] = []

    def event(kind: str, value: object) -> None:
        if holder:
            holder[0].note(kind, value)
        on_event(name, kind, value)

    repo = Repo(name, root, default_index_dir(root), options, searcher, _MilvusWriter(root, store, options, event),
                False, event)
    holder.append(repo)
    if options.embedder:
        repo.warm_up()
    return repo


class RepoSet:
    """The served repositories, found by name or path; the first one is the default."""

    def __init__(self, repos: list[Repo]) -> None:
        if not repos:
            raise ServeError("no repository to serve: pass --repo PATH")
        self.repos = list(repos)

    @property
    def default(self) -> Repo:
        return self.repos[0]

    def get(self, name_or_path: str | None) -> Repo:
        if name_or_path is None or not name_or_path.strip():
            return self.default
        for repo in self.repos:
            if repo.name == name_or_path:
                return repo
        try:
            wanted = Path(os.path.realpath(Path(name_or_path).expanduser()))
        except (OSError, ValueError):
            wanted = None
        for repo in self.repos:
            if wanted == repo.root:
                return repo
        names = ", ".join(repr(r.name) for r in self.repos)
        raise ToolInputError(f"unknown repo {name_or_path!r}: use one of {names} (call list_repos to see them)")

    def close(self) -> None:
        for repo in self.repos:
            repo.close()


def open_repos(
    specs: list[RepoSpec],
    watch: bool = True,
    on_event: EventFn = lambda *_: None,
    on_progress: ProgressFn = lambda *_: None,
) -> RepoSet:
    """Open every repository; if one fails, the ones already opened are closed again."""
    limit_arenas()
    opened: list[Repo] = []
    try:
        for spec, (name, _) in zip(specs, served_names(specs)):
            opened.append(open_repo(spec, name, watch, on_event, on_progress))
    except BaseException:
        for repo in opened:
            repo.close()
        raise
    if any(repo.options.embedder and dense_missing(repo.options.embedder) is None for repo in opened):
        _one_faiss_thread()
    return RepoSet(opened)


def _one_faiss_thread() -> None:
    """The server runs many small searches at once on worker threads; OpenMP threads inside each
    faiss search then only contend (measured at 10k vectors on 2 busy cores: 15-20 ms per query
    with OpenMP's default, 1.5 ms with one thread)."""
    import faiss

    faiss.omp_set_num_threads(1)
