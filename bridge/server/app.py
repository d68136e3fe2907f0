"""Putting it together: the MCP server object, its HTTP app, and the ways to run it.

- `serve_http(options)`: Streamable HTTP at http://HOST:PORT/mcp until interrupted (`bridge serve`).
- `serve_stdio(options)`: the same tools over stdin/stdout (`bridge serve --stdio`).
- `start_background(repos, token)`: an HTTP server on a free loopback port in a background
  thread, for in-process callers such as the chat loop; returns a `RunningServer`.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bridge.errors import BridgeError, ServeError
from bridge.server.audit import AuditLog, AuditMiddleware, default_audit_path
from bridge.server.auth import BearerAuth, check_bind, is_loopback
from bridge.server.catalog import TOOL_NAMES
from bridge.server.cors import BrowserAccess, browser_origins
from bridge.server.opening import OpeningRepos
from bridge.server.spec import RepoSpec, served_names
from index.errors import IndexingError

if TYPE_CHECKING:  # repos imports the index's heavy modules: loaded only when an index opens
    from bridge.server.repos import EventFn, ProgressFn, RepoSet

__all__ = [
    "ServeOptions",
    "Service",
    "RunningServer",
    "open_service",
    "build_server",
    "http_app",
    "transport_security",
    "bind_socket",
    "serve_http",
    "serve_stdio",
    "start_background",
    "url_for",
]

_WILDCARDS = ("0.0.0.0", "::", "")
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


def transport_security(
    host: str, allowed_origins: tuple[str, ...] = (), allowed_hosts: tuple[str, ...] = ()
) -> Any:
    """The SDK's DNS-rebinding (Host/Origin) check, kept on wherever the served names are known.

    On loopback, 127.0.0.1/localhost/[::1] with any port (and without one, for port 80) are
    accepted, and browser pages only from those origins plus `allowed_origins`. A wildcard bind
    (0.0.0.0, ::) cannot know the names clients will use: the check is on only if
    `allowed_hosts` lists them (a token is required there anyway).
    """
    from mcp.server.transport_security import TransportSecuritySettings

    if is_loopback(host):
        names = ["127.0.0.1", "localhost", "[::1]"]
    elif host in _WILDCARDS:
        names = []
    else:
        names = [f"[{host}]" if ":" in host else host]
    names += [h for h in allowed_hosts]
    if not names:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = [n for name in names for n in ((name,) if _has_port(name) else (name, f"{name}:*"))]
    origins = [o for name in names if not _has_port(name) for o in (f"http://{name}", f"http://{name}:*")]
    origins += [o.rstrip("/") for o in allowed_origins]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def _has_port(name: str) -> bool:
    return name.rsplit("]", 1)[-1].count(":") == 1 if name.startswith("[") else name.count(":") == 1


class _ClientLeftFilter(logging.Filter):
    """Drops the SDK's ERROR record, with traceback, for a client that hung up mid-request.

    Leaving is the client's doing, not a server error, and formatting that traceback blocks the
    event loop for ~60 ms: a client that connects and hangs up in a loop stalled every other
    request (measured in bench/reliability.py burst)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from starlette.requests import ClientDisconnect

        return not (record.exc_info and isinstance(record.exc_info[1], ClientDisconnect))


_CLIENT_LEFT = _ClientLeftFilter()


def http_app(server: Any, options: ServeOptions) -> Any:
    """The ASGI app: the SDK's Streamable HTTP app (with its lifespan), behind the bearer check,
    behind CORS for the origins named in `allowed_origins` (browser pages; preflights carry no token)."""
    sdk_log = logging.getLogger("mcp.server.streamable_http")
    if _CLIENT_LEFT not in sdk_log.filters:
        sdk_log.addFilter(_CLIENT_LEFT)
    origins = browser_origins(options.allowed_origins)
    app = server.streamable_http_app(
        streamable_http_path=options.path,
        transport_security=transport_security(options.host, origins, options.allowed_hosts),
        host=options.host,
    )
    if options.token:
        app = BearerAuth(app, options.token, options.path)
    return BrowserAccess(app, origins) if origins else app


def url_for(host: str, port: int, path: str = "/mcp") -> str:
    shown = "127.0.0.1" if host in _WILDCARDS else host
    return f"http://[{shown}]:{port}{path}" if ":" in shown else f"http://{shown}:{port}{path}"


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket, bound before serving so a busy port is a clear error and port 0 works."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise ServeError(f"cannot resolve --host {host!r} ({exc.strerror}): pass an address like 127.0.0.1") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port} ({exc.strerror}): pass another --port") from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _uvicorn_server(app: Any) -> Any:
    import uvicorn

    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=3, ws="none",
        # Longer than clients keep an idle connection (httpx: 5 s), so the client closes it first:
        # with equal timeouts a burst reuses a connection the server is closing (ReadError).
        timeout_keep_alive=30,
    )
    return uvicorn.Server(config)


@contextmanager
def _sigterm_exits() -> Iterator[None]:
    """SIGTERM (a service manager's or an MCP client's way to stop a server) ends it as Ctrl-C does:
    the watchers stop, the indexes and the audit log close, and the process exits 143. Without this,
    uvicorn re-raises SIGTERM after its own shutdown with the default action, which kills the process
    before `Service.close` and makes multiprocessing's resource tracker print a warning about
    "leaked semaphore objects" on every stop. Signals can be set only from the main thread; a
    server started on another one (`start_background`) is stopped with `stop()` instead."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def serve_http(
    options: ServeOptions,
    on_event: EventFn = lambda *_: None,
    on_progress: ProgressFn = lambda *_: None,
    on_ready: Callable[[str, Service], None] = lambda *_: None,
) -> None:
    """Serve until SIGINT/SIGTERM. `on_ready(url, service)` is called once the port is listening."""
    check_bind(options.host, options.token)
    browser_origins(options.allowed_origins)  # a malformed origin is an error before anything starts
    sock = bind_socket(options.host, options.port)
    try:
        service = open_service(options, on_event, on_progress)
    except BaseException:
        sock.close()
        raise
    try:
        server = _uvicorn_server(http_app(build_server(service, options.tools), options))
        on_ready(url_for(options.host, sock.getsockname()[1], options.path), service)
        with _sigterm_exits():
            server.run(sockets=[sock])
    finally:
        sock.close()
        service.close()


def serve_stdio(
    options: ServeOptions,
    on_event: EventFn = lambda *_: None,
    on_progress: ProgressFn = lambda *_: None,
    on_ready: Callable[[Service], None] = lambda *_: None,
) -> None:
    """Serve over stdin/stdout until stdin closes (return) or SIGTERM/SIGINT (exit 143/130 after closing
    the service, as the HTTP server does); the SDK points fd 1 at stderr meanwhile.

    The handshake comes first: `initialize` is answered while the SDK is still importing (see
    `bridge.server.stdio`), and the indexes open on a background thread once the server is built
    (`on_ready` is called from there when they are open); a tool call meanwhile waits for them."""
    from bridge.server.stdio import EarlyHandshake, PendingSignals, StdioWire, run_stdio

    wire = StdioWire()
    pending = PendingSignals()
    try:
        service = opening_service(options, on_event, on_progress, on_ready)
        try:
            early = EarlyHandshake(wire, initialize_answer(service.names))
            server = build_server(service, options.tools)
            assert isinstance(service.repos, OpeningRepos)
            service.repos.start()
            stopped_by = run_stdio(server, wire, early, pending)
        finally:
            service.close()
    finally:
        pending.restore()
        wire.close()
    if stopped_by is not None:
        raise SystemExit(128 + stopped_by)


@dataclass
class RunningServer:
    """An HTTP server running on a background thread; `stop()` shuts it down and closes the indexes."""

    url: str
    token: str | None
    service: Service
    _server: Any
    _thread: threading.Thread

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)
        self.service.close()

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_background(
    repos: list[Path],
    token: str | None = None,
    *,
    index_dir: Path | None = None,
    embedder: str | None = None,
    no_vectors: bool = False,
    watch: bool = True,
    audit_log: Path | None = None,
    port: int = 0,
    on_event: EventFn = lambda *_: None,
    start_timeout: float = 30.0,
    milvus_uri: str | None = None,
    milvus_token: str | None = None,
) -> RunningServer:
    """Start the HTTP server in-process on a free loopback port (or `port`) and wait until it serves.

    The audit log is off unless `audit_log` is given. `index_dir` only with a single repository.
    """
    if index_dir is not None and len(repos) != 1:
        raise ServeError("index_dir works with exactly one repository")
    specs = tuple(RepoSpec(Path(r), index_dir, embedder, no_vectors, milvus_uri=milvus_uri, milvus_token=milvus_token)
                  for r in repos)
    options = ServeOptions(repos=specs, port=port, token=token, watch=watch and not milvus_uri, audit_log=audit_log)
    sock = bind_socket(options.host, options.port)
    try:
        service = open_service(options, on_event)
    except BaseException:
        sock.close()
        raise
    server = _uvicorn_server(http_app(build_server(service), options))
    url = url_for(options.host, sock.getsockname()[1], options.path)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(server.serve(sockets=[sock]))
        except BaseException as exc:  # noqa: BLE001 - any failure, even SystemExit, is reported to the caller below
            failure.append(exc)
        finally:
            sock.close()

    thread = threading.Thread(target=run, name="bridge-http", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    if not server.started:
        server.should_exit = True
        thread.join(5.0)
        service.close()
        why = f": {failure[0]}" if failure else ""
        raise ServeError(f"the MCP server did not start within {start_timeout:.0f} s{why}")
    return RunningServer(url, token, service, server, thread)
