"""One exception tree for the index package; every message names the object and the next step."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path


class IndexingError(Exception):
    """Base of every error the index package raises on purpose."""


class NotARepository(IndexingError):
    pass


class EmptyRepository(IndexingError):
    pass


class NoIndex(IndexingError):
    pass


class CorruptIndex(IndexingError):
    pass


class IncompatibleIndex(IndexingError):
    pass


class IndexLocked(IndexingError):
    pass


class PathNotAllowed(IndexingError):
    pass


class BadQuery(IndexingError):
    pass


class EmbedderError(IndexingError):
    pass


class IndexWriteError(IndexingError):
    """Writing the index failed (disk full, file size limit, permissions); the previous index is untouched."""


class StoreUnavailable(IndexingError):
    """The index's store (a Milvus server) cannot be reached or refused a call; the message names its URI."""


@contextlib.contextmanager
def writing(index_dir: Path) -> Iterator[None]:
    """A failed write (disk full, file size limit, permissions) becomes one clear IndexWriteError."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise IndexWriteError(
            f"cannot write the index at {index_dir} ({reason}): free disk space or pass another --index-dir, "
            "then run `bridge index` again; the previous index still answers"
        ) from exc
