"""What to serve, known before any index opens: each repository's spec and served name.

Kept free of the index's heavy modules (numpy, faiss, the watcher), so the stdio server can answer
the MCP handshake while the indexes open on a background thread (`opening.OpeningRepos`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bridge.errors import ServeError
from index.types import Selection

__all__ = ["RepoSpec", "served_names"]


@dataclass(frozen=True)
class RepoSpec:
    """What to serve: a repository root, optionally its index folder and build settings.

    `embedder` None keeps whatever the existing index uses ("minilm" for a new one); use
    `no_vectors=True` for a lexical-only index.
    """

    root: Path
    index_dir: Path | None = None
    embedder: str | None = None
    no_vectors: bool = False
    selection: Selection | None = None
    milvus_uri: str | None = None  # read the index from Milvus (a stateless replica; see docs/milvus.md)
    milvus_token: str | None = None


def served_names(specs: Sequence[RepoSpec]) -> list[tuple[str, Path]]:
    """Each repository's served name (its folder's, made unique) and real root, in order; a root given
    twice is an error."""
    named: list[tuple[str, Path]] = []
    taken: set[str] = set()
    for spec in specs:
        real = Path(os.path.realpath(spec.root.expanduser()))
        if any(real == root for _, root in named):
            raise ServeError(f"repository {spec.root} is given twice: pass each --repo once")
        base = real.name or "root"
        name, n = base, 2
        while name in taken:
            name, n = f"{base}-{n}", n + 1
        taken.add(name)
        named.append((name, real))
    return named
