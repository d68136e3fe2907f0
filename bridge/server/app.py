"""Putting it together: the MCP server object over the served repositories, and what it tells a client.

- `open_service(options)` / `opening_service(options)`: the repositories, audit log and options one
  server serves (opened now, or in the background after the handshake);
- `build_server(service)`: the SDK's server with the tools, the `ask_repo` prompt and the resources.

How it runs (HTTP, stdio, a background thread) is bridge/server/transports.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bridge.errors import BridgeError, ServeError
from bridge.server.audit import AuditLog, AuditMiddleware, default_audit_path
from bridge.server.catalog import TOOL_NAMES
from bridge.server.opening import OpeningRepos
from bridge.server.spec import RepoSpec, served_names
from index.errors import IndexingError

if TYPE_CHECKING:  # repos imports the index's heavy modules: loaded only when an index opens
    from bridge.server.repos import EventFn, ProgressFn, RepoSet

__all__ = ["SERVER_NAME", "ServeOptions", "Service", "build_server", "initialize_answer", "open_service", "opening_service"]

SERVER_NAME = "mcp-retrieval-bridge"


@dataclass(frozen=True)
class ServeOptions:
    repos: tuple[RepoSpec, ...]
    host: str = "127.0.0.1"
    port: int = 8765
    path: str = "/mcp"
    token: str | None = None
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    watch: bool = True
    audit_log: Path | None = field(default_factory=default_audit_path)  # None: no audit log
    audit_max_bytes: int = 10 * 1024 * 1024
    tools: tuple[str, ...] = TOOL_NAMES  # the tools offered (`serve --tools`)


@dataclass
class Service:
    """The served repositories and the audit log: what the tools need, whatever the transport.

    `names` are the served names, known before the indexes open (`repos` may still be opening)."""

    repos: RepoSet | OpeningRepos
    audit: AuditLog
    names: tuple[str, ...] = ()

    def repo_name(self, name_or_path: object) -> str | None:
        """The served name a tool's `repo` argument refers to, or the argument itself when unknown."""
        if name_or_path is not None and not isinstance(name_or_path, str):
            return str(name_or_path)  # a malformed call: the tool refuses it, the audit still names it
        try:
            return self.repos.get(name_or_path).name
        except (BridgeError, IndexingError):  # an unknown name, or indexes that could not open
            return name_or_path

    def close(self) -> None:
        try:
            self.repos.close()
        finally:
            self.audit.close()


def open_service(
    options: ServeOptions, on_event: EventFn = lambda *_: None, on_progress: ProgressFn = lambda *_: None
) -> Service:
    from bridge.server.repos import open_repos

    names = tuple(name for name, _ in served_names(options.repos))
    repos = open_repos(list(options.repos), options.watch, on_event, on_progress)
    return Service(repos, AuditLog(options.audit_log, options.audit_max_bytes), names)


def opening_service(
    options: ServeOptions,
    on_event: EventFn = lambda *_: None,
    on_progress: ProgressFn = lambda *_: None,
    on_open: Callable[[Service], None] = lambda *_: None,
) -> Service:
    """A service whose indexes open on a background thread once `service.repos.start()` is called;
    then `on_open(service)`, or `on_event(name, "error", exc)` when they cannot open.

    What can be checked without opening (the folders exist, none is given twice) is checked here."""
    named = served_names(options.repos)
    for spec, (_, root) in zip(options.repos, named):
        if not root.is_dir():  # as open_repo says it, before anything starts
            raise ServeError(f"no folder at {spec.root}: pass the repository root with --repo")

    def open_all() -> RepoSet:
        from bridge.server.repos import open_repos

        return open_repos(list(options.repos), options.watch, on_event, on_progress)

    names = tuple(n for n, _ in named)
    opened: list[Service] = []
    repos = OpeningRepos(open_all, lambda: on_open(opened[0]), lambda exc: on_event(names[0], "error", exc))
    opened.append(Service(repos, AuditLog(options.audit_log, options.audit_max_bytes), names))
    return opened[0]


def build_server(service: Service, tools: tuple[str, ...] = TOOL_NAMES) -> Any:
    """The `MCPServer` with the named tools (default: all seven), the `ask_repo` prompt and the file
    resources, bound to `service`."""
    from mcp.server.mcpserver import MCPServer

    from bridge import __version__
    from bridge.server.prompt import register_context
    from bridge.server.tools import CompactToolList, OneLineErrors, register_tools

    names = service.names or tuple(r.name for r in service.repos.repos)
    audit = AuditMiddleware(service.audit, service.repo_name)
    server = MCPServer(
        SERVER_NAME,
        version=__version__,
        instructions=_instructions(names),
        log_level="WARNING",
        middleware=[audit, OneLineErrors(), CompactToolList(single_repo=len(names) == 1)],
    )
    register_tools(server, service.repos, tools)
    register_context(server, service.repos)
    return server


def _instructions(names: tuple[str, ...]) -> str:
    return (
        f"Code search over {', '.join(names)}. Start with search_code (hybrid: BM25 + vectors, the best chunk of "
        "each best file); read_file for more lines around a hit; outline for a file's symbols; "
        "list_files to browse. Results name `path:start-end`; line numbers are 1-based and inclusive."
    )


def initialize_answer(names: tuple[str, ...]) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """The `initialize` result `build_server`'s server gives, for the stdio server to send before the
    SDK is even imported; None where the SDK must decide (an unknown protocol version, odd params).

    The SDK advertises prompts, resources and tools, and echoes a protocol version it can
    negotiate; tests/server/test_server_stdio_start.py checks both answers agree."""
    from bridge import __version__
    from bridge.server.stdio import HANDSHAKE_VERSIONS

    def answer(params: dict[str, Any]) -> dict[str, Any] | None:
        version, client = params.get("protocolVersion"), params.get("clientInfo")
        if version not in HANDSHAKE_VERSIONS or not isinstance(params.get("capabilities"), dict) \
                or not isinstance(client, dict) or not all(isinstance(client.get(k), str) for k in ("name", "version")):
            return None
        return {
            "capabilities": {"prompts": {"listChanged": False}, "resources": {"listChanged": False, "subscribe": False},
                             "tools": {"listChanged": False}},
            "instructions": _instructions(names),
            "protocolVersion": version,
            "serverInfo": {"name": SERVER_NAME, "version": __version__},
        }

    return answer
