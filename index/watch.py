"""Keep an index fresh: re-index on file changes (debounced) and fill vectors in the background."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Callable, Iterator

from index.build import BuildOptions, BuildReport, build_index, fill_vectors
from index.errors import IndexingError

__all__ = ["LiveIndex", "watch_and_index"]

EventFn = Callable[[str, object], None]  # ("build" | "fill" | "error", report or exception)


def _ignore(index_dir: Path) -> Callable[[object, str], bool]:
    index_dir = Path(index_dir).resolve()

    def keep(_change: object, path: str) -> bool:
        p = Path(path)
        return ".git" not in p.parts and index_dir not in p.parents and p != index_dir

    return keep


def _worker_init(parent: int) -> None:
    """In the build worker: never write to stdout (under MCP stdio it is the protocol channel),
    and exit when the serving process is gone instead of lingering with its pipes open."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)

    def watch_parent() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch_parent, name="bridge-parent-watch", daemon=True).start()


class LiveIndex:
    """One repository's index, rebuilt when files change, with vectors embedded on a worker thread.

    Searches keep answering from the previous generation while a rebuild runs (generations are
    immutable), and a rebuild interrupts embedding rather than waiting for it: the embedding
    cache keeps what was done, so the next fill resumes where it stopped.
    """

    def __init__(
        self,
        root: Path,
        index_dir: Path,
        options: BuildOptions,
        on_event: EventFn = lambda *_: None,
        isolate_builds: bool = True,
    ) -> None:
        self.root, self.index_dir, self.options = Path(root), Path(index_dir), options
        self._isolate = isolate_builds
        self._pool: ProcessPoolExecutor | None = None
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
        if self.options.embedder:
            self._fill_wanted.set()
        return report

    def _build(self) -> BuildReport:
        """Build in a worker process when isolated: chunking and tokenising are pure Python, and
        in the serving process they would hold the GIL for seconds and stall every search."""
        if not self._isolate:
            return build_index(self.root, self.index_dir, self.options)
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_init,
                initargs=(os.getpid(),),
            )
        try:
            return self._pool.submit(build_index, self.root, self.index_dir, self.options).result()
        except BrokenProcessPool:
            self._pool = None
            raise IndexingError(f"the indexing worker for {self.root} died: run `bridge index {self.root}`") from None

    def start(self, watch: bool = True) -> None:
        if self.options.embedder:
            self._fill_wanted.set()
            self._spawn(self._fill_loop, "bridge-embed")
        if watch:
            self._spawn(self._watch_loop, "bridge-watch")

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._fill_wanted.set()
        for t in self._threads:
            t.join(timeout)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

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
                report = fill_vectors(
                    self.index_dir, should_stop=lambda: self._stop.is_set() or self._rebuilding.is_set()
                )
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
