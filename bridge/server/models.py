"""Structured results of the MCP tools: pydantic models, so clients get an `outputSchema`.

`SearchCodeResult` is the one wire shape of a search: the MCP `search_code` result and
`bridge search --json` alike (docs/INTERFACES.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from index.types import SearchResult

__all__ = [
    "HitModel",
    "IndexInfoModel",
    "SearchCodeResult",
    "ReadFileResult",
    "ListFilesResult",
    "SymbolModel",
    "OutlineResult",
    "IndexStatusResult",
    "RefreshIndexResult",
    "RepoSummary",
    "ListReposResult",
]


class HitModel(BaseModel):
    path: str = Field(description="Relative to the repository root, forward slashes.")
    start_line: int = Field(description="1-based.")
    end_line: int = Field(description="Inclusive.")
    score: float
    lexical_rank: int | None
    vector_rank: int | None
    symbol: str | None
    language: str | None
    text: str = Field(description="Exactly lines start_line..end_line of the file as indexed.")
    tokens: int = Field(description="Estimated llama BPE tokens of `text` (errs high).")
    evidence: list[str] = Field(default_factory=list, description="Why its file ranks, checkable: e.g. "
                                "'3 similar past commits: <sha> <subject>; ...' (hybrid, git repositories).")


class IndexInfoModel(BaseModel):
    root: str
    files: int
    chunks: int
    embedded_chunks: int
    built_at: str = Field(description="ISO 8601 time the searched index generation was built.")
    stale_files: int = Field(description="Indexed files changed or gone on disk since built_at, "
                             "as counted a few seconds ago at most (index_status counts now).")


class SearchCodeResult(BaseModel):
    query: str = Field(description="The query (over MCP its first line, cut at 120 characters, … when shortened).")
    mode: Literal["hybrid", "lexical", "vector"]
    took_ms: float
    load_ms: float = Field(0.0, description="One-off query-model load this call paid for; not part of took_ms.")
    hits: list[HitModel] = Field(description="In rank order; together at most max_tokens tokens.")
    truncated: bool = Field(description="True when the last hit was cut (or hits dropped) to fit max_tokens.")
    index: IndexInfoModel
    note: str | None = Field(None, description="Why it searched otherwise than asked (e.g. lexical only, and why).")

    @classmethod
    def from_result(cls, result: SearchResult) -> SearchCodeResult:
        """The one conversion from an index search result to the wire shape."""
        model = cls.model_validate(result, from_attributes=True)
        return model.model_copy(update={"took_ms": round(result.took_ms, 3), "load_ms": round(result.load_ms, 3)})


class ReadFileResult(BaseModel):
    repo: str
    path: str
    start_line: int
    end_line: int = Field(description="Last line returned (inclusive); start_line - 1 when none.")
    total_lines: int
    truncated: bool = Field(description="True when fewer lines than asked were returned to fit max_tokens.")
    tokens: int
    language: str | None
    text: str


class ListFilesResult(BaseModel):
    repo: str
    path_glob: str
    files: list[str] = Field(description="Indexed files matching path_glob, sorted.")
    total: int = Field(description="How many indexed files match, before the limit.")
    truncated: bool


class SymbolModel(BaseModel):
    name: str
    kind: str
    start_line: int
    end_line: int
    parent: str | None


class OutlineResult(BaseModel):
    repo: str
    path: str
    language: str | None
    symbols: list[SymbolModel]


class IndexStatusResult(BaseModel):
    repo: str
    root: str
    index_dir: str
    files: int
    chunks: int
    embedded_chunks: int
    embedder: str | None
    built_at: str
    stale_files: int
    reindexing: bool = Field(description="A re-index is running; searches answer from the previous index.")
    watching: bool
    last_error: str | None
    past_commits: int | None = Field(
        default=None, description="Commits of the repository's git history read as evidence; null without one."
    )
    subjects_embedded: bool = Field(
        default=False, description="Whether those commits' subjects are embedded (votes by meaning) yet."
    )


class RefreshIndexResult(BaseModel):
    repo: str
    changed: bool = Field(description="False when nothing had changed and the index was kept.")
    files: int
    chunks: int
    reused_chunks: int
    new_chunks: int
    seconds: float
    status: IndexStatusResult


class RepoSummary(BaseModel):
    name: str
    root: str
    files: int
    chunks: int
    embedded_chunks: int
    built_at: str
    stale_files: int
    default: bool = Field(description="Tools use this repository when `repo` is not given.")


class ListReposResult(BaseModel):
    repos: list[RepoSummary]
