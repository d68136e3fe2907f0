"""Keep an index fresh: re-index on file changes (debounced) and fill vectors in the background."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from index.build.pipeline import BuildOptions, BuildReport, build_index
from index.errors import IndexingError
from index.build.fill import FillReport, fill_vectors
from index.store import IndexDir

__all__ = ["LiveIndex", "watch_and_index"]

EventFn = Callable[[str, object], None]  # ("build" | "fill" | "error", report or exception)


def _ignore(index_dir: Path) -> Callable[[object, str], bool]:
    index_dir = Path(index_dir).resolve()

    def keep(_change: object, path: str) -> bool:
        p = Path(path)
        return ".git" not in p.parts and index_dir not in p.parents and p != index_dir

    return keep


# Re-indexing is background work: under load the searches it keeps fresh come first. At nice 10
# a busy core still gives the worker about a tenth of its time, so rebuilds slow down, not stop.
WORKER_NICENESS = 10
_stop_event: Any = None  # in a worker: set by the serving process when it stops


def _worker_init(parent: int, stop: Any) -> None:
    """In a worker: lower priority; never write to stdout (under MCP stdio it is the protocol
    channel); leave Ctrl-C to the serving process (a terminal sends it to the whole process group,
    and a worker's KeyboardInterrupt traceback would land in the user's chat); exit when the
    serving process is gone instead of lingering with its pipes open."""
    global _stop_event
    _stop_event = stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(WORKER_NICENESS)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)

    def watch_parent() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch_parent, name="bridge-parent-watch", daemon=True).start()


def _fill_in_worker(index_dir: Path) -> FillReport:
    """Embed in a worker until done, until the serving process stops, or until a newer generation
    is published (the next fill picks up from the embedding cache)."""
    store = IndexDir(index_dir)
    started_on = store.current()
    return fill_vectors(index_dir, should_stop=lambda: _stop_event.is_set() or store.current() != started_on)


class LiveIndex:
    """One repository's index, rebuilt when files change, with vectors embedded in the background.

    Searches keep answering from the previous generation while a rebuild runs (generations are
    immutable), and a rebuild interrupts embedding rather than waiting for it: the embedding
    cache keeps what was done, so the next fill resumes where it stopped. With `isolate_builds`
    (the default) both run in low-priority worker processes, one for builds and one for
    embedding: chunking, tokenising and reading every chunk back to embed it are Python work
    that would hold the serving process's GIL for seconds and stall every search.
    """

    def __init__(
        self,
        root: Path,
        index_dir: Path,
        options: BuildOptions,
        on_event: EventFn = lambda *_: None,
        isolate_builds: bool = True,
        fill: bool = True,
    ) -> None:
        """`fill`: embed in the background (False where this install cannot compute the vectors: builds
        keep the index's embedder, and the vectors wait for an install that can)."""
        self.root, self.index_dir, self.options = Path(root), Path(index_dir), options
        self._fills = fill and bool(options.embedder)
        self._isolate = isolate_builds
        self._pools: dict[str, ProcessPoolExecutor] = {}
        self._worker_stop = multiprocessing.get_context("spawn").Event() if isolate_builds else None
        self._on_event = on_event
        self._stop = threading.Event()
        self._fill_wanted = threading.Event()
        self._build_lock = threading.Lock()
        self._rebuilding = threading.Event()
        self._threads: list[threading.Thread] = []

    def build_now(self) -> BuildReport:
        """Re-index synchronously (the `refresh_index` tool and the file watcher both land here)."""
        self._rebuilding.set()
        try:
            with self._build_lock:
                report = self._build()
        finally:
            self._rebuilding.clear()
        self._on_event("build", report)
        if self._fills:
            self._fill_wanted.set()
        return report

    def _build(self) -> BuildReport:
        if not self._isolate:
            return build_index(self.root, self.index_dir, self.options)
        report: BuildReport = self._in_worker("build", build_index, self.root, self.index_dir, self.options)
        return report

    def _fill(self) -> FillReport:
        if not self._isolate:
            should_stop = lambda: self._stop.is_set() or self._rebuilding.is_set()
            return fill_vectors(self.index_dir, should_stop=should_stop)
        report: FillReport = self._in_worker("fill", _fill_in_worker, self.index_dir)
        return report

    def _in_worker(self, kind: str, fn: Callable[..., Any], *args: Any) -> Any:
        pool = self._pools.get(kind)
        if pool is None:
            pool = self._pools[kind] = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_init,
                initargs=(os.getpid(), self._worker_stop),
            )
        try:
            return pool.submit(fn, *args).result()
        except BrokenProcessPool:
            del self._pools[kind]
            raise IndexingError(f"the {kind} worker for {self.root} died: run `bridge index {self.root}`") from None

    def start(self, watch: bool = True) -> None:
        if self._fills:
            self._fill_wanted.set()
            self._spawn(self._fill_loop, "bridge-embed")
        if watch:
            self._spawn(self._watch_loop, "bridge-watch")

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._worker_stop is not None:
            self._worker_stop.set()
        self._fill_wanted.set()
        for t in self._threads:
            t.join(timeout)
        for pool in self._pools.values():
            pool.shutdown(wait=True, cancel_futures=True)
        self._pools.clear()

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _fill_loop(self) -> None:
        while not self._stop.is_set():
            self._fill_wanted.wait()
            self._fill_wanted.clear()
            if self._stop.is_set():
                return
            try:
                report = self._fill()
            except IndexingError as exc:
                self._on_event("error", exc)
                continue
            self._on_event("fill", report)

    def _watch_loop(self) -> None:
        from watchfiles import watch

        for _changes in watch(
            self.root, watch_filter=_ignore(self.index_dir), debounce=400, stop_event=self._stop, yield_on_timeout=False
        ):
            try:
                self.build_now()
            except IndexingError as exc:
                self._on_event("error", exc)


def watch_and_index(root: Path, index_dir: Path, options: BuildOptions) -> Iterator[tuple[str, object]]:
    """For `bridge index --watch`: yield ("build" | "fill" | "error", report) as they happen, until
    interrupted. An error (say, a file that vanished mid-build) is reported, and watching goes on."""
    import queue

    events: queue.Queue[tuple[str, object]] = queue.Queue()
    live = LiveIndex(root, index_dir, options, lambda kind, value: events.put((kind, value)))
    live.start(watch=True)
    try:
        while True:
            yield events.get()
    finally:
        live.stop()
