"""MCP over stdin/stdout: answered early, stopped cleanly.

**Early.** An MCP host starts the server and waits for it (llama-server gives a server 10 s to list its
tools); importing the MCP SDK alone takes most of a second on a calm machine and several under load.
`EarlyHandshake` reads the wire on a thread from the moment `bridge serve --stdio` starts, and answers
a well-formed `initialize` at once with the result the SDK would give (the served names are known
before any index opens). Everything read is handed to the SDK when it is ready, that `initialize`
included, so its session is the same as without the early answer; its own answer to it is dropped (and
compared with ours: a difference is logged as a warning). `initialize` asking for a protocol version
this module does not know is left to the SDK.

**Clean stops.** At the end of stdin, on SIGTERM and on SIGINT. The SDK's own stdio transport reads
stdin on a worker thread that cannot be cancelled, so a signal left the server waiting for the host's
next line, and a SIGTERM handler that raised `SystemExit` inside the event loop could land in one of its
tasks ("unhandled exception during asyncio.run() shutdown"). Here stdin is read when the event loop sees
it readable, and the signals are received by the loop; before the loop runs they are only recorded.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["HANDSHAKE_VERSIONS", "EarlyHandshake", "PendingSignals", "StdioWire", "run_stdio"]

# The protocol versions negotiated by `initialize` (mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS; a
# test checks they agree): the SDK answers each with itself.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

_log = logging.getLogger(__name__)


class StdioWire:
    """The protocol's stdin and stdout, taken over at start-up. Meanwhile fd 0 reads /dev/null and fd 1
    writes to stderr, so stray output and child processes cannot touch the protocol channel."""

    def __init__(self) -> None:
        self.read_fd = os.dup(0)
        self.write_fd = os.dup(1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)
        self._write_lock = threading.Lock()

    def write_line(self, text: str) -> None:
        data = memoryview((text.rstrip("\n") + "\n").encode("utf-8"))
        with self._write_lock:
            while data:
                data = data[os.write(self.write_fd, data):]

    def close(self) -> None:
        os.dup2(self.read_fd, 0)
        os.dup2(self.write_fd, 1)
        os.close(self.read_fd)
        os.close(self.write_fd)


class PendingSignals:
    """Records SIGTERM and SIGINT until the event loop receives them itself (a handler that raised
    would interrupt whatever runs, the event loop's own tasks included)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._previous = {signum: signal.signal(signum, self._record) for signum in _STOP_SIGNALS}

    def _record(self, signum: int, _frame: object) -> None:
        self.received.append(signum)

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


class EarlyHandshake:
    """Reads the wire on a thread until `hand_over()`; answers the first message if it is an
    `initialize` that `answer(params)` can answer (None: leave it to the SDK)."""

    def __init__(self, wire: StdioWire, answer: Callable[[dict[str, Any]], dict[str, Any] | None]) -> None:
        self._wire, self._answer = wire, answer
        self.buffer = b""
        self.eof = False
        self.answered: tuple[object, dict[str, Any]] | None = None  # (request id, our result)
        self._decided = False
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="bridge-early-handshake", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self.eof:
            ready, _, _ = select.select([self._wire.read_fd, self._wake_r], [], [])
            if self._wake_r in ready:
                return
            chunk = os.read(self._wire.read_fd, 65536)
            self.eof = not chunk
            self.buffer += chunk
            if not self._decided and (b"\n" in self.buffer or self.eof):
                self._decided = True
                self._reply_to(self.buffer.split(b"\n", 1)[0])

    def _reply_to(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict) or message.get("method") != "initialize" or "id" not in message:
            return
        params = message.get("params")
        result = self._answer(params) if isinstance(params, dict) else None
        if result is not None:
            self._wire.write_line(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}))
            self.answered = (message["id"], result)

    def hand_over(self) -> None:
        """Stop reading; what was read is in `buffer` (and `eof`), for the SDK to read first."""
        os.write(self._wake_w, b"x")
        self._thread.join()
        os.close(self._wake_r)
        os.close(self._wake_w)


class _WireLines:
    """The wire's lines: first what the early handshake read, then whatever the fd brings, read when
    the event loop says it is readable. A descriptor the loop cannot watch (a regular file,
    /dev/null) never blocks: it is read directly."""

    def __init__(self, fd: int, buffer: bytes, eof: bool) -> None:
        self._fd = fd
        self._buffer = buffer
        self._eof = eof
        self._watchable = True

    def __aiter__(self) -> _WireLines:
        return self

    async def __anext__(self) -> str:
        import anyio

        while b"\n" not in self._buffer and not self._eof:
            if self._watchable:
                try:
                    await anyio.wait_readable(self._fd)
                except (OSError, NotImplementedError):  # epoll refuses regular files
                    self._watchable = False
            chunk = os.read(self._fd, 65536)
            self._eof = not chunk
            self._buffer += chunk
        if not self._buffer:
            raise StopAsyncIteration
        line, newline, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", errors="replace") + newline.decode()


class _WireWriter:
    """What the SDK writes, to the wire; its answer to an `initialize` answered early is dropped."""

    def __init__(self, wire: StdioWire, answered: tuple[object, dict[str, Any]] | None) -> None:
        self._wire = wire
        self._answered = answered

    async def write(self, text: str) -> None:
        import anyio

        if self._answered is not None:
            request_id, ours = self._answered
            message = json.loads(text)
            if message.get("id") == request_id and ("result" in message or "error" in message):
                self._answered = None
                if message.get("result") != ours:
                    _log.warning("the early answer to initialize differed from the MCP SDK's: %s", text.strip())
                return
        await anyio.to_thread.run_sync(self._wire.write_line, text)

    async def flush(self) -> None:
        pass


def run_stdio(server: Any, wire: StdioWire, early: EarlyHandshake, pending: PendingSignals) -> int | None:
    """Serve `server` (an `MCPServer`) until the wire's input ends (None) or SIGTERM/SIGINT (its number)."""
    import anyio

    early.hand_over()
    if pending.received:
        return pending.received[0]
    return anyio.run(_serve, server, wire, early, pending)


async def _serve(server: Any, wire: StdioWire, early: EarlyHandshake, pending: PendingSignals) -> int | None:
    import anyio
    from mcp.server.stdio import stdio_server

    stopped_by: list[int] = []

    async def watch_signals(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(*_STOP_SIGNALS) as signals:
            task_status.started()
            if pending.received:  # arrived between hand_over() and the receiver
                stopped_by.append(pending.received[0])
                group.cancel_scope.cancel()
                return
            async for signum in signals:
                stopped_by.append(int(signum))
                group.cancel_scope.cancel()
                return

    async with anyio.create_task_group() as group:
        await group.start(watch_signals)
        lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async runs, with our streams
        stdin, stdout = _WireLines(wire.read_fd, early.buffer, early.eof), _WireWriter(wire, early.answered)
        async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):  # type: ignore[arg-type]
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
        group.cancel_scope.cancel()
    return stopped_by[0] if stopped_by else None
