"""Retrieval for the chat loop through the MCP `search_code` tool, the one external clients use.

`McpRetriever` holds one MCP session to a running `bridge serve` (or to `local_server`, an
in-process server on a free loopback port) and turns each wire hit into a prompt `Snippet` in
one step.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bridge.chat.budget import Snippet
from bridge.chat.prompt import render_snippet
from bridge.errors import ChatError

__all__ = ["McpRetriever", "Retrieval", "Retriever", "local_server"]


@dataclass(frozen=True, slots=True)
class Retrieval:
    snippets: tuple[Snippet, ...]  # in rank order, rendered for the prompt
    took_ms: float  # measured by the caller, MCP round trip included


class Retriever(Protocol):
    def search(self, query: str, *, k: int, max_tokens: int, mode: str) -> Retrieval: ...


def _snippet(hit: dict[str, Any]) -> Snippet:
    """A `search_code` wire hit (models.HitModel) straight into the prompt block it becomes."""
    return render_snippet(
        hit["path"], hit["start_line"], hit["end_line"], hit["text"], language=hit["language"], score=hit["score"],
        symbol=hit.get("symbol"),
    )


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class McpRetriever:
    """`search_code` over one MCP session, held open by an event loop on a helper thread.

    One session for the whole chat: a call costs ~3 ms on loopback, against ~40 ms when each
    turn opens its own session (measured with `asyncio.run` per call).
    """

    def __init__(self, url: str, token: str | None = None, repo: str | None = None, timeout: float = 60.0) -> None:
        from bridge.server.connect import connect

        self.url, self.repo, self.timeout = url, repo, timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="bridge-mcp-client", daemon=True)
        self._thread.start()
        ready: concurrent.futures.Future[Any] = concurrent.futures.Future()
        closing = asyncio.Event()

        async def hold() -> None:
            try:
                async with connect(url, token) as client:
                    ready.set_result(client)
                    await closing.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                    return
                raise

        self._closing = closing
        self._session = asyncio.run_coroutine_threadsafe(hold(), self._loop)
        try:
            self._client = ready.result(timeout)
        except BaseException as exc:  # noqa: BLE001 - a timeout, a refused connection or an auth error alike
            self.close()
            raise ChatError(
                f"cannot open an MCP session with {url} ({_leaf(exc)!r}): check that `bridge serve` runs "
                f"there and that --token-env names its token"
            ) from None

    def search(self, query: str, *, k: int, max_tokens: int, mode: str) -> Retrieval:
        args: dict[str, Any] = {"query": query, "k": k, "max_tokens": max_tokens, "mode": mode}
        if self.repo is not None:
            args["repo"] = self.repo
        start = time.perf_counter()
        future = asyncio.run_coroutine_threadsafe(self._client.call_tool("search_code", args), self._loop)
        try:
            result = future.result(self.timeout)
        except Exception as exc:  # noqa: BLE001 - whatever the transport raised becomes one ChatError
            raise ChatError(f"search_code at {self.url} failed ({_leaf(exc)!r}): check the server") from None
        took = (time.perf_counter() - start) * 1000
        if result.is_error or result.structured_content is None:
            text = " ".join(getattr(block, "text", "") for block in result.content)
            raise ChatError(f"search_code at {self.url} refused the search: {text}")
        return Retrieval(tuple(_snippet(hit) for hit in result.structured_content["hits"]), took)

    def warm_up(self, mode: str) -> None:
        """Send a throwaway search and return at once: the server loads its query embedder while
        the caller loads its model (about 4 s for MiniLM, 3 s for the bundled GGUF, on 2 cores)."""
        args: dict[str, Any] = {"query": "warm up", "k": 1, "max_tokens": 1, "mode": mode}
        if self.repo is not None:
            args["repo"] = self.repo
        asyncio.run_coroutine_threadsafe(self._client.call_tool("search_code", args), self._loop)

    def close(self) -> None:
        if not self._loop.is_running():
            return
        self._loop.call_soon_threadsafe(self._closing.set)
        # Closing a broken session has nothing left to report.
        with contextlib.suppress(Exception):
            self._session.result(self.timeout)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(self.timeout)
        self._loop.close()

    def __enter__(self) -> McpRetriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def local_server(
    repo: Path, index_dir: Path | None = None, *, live: bool = False, milvus_uri: str | None = None,
    milvus_token: str | None = None,
) -> Iterator[Any]:
    """An MCP server for `repo` on a free loopback port, with a random token, for this process only.

    A missing index is built first (BM25, synchronously). `live` (for a chat) also re-indexes on
    file changes and fills in missing vectors in the background. Without it (one question) the
    index is searched as it is, hybrid when it has vectors: the server's background fill would
    load a second copy of the embedder, reread every chunk and vector and rewrite the vector file
    (measured: 1,045-1,070 MB peak RSS for `bridge ask` on a 10k-chunk MiniLM index, against
    958-984 MB without), work a one-shot process has no time to finish anyway.
    """
    import secrets

    from bridge.server.transports import start_background

    server = start_background([repo], secrets.token_urlsafe(24), index_dir=index_dir, no_vectors=not live, watch=live,
                              milvus_uri=milvus_uri, milvus_token=milvus_token)
    with server:
        yield server
