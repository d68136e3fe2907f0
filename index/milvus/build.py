"""Indexing a repository into a new build on Milvus (the counterpart of index/build/pipeline.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from index.embed import resolve_spec
from index.errors import EmptyRepository
from index.files import chunk_file, discover
from index.milvus.store import MilvusStore
from index.store import FileEntry, Manifest, default_home
from index.tokenize import path_terms, terms
from index.types import Chunk, Progress, Selection

__all__ = ["build_milvus"]

ProgressFn = Callable[[Progress], None]


def build_milvus(
    root: Path,
    store: MilvusStore,
    selection: Selection = Selection(),
    chunking: tuple[int, int, int] = (250, 400, 3),
    embedder: str | None = "minilm",
    rebuild: bool = False,
    on_progress: ProgressFn = lambda _: None,
    embedder_obj: Any = None,
) -> tuple[str, bool, Manifest, dict[str, float]]:
    """Index `root` into a new build on Milvus and make it live: (build name, changed, manifest, seconds).

    Unchanged files and settings leave the live build as it is. Embeddings come from the local
    cache (by content hash) that local indexes use too; nothing else is written locally.
    """
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    found = discover(root, selection)
    seconds["discover"] = time.perf_counter() - t
    on_progress(Progress("discover", len(found.files), len(found.files)))
    if not found.files:
        raise EmptyRepository(f"no indexable files under {root}: check the path and its .gitignore")
    target, max_tokens, overlap = chunking
    chunking_json = {"target_tokens": target, "max_tokens": max_tokens, "overlap_lines": overlap}
    selection_json = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(selection).items()}
    previous = store.live_or_none()
    old = store.manifest(previous) if previous is not None and not rebuild else None
    embedder = resolve_spec(embedder, old.embedder if old is not None else None)
    if previous is not None and old is not None:
        same = (
            old.embedder == embedder
            and old.chunking == chunking_json
            and old.selection == selection_json
            and len(old.files) == len(found.files)
            and all((e := old.files.get(f.path)) is not None and e.sha == f.sha for f in found.files)
        )
        if same:
            return previous, False, old, seconds
    t = time.perf_counter()
    chunks: list[Chunk] = []
    term_lists: list[list[str]] = []
    entries: dict[str, FileEntry] = {}
    for n, f in enumerate(found.files, 1):
        first = len(chunks)
        extra = path_terms(f.path)
        for c in chunk_file(f, target, max_tokens, overlap):
            chunks.append(c)
            term_lists.append(terms(c.text) + extra)
        entries[f.path] = FileEntry(f.sha, f.size, f.mtime_ns, first, len(chunks) - first)
        if n % 50 == 0 or n == len(found.files):
            on_progress(Progress("chunk", n, len(found.files)))
    seconds["chunk"] = time.perf_counter() - t
    vectors = None
    stats: dict[str, object] = {"skipped": found.skipped, "invalid_utf8": found.invalid_utf8}
    if embedder is not None and chunks:
        t = time.perf_counter()
        vectors, meta = _embed(chunks, embedder, embedder_obj, on_progress)
        stats["vectors"] = meta
        seconds["embed"] = time.perf_counter() - t
    manifest = Manifest(
        root=str(Path(root).resolve()),
        built_at=datetime.now(UTC).isoformat(timespec="seconds"),
        embedder=embedder,
        chunking=chunking_json,
        selection=selection_json,
        files=entries,
        chunks=len(chunks),
        stats=stats,
    )
    t = time.perf_counter()
    name = store.write(chunks, term_lists, vectors, manifest)
    seconds["write"] = time.perf_counter() - t
    on_progress(Progress("write", 1, 1))
    return name, True, manifest, seconds


def _embed(chunks: list[Chunk], spec: str, emb: Any, on_progress: ProgressFn) -> tuple[np.ndarray, dict[str, Any]]:
    from index.embed import EmbeddingCache, embed_with_cache, load_embedder

    if emb is None:
        emb = load_embedder(spec, cache_dir=default_home() / "models")
    cache = EmbeddingCache(default_home() / "embeddings.sqlite")
    try:
        have = embed_with_cache(
            emb,
            cache,
            [(c.hash, c.text) for c in chunks],
            on_progress=lambda done, total: on_progress(Progress("embed", done, total)),
        )
    finally:
        cache.close()
    vectors = np.stack([have[c.hash] for c in chunks]).astype(np.float32)
    return vectors, {"embedder_id": emb.id, "dim": int(emb.dim)}
