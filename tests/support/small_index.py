"""A few files indexed lexically in chunks small enough to split their functions, for the tests of which chunk
a search shows."""

from __future__ import annotations

from pathlib import Path

from index.build.pipeline import BuildOptions, build_index
from index.search.searcher import Searcher


def small_index(tmp_path: Path, files: dict[str, str], target_tokens: int) -> Searcher:
    """`files` (path -> text) under tmp_path/repo, indexed without vectors in chunks of about `target_tokens`."""
    repo = tmp_path / "repo"
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    build_index(repo, tmp_path / "idx", BuildOptions(embedder=None, target_tokens=target_tokens, max_tokens=2 * target_tokens))
    return Searcher(tmp_path / "idx")
