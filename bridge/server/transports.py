"""How the MCP server runs: Streamable HTTP, stdio, or an HTTP server in a background thread.

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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bridge.errors import ServeError
from bridge.server.app import ServeOptions, Service, build_server, initialize_answer, open_service, opening_service
from bridge.server.auth import BearerAuth, check_bind, is_loopback
from bridge.server.cors import BrowserAccess, browser_origins
from bridge.server.opening import OpeningRepos
from bridge.server.spec import RepoSpec

if TYPE_CHECKING:
    from bridge.server.repos import EventFn, ProgressFn

__all__ = ["RunningServer", "bind_socket", "http_app", "serve_http", "serve_stdio", "start_background",
           "transport_security", "url_for"]

_WILDCARDS = ("0.0.0.0", "::", "")


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
