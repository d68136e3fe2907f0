"""What to serve, known before any index opens: each repository's spec and served name.

Kept free of the index's heavy modules (numpy, faiss, the watcher), so the stdio server can answer
the MCP handshake while the indexes open on a background thread (`OpeningRepos`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bridge.errors import ServeError
from index.types import Selection

if TYPE_CHECKING:
    from bridge.server.repos import Repo, RepoSet

__all__ = ["OpeningRepos", "RepoSpec", "served_names"]


@dataclass(frozen=True)
class RepoSpec:
    """What to serve: a repository root, optionally its index folder and build settings.

    `embedder` None keeps whatever the existing index uses ("minilm" for a new one); use
    `no_vectors=True` for a lexical-only index.
    """

    root: Path
    index_dir: Path | None = None
    embedder: str | None = None
    no_vectors: bool = False
    selection: Selection | None = None
    milvus_uri: str | None = None  # read the index from Milvus (a stateless replica; see docs/milvus.md)
    milvus_token: str | None = None


def served_names(specs: Sequence[RepoSpec]) -> list[tuple[str, Path]]:
    """Each repository's served name (its folder's, made unique) and real root, in order; a root given
    twice is an error."""
    named: list[tuple[str, Path]] = []
    taken: set[str] = set()
    for spec in specs:
        real = Path(os.path.realpath(spec.root.expanduser()))
        if any(real == root for _, root in named):
            raise ServeError(f"repository {spec.root} is given twice: pass each --repo once")
        base = real.name or "root"
        name, n = base, 2
        while name in taken:
            name, n = f"{base}-{n}", n + 1
        taken.add(name)
        named.append((name, real))
    return named


class OpeningRepos:
    """The served repositories while they open on a background thread, with RepoSet's face (`repos`,
    `default`, `get`, `close`): each use waits until they are open, and a failure to open is raised
    to every use (a tool reports it as its error).

    The stdio server answers the MCP handshake meanwhile: a host such as llama-server gives a server
    10 s to list its tools, and opening, watching and catching up on changes is work that can follow.
    """

    def __init__(
        self,
        open_all: Callable[[], RepoSet],
        on_open: Callable[[], None] = lambda: None,
        on_error: Callable[[BaseException], None] = lambda _: None,
    ) -> None:
        self._open_all, self._on_open, self._on_error = open_all, on_open, on_error
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._set: RepoSet | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._open, name="bridge-open-repos", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _open(self) -> None:
        try:
            opened = self._open_all()
        except BaseException as exc:  # noqa: BLE001 - handed to every caller of wait()
            self._error = exc
            self._done.set()
            self._on_error(exc)
            return
        with self._lock:
            if not self._closed:
                self._set = opened
        self._done.set()
        if self._set is not opened:  # closed while opening: nobody else will close these
            opened.close()
        else:
            self._on_open()

    def wait(self) -> RepoSet:
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._set is not None
        return self._set

    @property
    def repos(self) -> list[Repo]:
        return self.wait().repos

    @property
    def default(self) -> Repo:
        return self.wait().default

    def get(self, name_or_path: str | None) -> Repo:
        return self.wait().get(name_or_path)

    def close(self) -> None:
        """Close what is open; an opening still under way (an initial build) is not waited for:
        it closes its own result, and a build interrupted by the exit leaves the live index intact."""
        with self._lock:
            self._closed = True
            opened = self._set
        if opened is not None:
            opened.close()
