"""`bridge serve --stdio` started and stopped 30 times, as MCP hosts do (llama-server stops and respawns
its stdio servers routinely): by SIGTERM, by SIGINT and by the end of stdin, at three moments (just
after the handshake, after listing the tools, with a tool call in flight).

Every stop must be prompt while the host keeps stdin open, exit with the signal's code (143, 130) or
0 at the end of stdin, and leave no traceback, no asyncio complaint and no leaked-semaphore warning.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
from pathlib import Path

import pytest
from support.server import bridge_command, make_repo, subprocess_env

STARTS = 30
STOP_WITHIN_S = 30
STOPS = {"SIGTERM": 128 + signal.SIGTERM, "SIGINT": 128 + signal.SIGINT, "end of stdin": 0}
MOMENTS = ("after initialize", "after tools/list", "during a tool call")


def _message(id_: int, method: str, params: dict) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + "\n"


INITIALIZE = _message(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "loop", "version": "1"}})
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"


def _start_and_stop(repo: Path, home: Path, stop: str, moment: str) -> tuple[int, str]:
    proc = subprocess.Popen(
        bridge_command("serve", "--stdio", "--repo", str(repo), "--no-vectors", "--audit-log", "off"),  # watching, as hosts run it
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(home),
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(INITIALIZE)
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        proc.stdin.write(INITIALIZED)
        if moment == "after tools/list":
            proc.stdin.write(_message(2, "tools/list", {}))
            proc.stdin.flush()
            assert len(json.loads(proc.stdout.readline())["result"]["tools"]) == 7
        elif moment == "during a tool call":
            proc.stdin.write(_message(2, "tools/call", {"name": "search_code", "arguments": {"query": "parse_config"}}))
        proc.stdin.flush()
        if stop == "end of stdin":
            proc.stdin.close()
        else:  # the host keeps stdin open: the signal alone must stop the server
            proc.send_signal(getattr(signal, stop))
        code = proc.wait(STOP_WITHIN_S)
        return code, proc.stderr.read()
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)
        pytest.fail(f"{stop} {moment}: the server was still running {STOP_WITHIN_S} s later")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if not stream.closed:
                stream.close()


def test_thirty_starts_and_stops_by_signal_or_end_of_stdin_are_clean(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "demo")
    cases = list(itertools.islice(itertools.cycle(itertools.product(STOPS, MOMENTS)), STARTS))
    failures = []
    for stop, moment in cases:
        code, stderr = _start_and_stop(repo, tmp_path / "home", stop, moment)
        noise = [s for s in ("Traceback", "unhandled exception", "Exception in", "leaked") if s in stderr]
        if code != STOPS[stop] or noise:
            failures.append(f"{stop} {moment}: exit {code}, {noise}\n{stderr[-2000:]}")
    assert not failures, f"{len(failures)} of {STARTS} stops were not clean:\n" + "\n".join(failures)
