"""The served repositories while they open on a background thread (the stdio server's start-up).

Light on purpose, like `spec`: `repos` (and the index's heavy modules) is imported by the thread that
opens, not by whoever waits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bridge.server.repos import Repo, RepoSet

__all__ = ["OpeningRepos"]


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
            try:  # reported before any waiter is let go: the process may end as soon as a tool replies
                self._on_error(exc)
            finally:
                self._done.set()
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

    def close(self, wait_s: float = 5.0) -> None:
        """Close what is open. An opening still under way is given `wait_s` to finish (opening an
        existing index takes well under a second); a longer one (an initial build) closes its own
        result, and a build cut short by the process's exit leaves the live index as it was."""
        if self._thread.is_alive():
            self._done.wait(wait_s)
        with self._lock:
            self._closed = True
            opened = self._set
        if opened is not None:
            opened.close()
