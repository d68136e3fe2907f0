"""On-disk layout of one index, its manifest, the writer lock and the atomic swap.

    INDEX_DIR/
      CURRENT                 name of the live generation, replaced atomically
      write.lock              held by the one writer (filelock)
      embeddings.sqlite       embedding cache, kept across generations
      g<time>-<pid>/          one immutable generation
        manifest.json         format version, root, embedder, chunking, selection, files
        chunks.sqlite         chunk rows (id = position in the lexical index)
        lexical/              BM25 matrix (bm25s) + term ids of every chunk
        vectors.faiss         dense vectors by chunk id; appears and grows after publication
        vectors.json          embedder id and dimension of vectors.faiss
        segments.json         only in a delta generation (index/store/segments.py): then chunks.sqlite and
        delta/                lexical/ are the base segment, hard links to the files of the
                              generation that built it, and delta/ holds the chunks of the files
                              changed since, with the base chunk ids they replace (deleted)
      g....tmp/               a generation being written; never read, removed by the next writer

A writer builds a whole generation in a `.tmp` folder, fsyncs it, renames it into place and then
replaces CURRENT (a delta generation's hard-linked base files are never written, only linked).
A reader resolves CURRENT once and only opens immutable files, so it never sees
a half-written index, and a `kill -9` at any point leaves the previous generation answering.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path

from index.errors import CorruptIndex, IncompatibleIndex, IndexLocked, NoIndex
from index.types import Chunk

__all__ = [
    "FORMAT_VERSION",
    "SEGMENTED_FORMAT",
    "FileEntry",
    "Manifest",
    "IndexDir",
    "default_home",
    "default_index_dir",
    "write_chunks",
    "ChunkWriter",
    "ChunkTable",
]

FORMAT_VERSION = 1
# A delta generation (index/store/segments.py) says 2, so that a bridge that reads only single segments
# refuses it with the one-line "rebuild" error instead of answering from its base alone; this
# bridge reads both, and still writes 1 for a single segment.
SEGMENTED_FORMAT = 2
_READABLE = (FORMAT_VERSION, SEGMENTED_FORMAT)
_CURRENT = "CURRENT"
_MANIFEST = "manifest.json"
_CHUNKS = "chunks.sqlite"
_KEEP_GENERATIONS = 2  # the live one and the one before, for readers that opened it a moment ago


def default_home() -> Path:
    """`BRIDGE_HOME`, else `$XDG_CACHE_HOME/mcp-retrieval-bridge`, else `~/.cache/mcp-retrieval-bridge`."""
    if home := os.environ.get("BRIDGE_HOME"):
        return Path(home).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "mcp-retrieval-bridge"


def default_index_dir(root: Path) -> Path:
    """Where the index of `root` lives by default: found again from the repository path alone."""
    real = Path(os.path.realpath(root))
    digest = hashlib.sha1(str(real).encode()).hexdigest()[:12]
    return default_home() / "indexes" / f"{real.name or 'root'}-{digest}"


@dataclass(frozen=True)
class FileEntry:
    sha: str
    size: int
    mtime_ns: int
    first_chunk: int
    n_chunks: int


@dataclass(frozen=True)
class Manifest:
    root: str
    built_at: str
    embedder: str | None  # the embedder spec ("minilm", "static", a path) or None: no vectors
    chunking: dict[str, int]
    selection: dict[str, object]
    files: dict[str, FileEntry]
    chunks: int
    stats: dict[str, object] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    def to_json(self) -> str:
        # One line by json's C encoder, the file entries as plain dicts: `asdict`'s recursion and
        # the pure-Python encoder that an indent needs took seconds for 50k files, every re-index.
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "files"}
        data["files"] = {
            p: {"sha": e.sha, "size": e.size, "mtime_ns": e.mtime_ns, "first_chunk": e.first_chunk, "n_chunks": e.n_chunks}
            for p, e in self.files.items()
        }
        return json.dumps(data, sort_keys=True)

    @staticmethod
    def from_json(text: str, where: Path) -> Manifest:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise CorruptIndex(f"index manifest {where} is damaged: run `bridge index --rebuild`") from exc
        version = data.get("format_version") if isinstance(data, dict) else None
        if version not in _READABLE:
            raise IncompatibleIndex(
                f"index at {where.parent.parent} has format {version}, this bridge reads format "
                f"{FORMAT_VERSION}: run `bridge index --rebuild`"
            )
        try:
            data["files"] = {p: FileEntry(**e) for p, e in data["files"].items()}
            return Manifest(**data)
        except (TypeError, KeyError, AttributeError) as exc:
            raise CorruptIndex(f"index manifest {where} is damaged: run `bridge index --rebuild`") from exc


class IndexDir:
    """One index folder: finds the live generation, creates and publishes new ones."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @property
    def embeddings_path(self) -> Path:
        return self.path / "embeddings.sqlite"

    def exists(self) -> bool:
        return (self.path / _CURRENT).is_file()

    def current(self) -> Path:
        try:
            name = (self.path / _CURRENT).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise NoIndex(f"no index at {self.path}: run `bridge index REPO` first") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CorruptIndex(f"index at {self.path} is unreadable ({exc}): run `bridge index --rebuild`") from exc
        gen = self.path / name
        if not name or "/" in name or not gen.is_dir():
            raise CorruptIndex(f"index at {self.path} points to a missing generation: run `bridge index --rebuild`")
        return gen

    def manifest(self, generation: Path | None = None) -> Manifest:
        gen = generation or self.current()
        try:
            text = (gen / _MANIFEST).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CorruptIndex(f"index manifest in {gen} is unreadable: run `bridge index --rebuild`") from exc
        return Manifest.from_json(text, gen / _MANIFEST)

    @contextlib.contextmanager
    def writer_lock(self, timeout: float = 10.0) -> Iterator[None]:
        from filelock import FileLock, Timeout

        self.path.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.path / "write.lock"))
        try:
            lock.acquire(timeout=timeout)
        except Timeout:
            raise IndexLocked(
                f"another `bridge index` is writing {self.path}: wait for it to finish, or stop it"
            ) from None
        try:
            yield
        finally:
            lock.release()

    def new_generation(self) -> Path:
        """A fresh temporary folder for the next generation (call under the writer lock)."""
        name = f"g{time.time_ns():020d}-{os.getpid()}.tmp"
        tmp = self.path / name
        tmp.mkdir(parents=True)
        return tmp

    def publish(self, tmp: Path) -> Path:
        """Make a finished temporary generation the live one (call under the writer lock)."""
        for f in tmp.rglob("*"):
            if f.is_file():
                _fsync(f)
        gen = tmp.with_name(tmp.name.removesuffix(".tmp"))
        os.replace(tmp, gen)
        pointer = self.path / (_CURRENT + ".tmp")
        pointer.write_text(gen.name + "\n", encoding="utf-8")
        _fsync(pointer)
        os.replace(pointer, self.path / _CURRENT)
        _fsync_dir(self.path)
        self.prune()
        return gen

    def prune(self) -> None:
        """Remove unfinished generations and all but the newest few (call under the writer lock)."""
        live = (self.path / _CURRENT).read_text(errors="replace").strip() if self.exists() else None
        gens = sorted(p for p in self.path.glob("g*") if p.is_dir())
        done = [p for p in gens if not p.name.endswith(".tmp")]
        keep = {p.name for p in done[-_KEEP_GENERATIONS:]} | {live}
        for p in gens:
            if p.name not in keep:
                shutil.rmtree(p, ignore_errors=True)
        for stray in self.path.glob("*.tmp"):
            if stray.is_file():
                stray.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_SCHEMA = """CREATE TABLE chunks (id INTEGER PRIMARY KEY, path TEXT NOT NULL, start_line INTEGER NOT NULL,
end_line INTEGER NOT NULL, language TEXT, symbol TEXT, hash TEXT NOT NULL, tokens INTEGER NOT NULL,
text TEXT NOT NULL)"""


_COLUMNS = "id, path, start_line, end_line, language, symbol, text, hash, tokens"  # Chunk field order


def write_chunks(generation: Path, chunks: list[Chunk]) -> None:
    con = sqlite3.connect(generation / _CHUNKS)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute(_SCHEMA)
        con.executemany(
            "INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?)",
            (
                (i, c.path, c.start_line, c.end_line, c.language, c.symbol, c.hash, c.tokens, c.text)
                for i, c in enumerate(chunks)
            ),
        )
        con.commit()
    finally:
        con.close()


class ChunkWriter:
    """Chunk rows written as they are made, a batch at a time, so memory holds one batch; rows of
    unchanged files are copied from the `previous` generation's table inside SQLite."""

    def __init__(self, generation: Path, previous: Path | None = None, batch: int = 2000, start: int = 0) -> None:
        generation.mkdir(parents=True, exist_ok=True)
        self._con = sqlite3.connect(_uri(generation / _CHUNKS, ""), uri=True, isolation_level=None)
        self._con.execute("PRAGMA journal_mode=OFF")  # a generation is thrown away whole if a write fails
        self._con.execute("PRAGMA synchronous=OFF")  # publish() fsyncs every file before the swap
        self._con.execute(_SCHEMA)
        if previous is not None:
            self._con.execute("ATTACH DATABASE ? AS prev", (_uri(previous / _CHUNKS, "?mode=ro&immutable=1"),))
        self._batch = batch
        self._rows: list[tuple[object, ...]] = []
        self._copying = (0, 0, 0)  # (first previous id, first new id, rows) not yet copied
        self.count = start  # the next row's id: a delta segment's ids continue after its base's

    def add(self, chunk: Chunk) -> None:
        c = chunk
        self._rows.append((self.count, c.path, c.start_line, c.end_line, c.language, c.symbol, c.hash, c.tokens, c.text))
        self.count += 1
        if len(self._rows) >= self._batch:
            self._flush()

    def copy(self, first: int, n: int) -> None:
        """Append rows first..first+n-1 of the previous generation, renumbered. Consecutive
        ranges are copied by one statement (one per file made a one-file re-index of 50k files
        run 50k statements)."""
        src, dst, count = self._copying
        if count and first == src + count and self.count == dst + count:
            self._copying = (src, dst, count + n)
        else:
            self._flush_copy()
            self._copying = (first, self.count, n)
        self.count += n

    def _flush_copy(self) -> None:
        src, dst, count = self._copying
        if count:
            self._con.execute(
                "INSERT INTO chunks SELECT id + ?, path, start_line, end_line, language, symbol, hash, tokens, text "
                "FROM prev.chunks WHERE id >= ? AND id < ?",
                (dst - src, src, src + count),
            )
        self._copying = (0, 0, 0)

    def _flush(self) -> None:
        self._flush_copy()
        if self._rows:
            self._con.execute("BEGIN")
            self._con.executemany("INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?)", self._rows)
            self._con.execute("COMMIT")
            self._rows = []

    def close(self) -> None:
        """Write what is left; the table is complete once this returns."""
        try:
            self._flush()
        finally:
            self._con.close()


def _uri(path: Path, query: str) -> str:
    from urllib.parse import quote

    return f"file:{quote(str(path))}{query}"


class ChunkTable:
    """Read-only access to a generation's chunk rows; safe to share between threads."""

    def __init__(self, generation: Path) -> None:
        path = generation / _CHUNKS
        if not path.is_file():
            raise CorruptIndex(f"chunk table missing in {generation}: run `bridge index --rebuild`")
        uri = f"file:{path}?mode=ro&immutable=1"
        self._con = sqlite3.connect(uri, uri=True, check_same_thread=False)
        self._lock = threading.Lock()

    def get(self, ids: list[int]) -> dict[int, Chunk]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        try:
            with self._lock:
                rows = self._con.execute(f"SELECT {_COLUMNS} FROM chunks WHERE id IN ({marks})", ids).fetchall()
        except sqlite3.DatabaseError as exc:
            raise CorruptIndex(f"chunk table is damaged ({exc}): run `bridge index --rebuild`") from exc
        return {row[0]: Chunk(*row[1:]) for row in rows}

    def all(self) -> list[Chunk]:
        try:
            with self._lock:
                rows = self._con.execute(f"SELECT {_COLUMNS} FROM chunks ORDER BY id").fetchall()
        except sqlite3.DatabaseError as exc:
            raise CorruptIndex(f"chunk table is damaged ({exc}): run `bridge index --rebuild`") from exc
        return [Chunk(*row[1:]) for row in rows]

    def items(self) -> list[tuple[int, Chunk]]:
        """(id, chunk) of every row, by id: what the vector fill embeds."""
        try:
            with self._lock:
                rows = self._con.execute(f"SELECT {_COLUMNS} FROM chunks ORDER BY id").fetchall()
        except sqlite3.DatabaseError as exc:
            raise CorruptIndex(f"chunk table is damaged ({exc}): run `bridge index --rebuild`") from exc
        return [(row[0], Chunk(*row[1:])) for row in rows]

    def symbols(self) -> list[tuple[int, str]]:
        """(chunk id, symbol) of every chunk that has one: what the file-level ranking looks up."""
        try:
            with self._lock:
                return self._con.execute("SELECT id, symbol FROM chunks WHERE symbol IS NOT NULL").fetchall()
        except sqlite3.DatabaseError as exc:
            raise CorruptIndex(f"chunk table is damaged ({exc}): run `bridge index --rebuild`") from exc

    def close(self) -> None:
        self._con.close()
