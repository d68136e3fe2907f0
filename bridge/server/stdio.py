"""MCP over stdin/stdout that stops cleanly: at the end of stdin, on SIGTERM and on SIGINT.

The SDK's `MCPServer.run("stdio")` reads stdin on a worker thread that cannot be cancelled, so a
SIGTERM or Ctrl-C left the server waiting for the host's next line (it stopped only once the host
closed the pipe), and the SIGTERM handler that raised `SystemExit` from inside the event loop could
land in one of its tasks, which asyncio then reported as "unhandled exception during asyncio.run()
shutdown". Here the signals are received by the event loop itself (no exception from a handler), and
stdin is read when the loop sees it readable, so cancelling the read is immediate. MCP hosts such as
llama-server stop and respawn their stdio servers routinely.
"""

from __future__ import annotations

import os
import signal
from typing import Any

__all__ = ["run_stdio"]


class _StdinLines:
    """The lines of a file descriptor, read when the event loop says it is readable.

    A descriptor the loop cannot watch (a regular file, /dev/null) never blocks: it is read directly."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""
        self._eof = False
        self._watchable = True

    def __aiter__(self) -> _StdinLines:
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


def run_stdio(server: Any) -> int | None:
    """Serve `server` (an `MCPServer`) over stdin/stdout until stdin ends (None) or a SIGTERM/SIGINT
    arrives (its number). The SDK points fd 1 at stderr meanwhile, and fd 0 reads /dev/null here, so
    stray output and child processes cannot touch the protocol channel."""
    import anyio

    wire = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    try:
        return anyio.run(_serve, server, wire)
    finally:
        os.dup2(wire, 0)
        os.close(wire)


async def _serve(server: Any, wire: int) -> int | None:
    import anyio
    from mcp.server.stdio import stdio_server

    stopped_by: list[int] = []

    async def watch_signals(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            task_status.started()
            async for signum in signals:
                stopped_by.append(int(signum))
                group.cancel_scope.cancel()
                return

    async with anyio.create_task_group() as group:
        await group.start(watch_signals)  # before the first message is read, so no signal slips past
        lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async runs, with our stdin
        async with stdio_server(stdin=_StdinLines(wire)) as (read_stream, write_stream):  # type: ignore[arg-type]
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
        group.cancel_scope.cancel()
    return stopped_by[0] if stopped_by else None
