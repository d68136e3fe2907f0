"""Stateless `bridge serve` replicas over one real Milvus Lite server."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
from support.milvus import MilvusLiteServer

from bridge.server.connect import connect
from bridge.server.transports import RunningServer, start_background
from index.milvus import MilvusStore, build_milvus

QUERIES = ["load the json config", "retry backoff delays", "invalid port number", "SessionStore touch"]


def _call(server: RunningServer, tool: str, args: dict) -> object:
    async def main() -> object:
        async with connect(server.url, server.token) as client:
            return await client.call_tool(tool, args)

    return anyio.run(main)


def _hits(server: RunningServer, query: str, mode: str = "lexical") -> list[tuple[str, int]]:
    result = _call(server, "search_code", {"query": query, "mode": mode})
    return [(h["path"], h["start_line"]) for h in result.structured_content["hits"]]  # type: ignore[attr-defined]


def test_two_replicas_answer_alike_and_follow_a_reindex(repo: Path, tmp_path: Path) -> None:
    milvus = MilvusLiteServer(tmp_path / "milvus").start()
    replicas: list[RunningServer] = []
    try:
        build_milvus(repo, MilvusStore(milvus.uri, repo), embedder="hash")
        replicas = [start_background([repo], milvus_uri=milvus.uri) for _ in range(2)]
        for query in QUERIES:
            assert _hits(replicas[0], query, "hybrid") == _hits(replicas[1], query, "hybrid")
        (repo / "src" / "quota.py").write_text("def enforce_quota_limit(user):\n    return user.quota\n", encoding="utf-8")
        build_milvus(repo, MilvusStore(milvus.uri, repo), embedder="hash")  # the one writer
        for replica in replicas:
            assert _hits(replica, "enforce_quota_limit")[0][0] == "src/quota.py"
        status = _call(replicas[0], "index_status", {}).structured_content  # type: ignore[attr-defined]
        assert milvus.uri in status["index_dir"] and status["watching"] is False
    finally:
        for replica in replicas:
            replica.stop()
        milvus.stop()


def test_a_replica_reports_milvus_down_and_recovers(repo: Path, tmp_path: Path) -> None:
    milvus = MilvusLiteServer(tmp_path / "milvus").start()
    replica = None
    try:
        build_milvus(repo, MilvusStore(milvus.uri, repo), embedder=None)
        replica = start_background([repo], milvus_uri=milvus.uri)
        before = _hits(replica, "parse_port")
        milvus.stop()
        status = _call(replica, "index_status", {}).structured_content  # type: ignore[attr-defined]
        assert milvus.uri in status["last_error"] and status["chunks"] > 0
        failed = _call(replica, "search_code", {"query": "parse_port", "mode": "lexical"})
        assert failed.is_error and milvus.uri in failed.content[0].text  # type: ignore[attr-defined]
        milvus.start()
        deadline, hits = time.monotonic() + 30, None
        while hits is None and time.monotonic() < deadline:
            result = _call(replica, "search_code", {"query": "parse_port", "mode": "lexical"})
            if result.is_error:  # type: ignore[attr-defined]
                time.sleep(0.2)  # polling for recovery, bounded
            else:
                hits = result.structured_content["hits"]  # type: ignore[attr-defined]
        assert hits is not None and [(h["path"], h["start_line"]) for h in hits] == before
    finally:
        if replica is not None:
            replica.stop()
        milvus.stop()
