"""The MCP tools (docs/INTERFACES.md): argument schemas, error mapping, text + structured result.

Each tool returns a `CallToolResult` with one compact text block (for the model) and one
`structuredContent` object validated against its pydantic model (the tool's `outputSchema`).
Failures the caller can fix come back as tool errors whose message says what to change. Ranges
are checked in `ops` rather than by pydantic so that the message is ours; the JSON schema still
advertises them. The audit log is written around every call by `audit.AuditMiddleware`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from bridge.errors import BridgeError
from bridge.server import ops, render
from bridge.server.catalog import TOOL_NAMES
from bridge.server.models import (
    IndexStatusResult,
    ListFilesResult,
    ListReposResult,
    OutlineResult,
    ReadFileResult,
    RefreshIndexResult,
    SearchCodeResult,
)
from index.errors import IndexingError
from index.search import DEFAULT_MAX_TOKENS

if TYPE_CHECKING:  # repos imports the index's heavy modules; the tools are registered before it opens
    from bridge.server.opening import OpeningRepos
    from bridge.server.repos import Repo, RepoSet

__all__ = ["CompactToolList", "OneLineErrors", "compact_schema", "register_tools", "TOOL_NAMES"]

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_REFRESH = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

RepoArg = Annotated[
    str | None,
    Field(description="Repository name (list_repos); default: the first."),
]
Budget = Annotated[
    int,
    Field(
        description="Code token budget.",
        json_schema_extra={"minimum": 1, "maximum": ops.MAX_TOKENS},
    ),
]

Outcome = tuple[BaseModel, str]  # structured result and its text rendering


def _answer(work: Callable[[], Outcome]) -> CallToolResult:
    try:
        model, text = work()
    except (IndexingError, BridgeError) as exc:
        raise ToolError(str(exc)) from None
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=model.model_dump(mode="json"))


_VALIDATION = re.compile(r"^(Error executing tool \w+): \d+ validation errors? for \w+\n(.*)$", re.DOTALL)


def one_line_validation(text: str) -> str | None:
    """The SDK's report of arguments that fail a tool's input schema (pydantic's multi-line dump
    with a documentation link) as one line: `...: bad arguments: k: Input should be a valid
    integer; query: Field required: see the tool's input schema`. None for any other text."""
    found = _VALIDATION.match(text)
    if found is None:
        return None
    problems, where = [], ""
    for line in found.group(2).splitlines():  # a field's name, then its message indented by 2 (a link by 4)
        if not line.startswith(" "):
            where = line.strip()
        elif where and not line.startswith("    "):
            problems.append(f"{where}: {line.strip().split(' [type=')[0]}")
    return f"{found.group(1)}: bad arguments: {'; '.join(problems)}: see the tool's input schema"


class OneLineErrors:
    """SDK middleware: a tools/call whose arguments fail the input schema answers in one line, as
    every other refusal of this server does; all other results pass unchanged."""

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        result = await call_next(ctx)
        if ctx.method != "tools/call" or not isinstance(result, dict) or not result.get("isError"):
            return result  # the SDK hands middleware the wire form: a dict
        short = one_line_validation(" ".join(str(block.get("text", "")) for block in result.get("content") or ()))
        return result if short is None else {**result, "content": [{"type": "text", "text": short}]}


def compact_schema(schema: dict[str, Any], drop: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A tool's input schema as a model needs it, for fewer prompt tokens: without pydantic's titles,
    numeric bounds (a call past one gets a tool error that names the range), `X | None` (default
    None) as plain `X` (leaving the argument out means None), and without the properties in `drop`.
    The server still validates calls against the full schema."""
    properties = {}
    for name, prop in schema.get("properties", {}).items():
        if name in drop:
            continue
        prop = {key: value for key, value in prop.items() if key not in ("title", "minimum", "maximum")}
        variants = [v for v in prop.get("anyOf", ()) if v != {"type": "null"}]
        if len(variants) == 1 and prop.get("default", 0) is None:
            del prop["anyOf"], prop["default"]
            prop = {**variants[0], **prop}
        properties[name] = prop
    compact: dict[str, Any] = {"type": "object", "properties": properties}
    if required := [name for name in schema.get("required", ()) if name in properties]:
        compact["required"] = required
    return compact


class CompactToolList:
    """SDK middleware: tools/list offers each tool's input schema compacted (`compact_schema`),
    without `repo` when a single repository is served (it could only name that one)."""

    def __init__(self, single_repo: bool) -> None:
        self.drop = frozenset({"repo"}) if single_repo else frozenset()

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        result = await call_next(ctx)
        if ctx.method != "tools/list" or not isinstance(result, dict):
            return result
        tools = [
            {**tool, "inputSchema": compact_schema(tool["inputSchema"], self.drop)} if "inputSchema" in tool else tool
            for tool in result.get("tools") or ()
        ]
        return {**result, "tools": tools}


def register_tools(server: MCPServer, repos: RepoSet | OpeningRepos, names: tuple[str, ...] = TOOL_NAMES) -> None:
    """Add the tools named in `names` (default: all seven) to `server`."""

    # The SDK runs each call on its own worker thread. Quick tools are pure CPU under one GIL, and
    # sixteen of them interleaving hand the GIL to one another at every sqlite, faiss or stat call,
    # so each call waits for the others' slices (server-side search p50 went from 2 ms alone to
    # 40 ms under 16 clients). One at a time, a call runs to its end; only refresh_index, which
    # waits on the indexing worker process, stays outside.
    one_at_a_time = threading.Lock()

    def on_repo(name: str | None, work: Callable[[Repo], Outcome], exclusive: bool = True) -> CallToolResult:
        with one_at_a_time if exclusive else nullcontext():
            return _answer(lambda: work(repos.get(name)))

    def search_code(
        query: Annotated[str, Field(description="Identifiers, path:line, error text, a description or a bug report.")],
        k: Annotated[int, Field(description="Most hits.", json_schema_extra={"minimum": 1, "maximum": ops.MAX_K})] = 5,
        max_tokens: Budget = DEFAULT_MAX_TOKENS,
        path_glob: Annotated[
            str | None, Field(description="Path glob, e.g. src/**")
        ] = None,
        mode: Annotated[
            str,
            Field(
                description="lexical: exact words, vector: meaning",
                json_schema_extra={"enum": ["hybrid", "lexical", "vector"]},
            ),
        ] = "hybrid",
        repo: RepoArg = None,
    ) -> Annotated[CallToolResult, SearchCodeResult]:
        """Search the code: best-matching line ranges with their code."""

        def work(r: Repo) -> Outcome:
            # The structured result echoes the query's first line, as the text does: a client that
            # hands it to the model must not pay for a pasted 64 KB report twice.
            result = ops.search_code(r, query, k, max_tokens, path_glob, mode)
            result = result.model_copy(update={"query": render.echo(result.query)})
            vectors = r.searcher.manifest.embedder is not None
            return result, render.render_search(result, r.name, r.status().reindexing, vectors)

        return on_repo(repo, work)

    def read_file(
        path: Annotated[str, Field(description="File path in the repository.")],
        start_line: Annotated[int, Field(description="First line.", json_schema_extra={"minimum": 1})] = 1,
        end_line: Annotated[int | None, Field(description="Last line.")] = None,
        max_tokens: Budget = 2000,
        repo: RepoArg = None,
    ) -> Annotated[CallToolResult, ReadFileResult]:
        """Read lines of a file."""

        def work(r: Repo) -> Outcome:
            result = ops.read_file(r, path, start_line, end_line, max_tokens)
            return result, render.render_read(result)

        return on_repo(repo, work)

    def list_files(
        path_glob: Annotated[str, Field(description="Glob, e.g. src/**")] = "**",
        limit: Annotated[
            int, Field(description="Most paths.", json_schema_extra={"minimum": 1, "maximum": ops.MAX_LIST_LIMIT})
        ] = 200,
        repo: RepoArg = None,
    ) -> Annotated[CallToolResult, ListFilesResult]:
        """List the indexed files matching a glob."""

        def work(r: Repo) -> Outcome:
            result = ops.list_files(r, path_glob, limit)
            return result, render.render_list(result)

        return on_repo(repo, work)

    def outline(
        path: Annotated[str, Field(description="File path in the repository.")],
        repo: RepoArg = None,
    ) -> Annotated[CallToolResult, OutlineResult]:
        """A file's classes, functions, ... with their line ranges."""

        def work(r: Repo) -> Outcome:
            result = ops.outline(r, path)
            return result, render.render_outline(result)

        return on_repo(repo, work)

    def index_status(repo: RepoArg = None) -> Annotated[CallToolResult, IndexStatusResult]:
        """Index freshness: files, chunks, changes since, re-indexing."""

        def work(r: Repo) -> Outcome:
            result = ops.index_status(r)
            return result, render.render_status(result)

        return on_repo(repo, work)

    def refresh_index(repo: RepoArg = None) -> Annotated[CallToolResult, RefreshIndexResult]:
        """Re-index changed files now."""

        def work(r: Repo) -> Outcome:
            result = ops.refresh_index(r)
            return result, render.render_refresh(result)

        return on_repo(repo, work, exclusive=False)

    def list_repos() -> Annotated[CallToolResult, ListReposResult]:
        """List the served repositories."""

        def work() -> Outcome:
            result = ops.list_repos(repos)
            return result, render.render_repos(result)

        return _answer(work)

    for fn in (search_code, read_file, list_files, outline, index_status, refresh_index, list_repos):
        if fn.__name__ in names:
            server.add_tool(fn, annotations=_REFRESH if fn is refresh_index else _READ_ONLY)
