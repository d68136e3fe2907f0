"""`bridge serve --stdio` answers `initialize` before the MCP SDK is loaded, with the SDK's own answer.

The SDK's answer to the same `initialize` is compared inside the server and a difference is logged;
so each case checks the answer, that the session goes on (tools/list, a tool call) and that no
difference was logged. Timings are bench/stdio_start_bench.py's business.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from support.server import bridge_command, make_repo, subprocess_env

from bridge.server.stdio import HANDSHAKE_VERSIONS


def _initialize(version: str, id_: object = 1) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def _session(repo: Path, home: Path, messages: list[dict], replies: int, *args: str) -> tuple[list[dict], str]:
    """Send `messages` at once, read `replies` messages, close stdin; the replies and the server's stderr."""
    proc = subprocess.Popen(
        bridge_command("serve", "--stdio", "--repo", str(repo), "--no-vectors", "--audit-log", "off", *args),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(home),
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
        proc.stdin.flush()
        got = [json.loads(proc.stdout.readline()) for _ in range(replies)]
        proc.stdin.close()
        proc.wait(60)
        rest, stderr = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        proc.stdout.close()
        proc.stderr.close()  # type: ignore[union-attr]
    assert proc.returncode == 0, stderr
    assert rest == "", rest  # nothing more than the replies: initialize was answered once
    return got, stderr


def _then_tools(id_: int = 2) -> list[dict]:
    return [{"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": id_, "method": "tools/list", "params": {}},
            {"jsonrpc": "2.0", "id": id_ + 1, "method": "tools/call",
             "params": {"name": "search_code", "arguments": {"query": "parse_config", "k": 1}}}]


def test_the_versions_answered_early_are_the_ones_the_sdk_negotiates_by_handshake() -> None:
    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_the_early_answer_is_the_sdks_and_the_session_goes_on(repo: Path, bridge_home: Path, version: str) -> None:
    replies, stderr = _session(repo, bridge_home, [_initialize(version), *_then_tools()], 3)
    assert [r["id"] for r in replies] == [1, 2, 3]  # initialize answered once, then the rest in order
    result = replies[0]["result"]
    assert result["protocolVersion"] == version
    assert result["serverInfo"]["name"] == "mcp-retrieval-bridge" and result["instructions"].startswith("Code search over demo.")
    assert "search_code" in {t["name"] for t in replies[1]["result"]["tools"]}
    assert replies[2]["result"]["structuredContent"]["hits"][0]["path"] == "src/config.py"
    assert "differed from the MCP SDK's" not in stderr, stderr


@pytest.mark.parametrize("version", ["2026-07-28", "1999-01-01"])
def test_a_version_not_negotiated_by_handshake_is_left_to_the_sdk(repo: Path, bridge_home: Path, version: str) -> None:
    replies, stderr = _session(repo, bridge_home, [_initialize(version, "first"), *_then_tools()], 3)
    assert [r["id"] for r in replies] == ["first", 2, 3]
    assert replies[0]["result"]["protocolVersion"] in HANDSHAKE_VERSIONS
    assert "Traceback" not in stderr


def test_a_first_message_that_is_not_initialize_gets_the_sdks_answer(repo: Path, bridge_home: Path) -> None:
    replies, _ = _session(repo, bridge_home, [{"jsonrpc": "2.0", "id": 7, "method": "ping"}, _initialize("2025-06-18")], 2)
    assert {r["id"] for r in replies} == {7, 1}
    assert next(r for r in replies if r["id"] == 1)["result"]["protocolVersion"] == "2025-06-18"


class _Wire:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write_line(self, text: str) -> None:
        self.lines.append(text)


def test_a_difference_between_the_early_answer_and_the_sdks_is_logged_and_the_sdks_is_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import anyio

    from bridge.server.stdio import _WireWriter

    wire = _Wire()
    writer = _WireWriter(wire, (1, {"protocolVersion": "2025-06-18"}))  # type: ignore[arg-type]

    async def main() -> None:
        await writer.write(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25"}}) + "\n")
        await writer.write(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"later": True}}) + "\n")

    anyio.run(main)
    assert "differed from the MCP SDK's" in caplog.text
    assert [json.loads(line)["result"] for line in wire.lines] == [{"later": True}]


def test_indexes_that_cannot_open_after_the_handshake_make_every_tool_call_say_why(
    repo: Path, bridge_home: Path, tmp_path: Path
) -> None:
    other = make_repo(tmp_path / "other")
    index_dir = tmp_path / "other-index"
    subprocess.run(bridge_command("index", str(other), "--index-dir", str(index_dir), "--no-vectors"),
                   check=True, capture_output=True, timeout=120, env=subprocess_env(bridge_home))
    got, err = _session(repo, bridge_home, [_initialize("2025-06-18"), *_then_tools()], 3, "--index-dir", str(index_dir))
    replies = {r["id"]: r for r in got}
    assert replies[1]["result"]["protocolVersion"] == "2025-06-18"
    called = replies[3]["result"]
    assert called["isError"] and "belongs to" in called["content"][0]["text"] and "--index-dir" in called["content"][0]["text"]
    assert "belongs to" in err and "Traceback" not in err
