"""The persistent embedding cache: vectors by (embedder id, chunk content hash), kept across generations."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from index.embed.backends import Embedder
from index.errors import CorruptIndex, EmbedderError

__all__ = ["EmbeddingCache", "embed_with_cache"]

_CACHE_SCHEMA = 1
_SQL_VARS = 500  # stay far below SQLite's host-parameter limit in IN (...) lookups


class EmbeddingCache:
    """Vectors by (embedder id, chunk content hash) in one SQLite file. WAL journaling lets one
    writer and any number of readers (other processes too) work at once; a reader never blocks
    the writer. Vectors are stored as raw float32 bytes. Safe to share between threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, timeout=60.0, check_same_thread=False, isolation_level=None)
            self._setup()
        except sqlite3.DatabaseError as exc:
            raise CorruptIndex(
                f"embedding cache {path} is unreadable ({exc}): delete it (it only saves time) and index again"
            ) from exc

    def _setup(self) -> None:
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode never corrupts; a power cut may only lose the last batches.
        self._db.execute("PRAGMA synchronous=NORMAL")
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, _CACHE_SCHEMA):
            raise CorruptIndex(
                f"embedding cache {self.path} has schema {version}, expected {_CACHE_SCHEMA}: "
                "delete it and index again"
            )
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors ("
            " embedder TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL,"
            " PRIMARY KEY (embedder, hash)) WITHOUT ROWID"
        )
        self._db.execute(f"PRAGMA user_version={_CACHE_SCHEMA}")

    def get_many(self, embedder_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(wanted), _SQL_VARS):
                part = wanted[start : start + _SQL_VARS]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT hash, vector FROM vectors WHERE embedder = ? AND hash IN ({marks})",
                    [embedder_id, *part],
                )
                for digest, blob in rows:
                    found[digest] = np.frombuffer(blob, dtype=np.float32).copy()
        return found

    def put_many(self, embedder_id: str, items: Mapping[str, np.ndarray]) -> None:
        rows = [(embedder_id, h, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for h, v in items.items()]
        if not rows:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def embed_with_cache(
    embedder: Embedder,
    cache: EmbeddingCache,
    items: Sequence[tuple[str, str]],
    batch_size: int = 64,
    on_progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, np.ndarray]:
    """Vectors for (hash, text) items: cached ones are read, the rest encoded in batches, and each
    batch is committed to the cache before the next starts, so a killed process loses at most one
    batch. Progress counts distinct hashes as (done, total). When `should_stop()` turns true,
    returns what it has so far."""
    texts = dict(items)  # one text per hash: equal hashes embed once
    found = cache.get_many(embedder.id, list(texts))
    total = len(texts)
    if on_progress:
        on_progress(len(found), total)
    # Longest first, as sentence-transformers orders one big call: batches of similar length
    # waste little on padding, so batching here costs no throughput.
    missing = sorted((h for h in texts if h not in found), key=lambda h: -len(texts[h]))
    for start in range(0, len(missing), max(batch_size, 1)):
        if should_stop and should_stop():
            break
        batch = missing[start : start + max(batch_size, 1)]
        vectors = embedder.encode([texts[h] for h in batch], batch_size=batch_size)
        if vectors.shape != (len(batch), embedder.dim):
            raise EmbedderError(
                f"embedder {embedder.id} returned shape {vectors.shape} for {len(batch)} texts, "
                f"expected ({len(batch)}, {embedder.dim}): check the model folder"
            )
        fresh = dict(zip(batch, vectors.astype(np.float32, copy=False)))
        cache.put_many(embedder.id, fresh)
        found.update(fresh)
        if on_progress:
            on_progress(len(found), total)
    return found
