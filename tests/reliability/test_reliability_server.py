"""The HTTP server under rough clients: ones that hang up mid-request, ones that trickle bytes,
a burst of 1,000 calls, and every way of getting the token, Origin, Host or size wrong.

After each ordeal the same server must still answer a well-behaved client correctly, and the
server's own logs must hold no error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections.abc import Iterator

import anyio
import httpx
import pytest
from support.server import make_repo

from bridge.server.connect import connect
from bridge.server.transports import RunningServer, start_background

TOKEN = "Reliability-Token-0123456789abcdefXYZ"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
BODY_LIMIT = 4 * 1024 * 1024  # the MCP SDK's default request body limit


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    base = tmp_path_factory.mktemp("rough")
    root = make_repo(base / "demo")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BRIDGE_HOME", str(base / "home"))
        running = start_background([root], token=TOKEN, no_vectors=True, watch=False)
        try:
            yield running
        finally:
            running.stop()


@pytest.fixture
def server_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fails the test if the server logs an error meanwhile (uvicorn and the SDK log a crashed request)."""
    caplog.set_level(logging.WARNING)
    yield
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors


def _address(server: RunningServer) -> tuple[str, int]:
    url = httpx.URL(server.url)
    return url.host, int(url.port or 80)


def _still_serves(server: RunningServer) -> None:
    """A well-behaved client gets right answers from every kind of tool."""

    async def main() -> list[object]:
        async with connect(server.url, TOKEN) as client:
            return [
                await client.call_tool("search_code", {"query": "parse_config settings", "k": 2}),
                await client.call_tool("read_file", {"path": "src/config.py", "start_line": 4, "end_line": 4}),
                await client.call_tool("list_files", {"path_glob": "src/**"}),
            ]

    search, read, listing = anyio.run(main)
    assert search.structured_content["hits"][0]["path"] == "src/config.py"
    assert read.structured_content["text"] == "def parse_config(path):"
    assert listing.structured_content["files"] == ["src/config.py", "src/server.py"]


def _request(server: RunningServer, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    host, port = _address(server)
    head = {"Host": f"{host}:{port}", "Authorization": f"Bearer {TOKEN}", **ACCEPT, "Content-Length": str(len(body))}
    head.update(headers or {})
    lines = "".join(f"{k}: {v}\r\n" for k, v in head.items())
    return f"POST /mcp HTTP/1.1\r\n{lines}\r\n".encode() + body


def _session(server: RunningServer) -> str:
    """A raw MCP session: initialize, then the initialized notification; returns its id."""
    auth = {**ACCEPT, "Authorization": f"Bearer {TOKEN}"}
    response = httpx.post(server.url, json=INIT, headers=auth, timeout=30)
    session = response.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    httpx.post(server.url, json=note, headers={**auth, "mcp-session-id": session}, timeout=30).raise_for_status()
    return session


def _call(n: int, tool: str, arguments: dict) -> dict:
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


# --- rough clients -------------------------------------------------------------------------------


# No ERROR either: the SDK's traceback for a departed client is filtered out (bridge.server.transports),
# since formatting it stalled the event loop ~60 ms per client. The SDK leaves that request's
# streams unclosed; they are garbage (no RSS growth in bench/reliability.py burst), but their
# finaliser warns, and pytest would turn the warning into an error.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_clients_that_hang_up_mid_request_leave_the_server_serving(server: RunningServer, server_errors: None) -> None:
    session = _session(server)
    for n in range(40):
        call = _call(100 + n, "search_code", {"query": "handler response", "k": 50, "max_tokens": 20000})
        body = json.dumps(call).encode()
        with socket.create_connection(_address(server), timeout=10) as sock:
            if n % 2:  # promise a body and send a third of it
                sock.sendall(_request(server, body)[: -len(body) * 2 // 3])
            else:  # send the whole call, then leave before the answer comes
                sock.sendall(_request(server, body, {"mcp-session-id": session}))
            sock.shutdown(socket.SHUT_RDWR)
    _still_serves(server)


def test_a_client_that_resets_the_connection_mid_response_does_no_harm(server: RunningServer, server_errors: None) -> None:
    session = _session(server)
    for n in range(10):
        body = json.dumps(_call(200 + n, "read_file", {"path": "src/server.py", "max_tokens": 20000})).encode()
        sock = socket.create_connection(_address(server), timeout=10)
        sock.sendall(_request(server, body, {"mcp-session-id": session}))
        sock.recv(64)  # the response has started
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()  # linger 0: an RST, not a polite FIN
    _still_serves(server)


def test_slow_clients_that_trickle_their_request_do_not_hold_up_others(server: RunningServer, server_errors: None) -> None:
    request = _request(server, json.dumps(INIT).encode())
    slow = [socket.create_connection(_address(server), timeout=30) for _ in range(50)]
    try:
        for sock in slow:
            sock.sendall(request[:40])  # half a request line, then nothing for a while
        started = time.perf_counter()
        _still_serves(server)
        assert time.perf_counter() - started < 10
        for sock in slow:
            sock.sendall(request[40:])
        answers = [_read_status(sock) for sock in slow]
    finally:
        for sock in slow:
            sock.close()
    assert answers == [200] * len(slow)


def _read_status(sock: socket.socket) -> int:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(1024)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ", 2)[1])


def test_a_burst_of_a_thousand_calls_is_answered_without_an_error(server: RunningServer, server_errors: None) -> None:
    queries = ["parse_config", "handler_7 response", "Loader load", "guide settings", "README demo"]

    async def one_session(n: int) -> list[object]:
        async with connect(server.url, TOKEN) as client:
            calls = []
            for i in range(100):
                if i % 4 == 3:
                    calls.append(client.call_tool("read_file", {"path": "src/config.py", "end_line": 3}))
                else:
                    calls.append(client.call_tool("search_code", {"query": queries[(n + i) % 5], "k": 3}))
            return list(await asyncio.gather(*calls))

    async def burst() -> list[object]:
        return [r for rs in await asyncio.gather(*(one_session(n) for n in range(10))) for r in rs]

    results = anyio.run(burst)
    assert len(results) == 1000
    assert [r.content[0].text for r in results if r.is_error] == []
    assert all(r.structured_content for r in results)
    _still_serves(server)


# --- auth, Origin, Host, size ------------------------------------------------------------------


def _status(server: RunningServer, headers: dict[str, str], content: bytes | None = None) -> int:
    """The status of one raw request (any header bytes, unlike an HTTP client); 0 if the server hung up."""
    body = content if content is not None else json.dumps(INIT).encode()
    host, port = _address(server)
    head = {"Host": f"{host}:{port}", **ACCEPT, "Content-Length": str(len(body)), **headers}
    lines = b"".join(f"{k}: ".encode() + v.encode("utf-8", "surrogateescape") + b"\r\n" for k, v in head.items())
    with socket.create_connection((host, port), timeout=30) as sock:
        # Refused before the whole body was read: the status line is still there to read.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(b"POST /mcp HTTP/1.1\r\n" + lines + b"\r\n" + body)
        try:
            return _read_status(sock)
        except (ConnectionResetError, IndexError, ValueError):
            return 0


AUTH_CASES = [
    ("missing", {}, 401),
    ("empty token", {"Authorization": "Bearer "}, 401),
    ("scheme only", {"Authorization": "Bearer"}, 401),
    ("blank header", {"Authorization": ""}, 401),
    ("token upper-cased", {"Authorization": f"Bearer {TOKEN.upper()}"}, 401),
    ("token lower-cased", {"Authorization": f"Bearer {TOKEN.lower()}"}, 401),
    ("token without scheme", {"Authorization": TOKEN}, 401),
    ("other scheme", {"Authorization": f"Token {TOKEN}"}, 401),
    ("token twice", {"Authorization": f"Bearer {TOKEN} {TOKEN}"}, 401),
    ("token plus one", {"Authorization": f"Bearer {TOKEN}0"}, 401),
    ("8 KB token", {"Authorization": "Bearer " + "A" * 8192}, 401),
    ("60 KB token", {"Authorization": "Bearer " + TOKEN * 1600}, 401),
    ("non-ASCII token", {"Authorization": "Bearer tökén"}, 401),
    ("control characters", {"Authorization": f"Bearer {TOKEN}\x01"}, 401),
    ("scheme lower-cased", {"Authorization": f"bearer {TOKEN}"}, 200),
    ("scheme upper-cased", {"Authorization": f"BEARER {TOKEN}"}, 200),
]


@pytest.mark.parametrize(("case", "headers", "status"), AUTH_CASES, ids=[c[0] for c in AUTH_CASES])
def test_only_the_exact_token_opens_the_door(server: RunningServer, case: str, headers: dict, status: int) -> None:
    assert _status(server, headers) == status, case


def test_a_huge_authorization_header_is_refused_and_the_server_stays_up(server: RunningServer, server_errors: None) -> None:
    assert _status(server, {"Authorization": "Bearer " + "A" * 200_000}) in (0, 400, 401, 431)
    _still_serves(server)


def test_a_wrong_token_is_refused_before_the_body_is_read(server: RunningServer) -> None:
    assert _status(server, {"Authorization": "Bearer wrong"}, b"x" * (BODY_LIMIT + 1)) == 401


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Origin": "http://evil.example"}, 403),
        ({"Origin": "https://127.0.0.1.evil.example"}, 403),
        ({"Origin": "http://localhost.evil.example:80"}, 403),
        ({"Host": "evil.example"}, 421),
        ({"Host": "127.0.0.1.evil.example:80"}, 421),
        ({"Host": "localhost@evil.example"}, 421),
    ],
)
def test_a_foreign_origin_or_host_is_refused_even_with_the_token(server: RunningServer, headers: dict, status: int) -> None:
    assert _status(server, {"Authorization": f"Bearer {TOKEN}", **headers}) == status


def test_a_request_over_the_size_limit_gets_413_and_the_server_stays_up(server: RunningServer, server_errors: None) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert _status(server, auth, b" " * (BODY_LIMIT + 1)) == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit must hold for a streamed body too
        for _ in range(BODY_LIMIT // 65536 + 2):
            yield b" " * 65536

    streamed = httpx.post(server.url, content=chunks(), headers={**ACCEPT, **auth}, timeout=60)
    assert streamed.status_code == 413
    _still_serves(server)


def test_a_tool_argument_just_under_the_size_limit_is_a_tool_error_not_a_crash(
    server: RunningServer, server_errors: None
) -> None:
    session = _session(server)
    call = _call(9, "search_code", {"query": "q" * (BODY_LIMIT - 1024)})
    headers = {**ACCEPT, "Authorization": f"Bearer {TOKEN}", "mcp-session-id": session}
    response = httpx.post(server.url, json=call, headers=headers, timeout=60)
    assert response.status_code == 200
    assert '"isError":true' in response.text and "over the 65536-byte (64 KB) limit" in response.text
    _still_serves(server)


@pytest.mark.parametrize(
    "body",
    [b"", b"{", b"null", b"[]", b'{"jsonrpc": "2.0"}', b"\xff\xfe\x00", b'{"jsonrpc":"2.0","id":1,"method":"x"}'],
)
def test_malformed_json_rpc_is_refused_cleanly(server: RunningServer, server_errors: None, body: bytes) -> None:
    assert 400 <= _status(server, {"Authorization": f"Bearer {TOKEN}"}, body) < 500


def test_the_server_is_alive_after_all_of_it(server: RunningServer) -> None:
    _still_serves(server)
