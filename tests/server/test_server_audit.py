"""The audit log: one JSON object per tool call, query text never stored, rotated by size."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from bridge.server.audit import AuditLog, AuditRecord, redact_args


def _record(n: int = 0, query: str = "where is the config parsed") -> AuditRecord:
    return AuditRecord("127.0.0.1:5000", "search_code", "demo", {"query": query, "k": n, "path_glob": None}, 3, 1.5, None)


def test_a_record_hashes_the_query_and_keeps_the_other_arguments() -> None:
    data = json.loads(_record(7).to_json())
    assert set(data) == {"time", "client", "tool", "repo", "args", "results", "latency_ms", "error"}
    assert data["args"]["query"] == {"sha256": data["args"]["query"]["sha256"], "chars": 26}
    assert len(data["args"]["query"]["sha256"]) == 16
    assert data["args"]["k"] == 7 and "path_glob" not in data["args"]
    assert "config parsed" not in _record().to_json()


def test_equal_queries_hash_alike_and_long_strings_are_cut() -> None:
    assert redact_args({"query": "a"}) == redact_args({"query": "a"}) != redact_args({"query": "b"})
    cut = redact_args({"path": "p" * 500})["path"]
    assert len(cut) == 201 and cut.endswith("…")


def test_no_path_means_no_audit_file(tmp_path: Path) -> None:
    log = AuditLog(None)
    log.write(_record())
    log.close()
    assert not log.enabled and list(tmp_path.iterdir()) == []


def test_the_log_appends_and_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "audit" / "audit.jsonl"
    for _ in range(2):
        log = AuditLog(path)
        log.write(_record())
        log.close()
    assert len(path.read_text().splitlines()) == 2
    assert path.stat().st_mode & 0o777 == 0o600


def test_the_log_rotates_by_size_and_keeps_a_fixed_number_of_backups(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    line = len(_record().to_json()) + 1
    log = AuditLog(path, max_bytes=5 * line + 10, backups=2)
    for n in range(40):
        log.write(_record(n % 10))
    log.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    for p in tmp_path.iterdir():
        assert p.stat().st_size <= 5 * line + 10
        assert all(json.loads(x)["tool"] == "search_code" for x in p.read_text().splitlines())


def test_concurrent_writers_never_interleave_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    threads = [threading.Thread(target=lambda: [log.write(_record(i)) for i in range(200)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 1600
    assert all(json.loads(x)["client"] == "127.0.0.1:5000" for x in lines)


def test_a_call_finishing_after_shutdown_does_not_reopen_the_log(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.write(_record())
    log.close()
    log.write(_record())
    assert len(path.read_text().splitlines()) == 1
