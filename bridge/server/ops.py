"""What each MCP tool does, as plain functions of a `Repo` (no MCP types here, so they test alone).

Token counts are `index.tokenize.estimate_tokens`: a conservative estimate of llama-family BPE
tokens (it errs high, about 15% on code), the same count the index stores for every chunk. A
`max_tokens` budget bounds the code text returned (hit texts or file lines), not the headers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from bridge.errors import ToolInputError
from bridge.server.models import (
    IndexStatusResult,
    ListFilesResult,
    ListReposResult,
    OutlineResult,
    ReadFileResult,
    RefreshIndexResult,
    RepoSummary,
    SearchCodeResult,
    SymbolModel,
)
from index.files import source_file
from index.search import DEFAULT_MAX_TOKENS, MAX_K, MAX_QUERY_BYTES, fit_prefix
from index.tokenize import estimate_tokens
from index.types import SourceFile

if TYPE_CHECKING:  # repos imports the index's heavy modules; the tools are registered before it opens
    from bridge.server.opening import OpeningRepos
    from bridge.server.repos import Repo, RepoSet

__all__ = [
    "MAX_K",
    "MAX_QUERY_BYTES",
    "MAX_TOKENS",
    "MAX_LIST_LIMIT",
    "search_code",
    "read_file",
    "source_text",
    "list_files",
    "outline",
    "index_status",
    "refresh_index",
    "list_repos",
    "normalise_path",
]

MAX_TOKENS = 20_000
MAX_LIST_LIMIT = 10_000


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ToolInputError(f"{name}={value} is out of range: use {low} to {high}")


def _glob(pattern: str) -> object:
    from pathspec import GitIgnoreSpec

    try:
        return GitIgnoreSpec.from_lines([pattern])
    except (ValueError, TypeError) as exc:
        raise ToolInputError(f"bad path_glob {pattern!r} ({exc}): use a pattern like 'src/**/*.py'") from None


def search_code(
    repo: Repo, query: str, k: int = 5, max_tokens: int = DEFAULT_MAX_TOKENS, path_glob: str | None = None, mode: str = "hybrid"
) -> SearchCodeResult:
    # The query, k, mode and glob are checked by the index (BadQuery, a tool error); only the
    # server's own ceiling on returned text is checked here.
    _check_range("max_tokens", max_tokens, 1, MAX_TOKENS)
    result = repo.searcher.search(query, k=k, mode=mode, max_tokens=max_tokens, path_glob=path_glob or None)
    return SearchCodeResult.from_result(result)


def normalise_path(user_path: str) -> str:
    """The forward-slash form of an already-accepted relative path (for echoing it back)."""
    return "/".join(p for p in user_path.replace("\\", "/").split("/") if p not in ("", "."))


def _read_source(repo: Repo, user_path: str) -> tuple[str, SourceFile]:
    real = repo.resolve(user_path)
    mtime_ns = os.stat(real).st_mtime_ns
    path = normalise_path(user_path)
    return path, source_file(path, Path(real).read_bytes(), mtime_ns)


def source_text(repo: Repo, user_path: str) -> str:
    """The text of a repository file, under read_file's path rules (bytes that are not UTF-8 become U+FFFD)."""
    return _read_source(repo, user_path)[1].text


def _lines(text: str) -> list[str]:
    # The same line breaks as index.files.chunk ("\r\n", a lone "\r", form feed, U+2028, ...), so a
    # hit's start_line..end_line reads back as exactly the hit's text.
    return text.splitlines()


def _fit(lines: list[str], budget: int) -> tuple[str, int]:
    """The longest prefix of `lines` (joined) within `budget` tokens, and how many lines it has.

    A first line that alone is over budget (minified code) is cut by characters instead.
    """
    n = fit_prefix(lines, budget, estimate_tokens)
    if n > 0 or not lines:
        return "\n".join(lines[:n]), n
    chars = fit_prefix(lines[0], budget, estimate_tokens, sep="")
    return lines[0][:chars], 1 if chars else 0


def read_file(
    repo: Repo, path: str, start_line: int = 1, end_line: int | None = None, max_tokens: int = 2000
) -> ReadFileResult:
    _check_range("max_tokens", max_tokens, 1, MAX_TOKENS)
    if start_line < 1:
        raise ToolInputError(f"start_line={start_line} is out of range: lines start at 1")
    if end_line is not None and end_line < start_line:
        raise ToolInputError(f"end_line={end_line} is before start_line={start_line}: pass end_line >= start_line")
    rel, source = _read_source(repo, path)
    lines = _lines(source.text)
    total = len(lines)
    if total == 0:
        return ReadFileResult(
            repo=repo.name, path=rel, start_line=1, end_line=0, total_lines=0, truncated=False, tokens=0,
            language=source.language, text="",
        )
    if start_line > total:
        raise ToolInputError(f"start_line={start_line} is past the end of {rel}, which has {total} lines: pass 1 to {total}")
    last = total if end_line is None else min(end_line, total)
    wanted = lines[start_line - 1 : last]
    text, count = _fit(wanted, max_tokens)
    truncated = count < len(wanted) or (count == 1 and text != wanted[0])
    return ReadFileResult(
        repo=repo.name, path=rel, start_line=start_line, end_line=start_line + count - 1, total_lines=total,
        truncated=truncated, tokens=estimate_tokens(text), language=source.language, text=text,
    )


def list_files(repo: Repo, path_glob: str = "**", limit: int = 200) -> ListFilesResult:
    """Indexed files (what search can find), so the listing follows the index's selection rules."""
    _check_range("limit", limit, 1, MAX_LIST_LIMIT)
    pattern = path_glob.strip() or "**"
    spec = _glob(pattern)
    repo.searcher.refresh()
    matching = [p for p in sorted(repo.searcher.manifest.files) if spec.match_file(p)]  # type: ignore[attr-defined]
    return ListFilesResult(
        repo=repo.name, path_glob=pattern, files=matching[:limit], total=len(matching), truncated=len(matching) > limit
    )


def outline(repo: Repo, path: str) -> OutlineResult:
    from index.files import outline as symbols_of

    rel, source = _read_source(repo, path)
    symbols = [
        SymbolModel(name=s.name, kind=s.kind, start_line=s.start_line, end_line=s.end_line, parent=s.parent)
        for s in symbols_of(source)
    ]
    return OutlineResult(repo=repo.name, path=rel, language=source.language, symbols=symbols)


def index_status(repo: Repo) -> IndexStatusResult:
    from index.errors import StoreUnavailable

    unreachable = None
    try:
        repo.searcher.refresh()
    except StoreUnavailable as exc:  # Milvus went away: say so, with what was last read from it
        unreachable = str(exc)
    info = repo.searcher.info(fresh=True)
    state = repo.status()
    history = repo.searcher.history()
    return IndexStatusResult(
        repo=repo.name, root=str(repo.root), index_dir=repo.searcher.store.location, files=info.files,
        chunks=info.chunks, embedded_chunks=info.embedded_chunks, embedder=repo.searcher.manifest.embedder,
        built_at=info.built_at, stale_files=info.stale_files, reindexing=state.reindexing, watching=state.watching,
        last_error=unreachable or state.last_error,
        past_commits=len(history.commits) if history is not None else None,
        subjects_embedded=history is not None and history.subjects is not None,
    )


def refresh_index(repo: Repo) -> RefreshIndexResult:
    report = repo.refresh()
    return RefreshIndexResult(
        repo=repo.name, changed=report.changed, files=report.files, chunks=report.chunks,
        reused_chunks=report.reused_chunks, new_chunks=report.new_chunks,
        seconds=round(sum(report.seconds.values()), 3), status=index_status(repo),
    )


def list_repos(repos: RepoSet | OpeningRepos) -> ListReposResult:
    summaries = []
    for repo in repos.repos:
        repo.searcher.refresh()
        info = repo.searcher.info()
        summaries.append(
            RepoSummary(
                name=repo.name, root=str(repo.root), files=info.files, chunks=info.chunks,
                embedded_chunks=info.embedded_chunks, built_at=info.built_at, stale_files=info.stale_files,
                default=repo is repos.default,
            )
        )
    return ListReposResult(repos=summaries)
