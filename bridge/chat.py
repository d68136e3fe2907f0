"""The chat loop's turn: retrieve (MCP `search_code`) -> plan (token and KV budget) -> generate.

Retrieval goes through the same MCP tool external clients use: an in-process server on a free
loopback port (`local_server`), or a running `bridge serve` (`McpRetriever(url, token)`). The
REPL itself lives in the CLI; `ChatSession` keeps the history between turns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bridge.budget import Message, Plan, plan_prompt
from bridge.config import ConfigError, Settings
from bridge.errors import BridgeError
from bridge.gguf import ModelFacts, choose_n_ctx, kv_bytes_per_token, read_gguf
from bridge.prompt import build_messages, render_question, snippet_from_hit, system_prompt
from bridge.runtime import Generation, OnToken, Runtime
from index.types import Hit

__all__ = [
    "ChatError",
    "ChatSession",
    "McpRetriever",
    "OnPlan",
    "Retrieval",
    "Retriever",
    "Source",
    "Turn",
    "ask_report",
    "local_server",
    "open_runtime",
]

OnPlan = Callable[[Plan], None]
# The server refuses longer queries; a longer question is still answered, searched by its start.
MAX_QUERY_BYTES = 4096


class ChatError(BridgeError):
    """A turn cannot run: an empty question, or an MCP server that is unreachable or refused the search."""


@dataclass(frozen=True, slots=True)
class Retrieval:
    hits: tuple[Hit, ...]
    took_ms: float  # measured by the caller, MCP round trip included


class Retriever(Protocol):
    def search(self, query: str, *, k: int, max_tokens: int, mode: str) -> Retrieval: ...


@dataclass(frozen=True, slots=True)
class Source:
    path: str
    start_line: int
    end_line: int
    score: float

    @property
    def citation(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


@dataclass(frozen=True, slots=True)
class Turn:
    question: str
    answer: str
    sources: tuple[Source, ...]  # the snippets that went into the prompt, in rank order
    retrieved: int  # hits the server returned (some may not have fit)
    plan: Plan
    generation: Generation
    retrieval_ms: float
    first_token_ms: float | None  # from the start of the turn
    total_ms: float


# --- retrieval over MCP --------------------------------------------------------------------


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
        from bridge.server import connect

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
        except BaseException as exc:
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
        except Exception as exc:
            raise ChatError(f"search_code at {self.url} failed ({_leaf(exc)!r}): check the server") from None
        took = (time.perf_counter() - start) * 1000
        if result.is_error or result.structured_content is None:
            text = " ".join(getattr(block, "text", "") for block in result.content)
            raise ChatError(f"search_code at {self.url} refused the search: {text}")
        hits = tuple(Hit(**hit) for hit in result.structured_content["hits"])
        return Retrieval(hits, took)

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
        try:
            self._session.result(self.timeout)
        except Exception:  # noqa: BLE001 - closing a broken session has nothing left to report
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(self.timeout)
        self._loop.close()

    def __enter__(self) -> McpRetriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def local_server(repo: Path, index_dir: Path | None = None, *, live: bool = False) -> Iterator[Any]:
    """An MCP server for `repo` on a free loopback port, with a random token, for this process only.

    A missing index is built first (BM25, synchronously). `live` (for a chat) also re-indexes on
    file changes and fills in missing vectors in the background. Without it (one question) the
    index is searched as it is, hybrid when it has vectors: the server's background fill would
    load a second copy of the embedder, reread every chunk and vector and rewrite the vector file
    (measured: 1,045-1,070 MB peak RSS for `bridge ask` on a 10k-chunk MiniLM index, against
    958-984 MB without), work a one-shot process has no time to finish anyway.
    """
    import secrets

    from bridge.server import start_background

    server = start_background([repo], secrets.token_urlsafe(24), index_dir=index_dir, no_vectors=not live, watch=live)
    with server:
        yield server


# --- the model -----------------------------------------------------------------------------


def open_runtime(settings: Settings) -> Runtime:
    """llama.cpp in process, or the OpenAI-compatible server at `settings.llm_url`."""
    if settings.llm_url is None:
        from bridge.runtime import LlamaCppRuntime

        return LlamaCppRuntime(
            settings.model,
            n_ctx=settings.n_ctx,
            gpu_layers=settings.gpu_layers,
            cache_type=settings.cache_type,
            kv_budget_bytes=settings.kv_budget,
        )
    from bridge.remote import OpenAICompatRuntime

    facts = read_gguf(settings.model) if settings.model is not None else None
    n_ctx = settings.n_ctx
    if facts is not None:
        n_ctx = choose_n_ctx(facts, n_ctx, settings.kv_budget, settings.cache_type)
    elif settings.kv_budget is not None:
        raise ConfigError(
            "--kv-budget with --llm-url needs the model's facts: pass --model FILE.gguf (the file the server runs)"
        )
    return OpenAICompatRuntime(settings.llm_url, model=settings.llm_model, n_ctx=n_ctx)


def _facts_of(runtime: Runtime, settings: Settings) -> ModelFacts | None:
    facts = getattr(runtime, "facts", None)
    if isinstance(facts, ModelFacts):
        return facts
    return read_gguf(settings.model) if settings.model is not None else None


# --- one turn ------------------------------------------------------------------------------


class ChatSession:
    """Turns that share a runtime, a retriever and a history (trimmed oldest first when it must be)."""

    def __init__(self, runtime: Runtime, retriever: Retriever, settings: Settings) -> None:
        self.runtime, self.retriever, self.settings = runtime, retriever, settings
        facts = _facts_of(runtime, settings)
        cache_type = runtime.info.cache_type or settings.cache_type
        # 0: an OpenAI-compatible server whose model is unknown; KV bytes are then reported as 0.
        self.kv_bytes_per_token = kv_bytes_per_token(facts, cache_type) if facts is not None else 0  # type: ignore[arg-type]
        self.history: list[Message] = []
        self.last: Turn | None = None
        self._system = system_prompt()

    def _plan(self, question: str, hits: Sequence[Hit] = ()) -> Plan:
        s = self.settings
        return plan_prompt(
            n_ctx=self.runtime.info.n_ctx,
            answer_reserve=s.answer_reserve,
            kv_bytes_per_token=self.kv_bytes_per_token,
            system=self._system,
            question=render_question(question),
            count=self.runtime.count_tokens,
            history=self.history,
            snippets=[snippet_from_hit(h) for h in hits],
            snippet_budget=s.snippet_tokens,
            kv_budget_bytes=s.kv_budget,
            overhead=self.runtime.template_overhead(),
        )

    def ask(self, question: str, on_token: OnToken | None = None, on_plan: OnPlan | None = None) -> Turn:
        """Retrieve, plan and generate one answer; the turn joins the history afterwards."""
        question = question.strip()
        if not question:
            raise ChatError("the question is empty: ask something about the repository")
        start = time.perf_counter()
        self._plan(question)  # a question too long for the context fails here, before any search
        retrieval = Retrieval((), 0.0)
        if self.settings.snippet_tokens > 0:
            query = question.encode("utf-8")[:MAX_QUERY_BYTES].decode("utf-8", "ignore")
            retrieval = self.retriever.search(
                query, k=self.settings.k, max_tokens=self.settings.snippet_tokens, mode=self.settings.mode
            )
        plan = self._plan(question, retrieval.hits)
        if on_plan is not None:
            on_plan(plan)
        first: list[float] = []

        def token(piece: str) -> None:
            if not first:
                first.append(time.perf_counter())
            if on_token is not None:
                on_token(piece)

        generation = self.runtime.generate(build_messages(plan), max_tokens=plan.answer_reserve, on_token=token)
        end = time.perf_counter()
        answer = generation.text.strip()
        self.history += [Message("user", question), Message("assistant", answer)]
        turn = Turn(
            question=question,
            answer=answer,
            sources=tuple(Source(s.path, s.start_line, s.end_line, s.score) for s in plan.snippets),
            retrieved=len(retrieval.hits),
            plan=plan,
            generation=generation,
            retrieval_ms=retrieval.took_ms,
            first_token_ms=(first[0] - start) * 1000 if first else None,
            total_ms=(end - start) * 1000,
        )
        self.last = turn
        return turn

    def reset(self) -> None:
        self.history.clear()


def ask_report(turn: Turn, runtime: Runtime) -> dict[str, Any]:
    """The `bridge ask --json` document (INTERFACES.md)."""
    info, g = runtime.info, turn.generation
    return {
        "answer": turn.answer,
        "sources": [
            {"path": s.path, "start_line": s.start_line, "end_line": s.end_line, "score": s.score} for s in turn.sources
        ],
        "model": {
            "path": info.model,
            "n_ctx": info.n_ctx,
            "trained_context": info.trained_context,
            "gpu_layers": info.gpu_layers,
            "cache_type": info.cache_type,
        },
        "budget": turn.plan.budget_dict(),
        "timings": {
            "retrieval_ms": round(turn.retrieval_ms, 3),
            "prefill_ms": round(g.prefill_ms, 3),
            "prefill_tokens_per_s": round(g.prefill_tokens_per_s, 3),
            "decode_tokens_per_s": round(g.decode_tokens_per_s, 3),
            "total_ms": round(turn.total_ms, 3),
        },
    }
