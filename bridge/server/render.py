"""Compact text renderings of tool results, for a model to read: a `path:start-end` header, then code.

The structured result carries everything; the text repeats what a model needs and nothing else.
Code is fenced with more backticks than it contains, so a Markdown file cannot break the fence.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the models (pydantic) load only where a result is made: `bridge search` prints without them
    from bridge.server.models import (
        IndexInfoModel,
        IndexStatusResult,
        ListFilesResult,
        ListReposResult,
        OutlineResult,
        ReadFileResult,
        RefreshIndexResult,
        SearchCodeResult,
    )
    from index.types import SearchResult

__all__ = [
    "counted",
    "echo",
    "render_search",
    "render_read",
    "render_list",
    "render_outline",
    "render_status",
    "render_refresh",
    "render_repos",
    "fence",
]

_TICKS = re.compile(r"`{3,}")


def fence(text: str, language: str | None) -> str:
    longest = max((len(m.group(0)) for m in _TICKS.finditer(text)), default=2)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{language or ''}\n{text}\n{ticks}"


def counted(n: int, noun: str) -> str:
    """`1 file`, `3 files`."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def echo(query: str, keep: int = 120) -> str:
    """The query's first line, cut at `keep` characters, with … when anything was left out: what a
    result says it answered, without sending a pasted report back whole."""
    stripped = query.strip()
    first = stripped.splitlines()[0] if stripped else query
    return first[:keep] + ("…" if len(first) > keep or first != stripped else "")


def no_word_in_common(result: SearchCodeResult | SearchResult) -> bool:
    """True when no hit shares a word with the query: they are nearest by meaning only."""
    return result.mode != "vector" and bool(result.hits) and all(h.lexical_rank is None for h in result.hits)


def _freshness(info: IndexInfoModel, reindexing: bool = False, vectors: bool = True) -> str:
    parts = [f"index built {info.built_at}"]
    if info.stale_files:
        parts.append(f"{counted(info.stale_files, 'file')} changed since")
    if reindexing:
        parts.append("re-indexing now")
    if vectors and info.embedded_chunks < info.chunks:
        parts.append(f"{info.embedded_chunks}/{info.chunks} chunks embedded")
    return ", ".join(parts)


def render_search(result: SearchCodeResult, repo: str, reindexing: bool = False, vectors: bool = True) -> str:
    tokens = sum(h.tokens for h in result.hits)
    cut = ", cut to fit max_tokens" if result.truncated else ""
    lines = [
        f"{counted(len(result.hits), 'hit')} for {echo(result.query)!r} in {repo} ({result.mode}, {tokens} tokens{cut}); "
        f"{_freshness(result.index, reindexing, vectors and result.note is None)}"
    ]
    if result.note:
        lines.append(f"Note: {result.note}.")
    for hit in result.hits:
        symbol = f"  {hit.symbol}" if hit.symbol else ""
        why = "".join(f"\n{line}" for line in hit.evidence)
        lines.append(f"\n{hit.path}:{hit.start_line}-{hit.end_line}{symbol}{why}\n{fence(hit.text, hit.language)}")
    if not result.hits:
        lines.append("No matches: try other words, mode='lexical' for exact names, or a wider path_glob.")
    elif no_word_in_common(result):
        lines.append("\nNo hit shares a word with the query: these are nearest by meaning only.")
    return "\n".join(lines)


def render_read(result: ReadFileResult) -> str:
    if result.total_lines == 0:
        return f"{result.path} is empty"
    more = ""
    if result.truncated:
        more = f"\n(cut to fit max_tokens: continue with start_line={result.end_line + 1})"
    elif result.end_line < result.total_lines:
        more = f"\n({result.total_lines - result.end_line} more lines after line {result.end_line})"
    header = f"{result.path}:{result.start_line}-{result.end_line} of {result.total_lines} lines"
    return f"{header}\n{fence(result.text, result.language)}{more}"


def render_list(result: ListFilesResult) -> str:
    shown = "\n".join(result.files) or f"no indexed file matches {result.path_glob!r}"
    more = f"\n({result.total - len(result.files)} more: raise limit or narrow path_glob)" if result.truncated else ""
    return f"{result.total} files match {result.path_glob!r} in {result.repo}\n{shown}{more}"


def render_outline(result: OutlineResult) -> str:
    if not result.symbols:
        return f"{result.path}: no symbols found ({result.language or 'unknown language'})"
    rows = [f"{result.path} ({result.language})"]
    for s in result.symbols:
        owner = f"{s.parent}." if s.parent else ""
        rows.append(f"{s.start_line}-{s.end_line} {s.kind} {owner}{s.name}")
    return "\n".join(rows)


def render_status(result: IndexStatusResult) -> str:
    from bridge.server.models import IndexInfoModel

    info = IndexInfoModel(
        root=result.root, files=result.files, chunks=result.chunks, embedded_chunks=result.embedded_chunks,
        built_at=result.built_at, stale_files=result.stale_files,
    )
    watch = "watching for changes" if result.watching else "not watching (call refresh_index after edits)"
    error = f"\nlast error: {result.last_error}" if result.last_error else ""
    return (
        f"{result.repo}: {result.root}\n{result.files} files, {result.chunks} chunks, "
        f"embedder {result.embedder or 'none (lexical only)'}; "
        f"{_freshness(info, result.reindexing, result.embedder is not None)}; {watch}{error}"
    )


def render_refresh(result: RefreshIndexResult) -> str:
    if not result.changed:
        return f"{result.repo}: index was up to date ({result.files} files, {result.chunks} chunks)"
    return (
        f"{result.repo}: re-indexed {counted(result.files, 'file')} into {counted(result.chunks, 'chunk')} "
        f"({result.reused_chunks} reused, {result.new_chunks} new) in {result.seconds:.1f} s"
    )


def render_repos(result: ListReposResult) -> str:
    rows = []
    for r in result.repos:
        default = " (default)" if r.default else ""
        stale = f", {counted(r.stale_files, 'file')} changed since" if r.stale_files else ""
        rows.append(f"{r.name}{default}: {r.root} — {r.files} files, {r.chunks} chunks, built {r.built_at}{stale}")
    return "\n".join(rows)
