"""Frozen values passed between the stages of the index (discover → chunk → store → search)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Mode = Literal["hybrid", "lexical", "vector"]
MODES: tuple[Mode, ...] = ("hybrid", "lexical", "vector")


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One selected file: `path` is relative to the repository root, with forward slashes."""

    path: str
    size: int
    mtime_ns: int
    sha: str  # sha1 of the raw bytes
    text: str  # decoded as UTF-8, invalid bytes replaced
    language: str | None
    invalid_utf8: bool = False


@dataclass(frozen=True, slots=True)
class Chunk:
    """Lines start_line..end_line (1-based, inclusive) of one file; `text` is exactly those lines."""

    path: str
    start_line: int
    end_line: int
    language: str | None
    symbol: str | None
    text: str
    hash: str  # sha1 of path + text: identical text in two files embeds once, ranks twice
    tokens: int


@dataclass(frozen=True, slots=True)
class Hit:
    path: str
    start_line: int
    end_line: int
    score: float
    lexical_rank: int | None
    vector_rank: int | None
    symbol: str | None
    language: str | None
    text: str
    tokens: int
    evidence: tuple[str, ...] = ()  # why its file ranks, checkable (e.g. similar past commits)


@dataclass(frozen=True, slots=True)
class IndexInfo:
    root: str
    files: int
    chunks: int
    embedded_chunks: int
    built_at: str
    stale_files: int


@dataclass(frozen=True, slots=True)
class SearchResult:
    query: str
    mode: Mode
    took_ms: float
    hits: tuple[Hit, ...]
    truncated: bool
    index: IndexInfo
    load_ms: float = 0.0  # one-off query-model load this search paid for; not part of took_ms
    note: str | None = None  # why it searched otherwise than asked, e.g. without the index's vectors


@dataclass(frozen=True, slots=True)
class Selection:
    """Which files of a repository are indexed (and may be read through the server)."""

    max_file_bytes: int = 1024 * 1024
    exclude: tuple[str, ...] = ()  # extra gitignore-style patterns to skip
    include: tuple[str, ...] = ()  # patterns that override the secret and lock-file rules
    skip_secrets: bool = True


@dataclass(frozen=True, slots=True)
class Discovery:
    files: tuple[SourceFile, ...]
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count
    invalid_utf8: int = 0


@dataclass(frozen=True, slots=True)
class Progress:
    """Reported through a callback by long work; only the CLI renders it."""

    stage: str  # "discover" | "chunk" | "lexical" | "subjects" | "embed" | "write"
    done: int
    total: int | None
