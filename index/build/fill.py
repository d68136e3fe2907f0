"""Dense vectors for a published generation, filled in progressively after the lexical index
(index/build/pipeline.py): searches start lexical and use a growing share of vectors while this runs.
The commit subjects a first index left for later (index/history/commits.py) are embedded first: they
are few (sympy: 17k subjects in 7 s) and their votes count as soon as they are written.

Embeddings come from a cache keyed by (embedder id, chunk hash), so only chunks never embedded
before are encoded; the vector file is rewritten atomically at each checkpoint.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from index.errors import writing
from index.store import open_table
from index.store import IndexDir, default_home
from index.types import Progress
from index.store import VectorIndex

if TYPE_CHECKING:
    from index.embed import Embedder

__all__ = ["FillReport", "fill_vectors", "write_vectors"]

ProgressFn = Callable[[Progress], None]
StopFn = Callable[[], bool]


@dataclass(frozen=True)
class FillReport:
    embedded_chunks: int
    chunks: int
    newly_embedded: int
    seconds: float
    complete: bool
    subjects: int = 0  # commit subjects embedded by this fill (index/history.fill_subjects)
    embedder: str | None = None  # the spec the vectors were made with


def _noop(_: Progress) -> None:
    pass


def fill_vectors(
    index_dir: Path,
    on_progress: ProgressFn = _noop,
    should_stop: StopFn = lambda: False,
    embedder: Embedder | None = None,
    batch_size: int = 64,
    checkpoint_seconds: float = 5.0,
    cache_path: Path | None = None,
) -> FillReport:
    """Embed the live generation's chunks that have no vector yet, publishing progress as it goes.

    `cache_path` puts the embedding cache elsewhere than the index folder, so that many indexes
    (e.g. one repository at many commits) share one cache.

    Vectors already in the cache are written at once; the rest are embedded in batches and the
    vector file is rewritten (atomically) every `checkpoint_seconds`, so searches use a growing
    share of dense vectors while this runs. The writer lock is held only while writing, so a
    re-index is never kept waiting; when one publishes a newer generation, this stops (its
    embeddings stay in the cache for the next fill). Stops early, keeping its work, on `should_stop()`.
    """
    from index.embed import EmbeddingCache, embed_with_cache, load_embedder

    store = IndexDir(index_dir)
    t0 = time.perf_counter()
    gen = store.current()
    manifest = store.manifest(gen)
    if manifest.embedder is None:
        return FillReport(0, manifest.chunks, 0, 0.0, True)
    subjects = _fill_subjects(store, manifest.embedder, embedder, on_progress)
    if (gen / "vectors.faiss").is_file() and VectorIndex.load(gen / "vectors.faiss").count == manifest.chunks:
        # Already complete: do not load a second embedder just to find nothing to do. Opening and
        # closing the cache still folds back a write-ahead log that a killed run left behind.
        if store.embeddings_path.exists():
            EmbeddingCache(store.embeddings_path).close()
        return FillReport(manifest.chunks, manifest.chunks, 0, time.perf_counter() - t0, True, subjects, manifest.embedder)
    emb = embedder if embedder is not None else load_embedder(manifest.embedder, cache_dir=default_home() / "models")
    prepare = getattr(emb, "export_query_graph", None)
    if callable(prepare):
        prepare()  # export the torch-free query model now, so the first search does not pay for it
    table = open_table(gen)
    try:
        items = table.items()
    finally:
        table.close()
    chunks = [c for _, c in items]
    ids = np.fromiter((i for i, _ in items), dtype=np.int64, count=len(items))
    hashes = [c.hash for c in chunks]
    cache = EmbeddingCache(cache_path or store.embeddings_path)
    superseded = False

    def checkpoint(have: dict[str, np.ndarray]) -> int:
        nonlocal superseded
        with store.writer_lock(timeout=600):
            if store.current() != gen:
                superseded = True
                return 0
            return write_vectors(gen, emb, hashes, have, ids)

    with writing(index_dir):
        try:
            have = cache.get_many(emb.id, hashes)
            before = sum(h in have for h in hashes)
            checkpoint(have)
            todo = [(c.hash, c.text) for c in chunks if c.hash not in have]
            last, write_seconds = time.perf_counter(), 0.0

            def progress(done: int, total: int) -> None:
                nonlocal last, write_seconds
                on_progress(Progress("embed", before + done, len(chunks)))
                # A checkpoint rewrites the whole vector index (1.15M chunks, IVF: 28 s of CPU):
                # embed at least 4 times as long as the last one took, so writing stays under 20 %.
                if time.perf_counter() - last >= max(checkpoint_seconds, 4 * write_seconds):
                    started = time.perf_counter()
                    checkpoint(have | cache.get_many(emb.id, [h for h, _ in todo]))
                    last = time.perf_counter()
                    write_seconds = last - started

            stop = lambda: superseded or should_stop()
            if todo and not superseded:
                have.update(embed_with_cache(emb, cache, todo, batch_size, progress, stop))
            count = checkpoint(have) if not superseded else before
        finally:
            cache.close()
    return FillReport(count, len(chunks), count - before, time.perf_counter() - t0, count == len(chunks), subjects,
                      manifest.embedder)


def _fill_subjects(store: IndexDir, spec: str, embedder: Embedder | None, on_progress: ProgressFn) -> int:
    """The history's subjects left for later, embedded by their model (the chunks' own when the
    same, so a caller's loaded model is not loaded twice)."""
    from index.history import fill_subjects
    from index.history import SubjectEncoder, subject_spec

    wanted = subject_spec(spec)
    if wanted is None:
        return 0
    encoder = SubjectEncoder(wanted, (lambda _spec: embedder) if embedder is not None and wanted == spec else None)
    with writing(store.path):
        return fill_subjects(store.path, encoder, store.writer_lock(timeout=600),
                             lambda done, total: on_progress(Progress("subjects", done, total)))


def write_vectors(
    gen: Path, emb: Embedder, hashes: list[str], have: dict[str, np.ndarray], chunk_ids: np.ndarray | None = None
) -> int:
    """Vectors of the chunks embedded so far, by chunk id: `chunk_ids[j]` is the id of `hashes[j]`
    (default: j; a delta generation's ids have holes where its deleted chunks were)."""
    at = [j for j, h in enumerate(hashes) if h in have]
    ids = np.asarray(at, dtype=np.int64) if chunk_ids is None else chunk_ids[at] if at else np.zeros(0, dtype=np.int64)
    vectors = np.stack([have[hashes[j]] for j in at]) if at else np.zeros((0, emb.dim), np.float32)
    meta = gen / "vectors.json"
    tmp = meta.with_name("vectors.json.tmp")
    tmp.write_text(json.dumps({"embedder_id": emb.id, "dim": emb.dim}))
    tmp.replace(meta)
    VectorIndex.build(ids, vectors).save(gen / "vectors.faiss")
    return len(ids)
