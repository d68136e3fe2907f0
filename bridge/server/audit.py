"""Append-only audit log of tool calls, one JSON object per line, rotated by size.

Default place: `default_home() / "audit" / "audit.jsonl"` (BRIDGE_HOME moves it), shared by
every served repository; each record names its repo. When a write would pass `max_bytes`, the
file becomes `audit.jsonl.1` (older ones shift to `.2`, ... up to `backups`) and a new one starts.

A record: {"time", "client", "tool", "repo", "args", "results", "latency_ms", "error"}. Query
text is never stored: `args.query` is replaced by its SHA-256 prefix and length, so equal queries
can be matched without keeping what was asked. Other string arguments are cut to 200 characters.
`client` is the HTTP peer ("host:port"), or "local" over stdio and in-process.

Records are written by `AuditMiddleware`, an SDK server middleware around every `tools/call`,
so calls refused before a tool runs (wrong argument types, unknown tools) are logged too.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

__all__ = ["AuditLog", "AuditMiddleware", "AuditRecord", "default_audit_path", "redact_args", "result_count"]

_MAX_STRING = 200
_SURROGATE = re.compile("[\ud800-\udfff]")


def default_audit_path() -> Path:
    from index.store import default_home

    return default_home() / "audit" / "audit.jsonl"


def redact_args(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments as logged: the query hashed, long strings cut, None values left out."""
    out: dict[str, Any] = {}
    for key, value in args.items():
        if value is None:
            continue
        if key == "query" and isinstance(value, str):
            digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
            out[key] = {"sha256": digest, "chars": len(value)}
        elif isinstance(value, str) and len(value) > _MAX_STRING:
            out[key] = value[:_MAX_STRING] + "…"
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class AuditRecord:
    client: str
    tool: str
    repo: str | None
    args: dict[str, Any]
    results: int | None
    latency_ms: float
    error: str | None

    def to_json(self) -> str:
        data = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "client": self.client,
            "tool": self.tool,
            "repo": self.repo,
            "args": redact_args(self.args),
            "results": self.results,
            "latency_ms": round(self.latency_ms, 3),
            "error": self.error,
        }
        text = json.dumps(data, ensure_ascii=False, default=str)
        # A lone surrogate is valid in a JSON string but cannot be written as UTF-8: escape it.
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class AuditLog:
    """Thread-safe appender; `path=None` turns auditing off."""

    def __init__(self, path: Path | None, max_bytes: int = 10 * 1024 * 1024, backups: int = 3) -> None:
        self.path = Path(path) if path is not None else None
        self.max_bytes = max_bytes
        self.backups = backups
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._size = 0
        self._closed = False

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def write(self, record: AuditRecord) -> None:
        if self.path is None:
            return
        line = record.to_json() + "\n"
        size = len(line.encode("utf-8"))
        with self._lock:
            if self._closed:
                return  # a call that finished while the server was shutting down
            if self._file is None:
                self._open()
            if self._size + size > self.max_bytes and self._size > 0:
                self._rotate()
            assert self._file is not None
            self._file.write(line)
            self._file.flush()
            self._size += size

    def _open(self) -> None:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # O_APPEND: every line lands at the end even if another process writes the same file.
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._file = os.fdopen(fd, "a", encoding="utf-8")
        self._size = os.fstat(fd).st_size

    def _rotate(self) -> None:
        assert self.path is not None and self._file is not None
        self._file.close()
        self._file = None
        for n in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{n + 1}"))
        if self.backups > 0:
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink(missing_ok=True)
        self._open()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._file is not None:
                self._file.close()
                self._file = None


_COUNTED = {"search_code": "hits", "list_files": "files", "outline": "symbols", "list_repos": "repos"}


def result_count(tool: str, structured: Mapping[str, Any] | None) -> int | None:
    """How many results a successful call returned: hits, files, symbols or repos; else 1."""
    if structured is None:
        return None
    if tool in _COUNTED:
        return len(structured.get(_COUNTED[tool], ()))
    if tool == "refresh_index":
        return structured.get("files")
    return 1


def _client(request: object) -> str:
    client = getattr(request, "client", None)
    return f"{client.host}:{client.port}" if client is not None else "local"


class AuditMiddleware:
    """SDK server middleware: writes one record per `tools/call`, whatever its outcome."""

    def __init__(self, log: AuditLog, repo_name: Callable[[str | None], str | None]) -> None:
        self.log = log
        self.repo_name = repo_name

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if ctx.method != "tools/call" or not self.log.enabled:
            return await call_next(ctx)
        params = ctx.params or {}
        tool = str(params.get("name"))
        args = params.get("arguments") or {}
        args = dict(args) if isinstance(args, Mapping) else {"arguments": str(args)}
        t0 = time.perf_counter()
        error: str | None = "no result"
        count: int | None = None
        try:
            result = await call_next(ctx)
            data = result.model_dump(by_alias=True) if hasattr(result, "model_dump") else dict(result or {})
            if data.get("isError"):
                error = " ".join(str(block.get("text", "")) for block in data.get("content") or ())
            else:
                error = None
                count = result_count(tool, data.get("structuredContent"))
            return result
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            repo = self.repo_name(args.get("repo")) if tool != "list_repos" else None
            latency = (time.perf_counter() - t0) * 1000
            self.log.write(AuditRecord(_client(ctx.request), tool, repo, args, count, latency, error))
