"""The index on Milvus: one collection per repository and build, an alias as the live pointer.

    <base>                      alias: the live build of one repository (the counterpart of CURRENT)
    <base>_g<time>              chunks: id (= chunk id), path, lines, symbol, text, terms (analyzed),
                                sparse (Milvus's BM25 function over terms), dense (the embedder's vectors)
    <base>_g<time>_files        the manifest (row -1) and one row per file (first chunk, chunk count, sha)

`<base>` is named like the local index folder (`bridge_<folder name>_<sha1 of the real path>`). A
build writes both collections completely, flushes and loads them, and only then moves the alias;
the collection the alias left is dropped by a later build, after `GRACE_SECONDS`, so a reader that
resolved the alias a moment ago still finds it. A writer killed at any point leaves the alias on the
previous build; its unfinished collection is never named by the alias and is dropped later.

Lexical search: the chunk's own terms (index/tokenize.py, identifiers whole and split) are written
into an analyzed VARCHAR field, one word each. Characters the analyzer would split on (the dots of
`os.path.join`) are spelled with `_SEP`, a letter, so a term stays one token: Milvus then scores
exactly our terms with BM25 (k1=1.2, b=0.75, idf log(1 + (N - df + 0.5) / (df + 0.5)), as
index/lexical.py). Milvus returns the best `BM25_CANDIDATES` chunks, not every chunk's score: the
file-level ranking of index/rank.py is computed from those candidates (scores elsewhere are 0).

URIs: `http(s)://HOST:PORT` is a Milvus server (Standalone, Distributed, the managed service, or
`milvus-lite server`); a local path is embedded Milvus Lite (a `.db` file, or a folder that gets
`bridge.db`), for one process only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from index.chunk import chunk_file
from index.discover import discover
from index.errors import CorruptIndex, EmptyRepository, IncompatibleIndex, NoIndex, StoreUnavailable
from index.rank import FileEvidence
from index.source import file_evidence
from index.store import FORMAT_VERSION, FileEntry, Manifest, default_home
from index.tokenize import path_terms, terms
from index.types import Chunk, Progress, Selection

__all__ = [
    "BM25_CANDIDATES",
    "GRACE_SECONDS",
    "MilvusGeneration",
    "MilvusStore",
    "build_milvus",
    "collection_base",
    "connect",
    "encode_terms",
]

BM25_CANDIDATES = 1000  # chunks Milvus returns per BM25 query (as many as the dense file ranking reads)
GRACE_SECONDS = 60.0  # how long a collection the alias left stays readable
CONNECT_TIMEOUT = 10.0
# gRPC shares one connection per address in a process and backs off up to two minutes after a failure;
# a private pool and a short back-off let a reader reconnect within a second of Milvus coming back.
_GRPC_OPTIONS = {"grpc.use_local_subchannel_pool": 1, "grpc.initial_reconnect_backoff_ms": 200,
                 "grpc.min_reconnect_backoff_ms": 200, "grpc.max_reconnect_backoff_ms": 1000}
_SEP = "ǀ"  # U+01C0, a letter: joins the parts of `os.path.join` into one analyzer token
_NON_WORD = re.compile(r"\W")
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
_BATCH = 2000  # rows per insert and per paged query (Milvus caps a query window at 16,384)
_MAX_TOPK = 16384
_PART_CHARS = 16000
_MAX_PARTS = 512  # 8 M characters: more than the largest file the selection admits
_MAX_TERMS_BYTES = 65000  # an analyzed VARCHAR's limit, with room; see encode_terms
_CHUNK_FIELDS = ["id", "path", "start_line", "end_line", "language", "symbol", "text", "hash", "tokens"]
_FILE_FIELDS = ["id", "path", "sha", "size", "mtime_ns", "first_chunk", "n_chunks"]

ProgressFn = Callable[[Progress], None]


def encode_terms(words: Sequence[str]) -> str:
    """Our terms as one analyzable string: one analyzer token per term.

    A chunk whose terms pass the analyzed field's 65,535-byte limit (one huge minified line) keeps
    its first terms only, so BM25 scores it a little differently from the local store."""
    text = " ".join(_NON_WORD.sub(_SEP, w) for w in words)
    if len(text) * 4 <= _MAX_TERMS_BYTES or len(text.encode("utf-8")) <= _MAX_TERMS_BYTES:
        return text
    cut = text.encode("utf-8")[:_MAX_TERMS_BYTES].decode("utf-8", "ignore")
    return cut.rsplit(" ", 1)[0]


def collection_base(root: Path) -> str:
    """The alias of a repository: its folder name and a digest of its real path, like the index folder."""
    real = os.path.realpath(root)
    digest = hashlib.sha1(real.encode()).hexdigest()[:12]
    name = _UNSAFE.sub("_", Path(real).name or "root")[:40]
    return f"bridge_{name}_{digest}"


def embedded_path(uri: str) -> str:
    """The `.db` file of embedded Milvus Lite for a local path (a folder gets `bridge.db`)."""
    path = Path(uri).expanduser()
    if path.suffix != ".db":
        path.mkdir(parents=True, exist_ok=True)
        path = path / "bridge.db"
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    return str(path.resolve())


def is_server_uri(uri: str) -> bool:
    return uri.startswith(("http://", "https://", "tcp://", "unix:"))


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def connect(uri: str, token: str | None = None) -> Any:
    """A pymilvus MilvusClient for `uri`; StoreUnavailable when Milvus cannot be reached."""
    import logging

    from pymilvus import MilvusClient

    # pymilvus logs a traceback for every failed call; ours become one-line errors instead
    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
    target = uri if is_server_uri(uri) else embedded_path(uri)
    try:
        return MilvusClient(uri=target, token=token or "", timeout=CONNECT_TIMEOUT, grpc_options=_GRPC_OPTIONS)
    except Exception as exc:  # pymilvus raises MilvusException, grpc errors and ConnectionConfigException
        raise StoreUnavailable(
            f"cannot reach Milvus at {uri} ({_one_line(exc)}): start Milvus there or pass another --milvus-uri"
        ) from exc


class MilvusStore:
    """The builds of one repository on one Milvus; what a Searcher reads through (index/source.py)."""

    def __init__(self, uri: str, root: Path, token: str | None = None, client: Any = None) -> None:
        self.uri = uri
        self.root = Path(os.path.realpath(root))
        self.alias = collection_base(self.root)
        self._token = token
        self._client = client
        self._lock = threading.Lock()

    @property
    def location(self) -> str:
        return f"{self.uri} (alias {self.alias})"

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = connect(self.uri, self._token)
            return self._client

    def call(self, what: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """Run one MilvusClient method; a failure becomes one line that names the URI and what to do."""
        try:
            return self._invoke(method, args, kwargs)
        except StoreUnavailable:
            raise
        except Exception as exc:
            message = _one_line(exc)
            if _is_missing(message):
                raise NoIndex(
                    f"no index of {self.root} on Milvus at {self.uri} ({what}: {message}): "
                    f"run `bridge index {self.root} --milvus-uri {self.uri}`"
                ) from exc
            with self._lock:  # a fresh connection next time: recover by itself when Milvus returns
                self._client = None
            raise StoreUnavailable(
                f"Milvus at {self.uri} failed to {what} ({message}): check that it is running and reachable, "
                "then try again"
            ) from exc

    def _invoke(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return getattr(self.client, method)(*args, **kwargs)
        except StoreUnavailable:
            raise
        except Exception as exc:
            if method not in ("search", "query") or "call load()" not in str(exc):
                raise
        # A restarted Milvus (Lite) comes back with its collections released: load, then try once more.
        self.client.load_collection(args[0])
        return getattr(self.client, method)(*args, **kwargs)

    def live(self) -> str:
        # Asking for a missing alias makes pymilvus log a traceback; listing the aliases first does not.
        if self.alias not in self.call("list aliases", "list_aliases").get("aliases", []):
            raise NoIndex(
                f"no index of {self.root} on Milvus at {self.uri}: run `bridge index {self.root} --milvus-uri {self.uri}`"
            )
        info = self.call("resolve the live build", "describe_alias", self.alias)
        name = info.get("collection_name") if isinstance(info, dict) else None
        if not name:
            raise NoIndex(
                f"no index of {self.root} on Milvus at {self.uri}: run `bridge index {self.root} --milvus-uri {self.uri}`"
            )
        return str(name)

    def exists(self) -> bool:
        try:
            self.live()
        except NoIndex:
            return False
        return True

    def manifest(self, name: str) -> Manifest:
        rows = self.call(
            "read the manifest", "query", f"{name}_files", filter="id == -1", output_fields=["meta"], limit=1
        )
        if not rows:
            raise CorruptIndex(f"build {name} on Milvus at {self.uri} has no manifest: run `bridge index --rebuild`")
        try:
            data = json.loads(rows[0]["meta"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptIndex(
                f"manifest of {name} on Milvus at {self.uri} is damaged: run `bridge index --rebuild`"
            ) from exc
        if data.get("format_version") != FORMAT_VERSION:
            raise IncompatibleIndex(
                f"build {name} on Milvus has format {data.get('format_version')}, this bridge reads "
                f"{FORMAT_VERSION}: run `bridge index --rebuild --milvus-uri {self.uri}`"
            )
        n_files = int(data.pop("n_files"))
        rows = sorted(self._paged(f"{name}_files", n_files, "", _FILE_FIELDS), key=lambda r: int(r["id"]))
        if len(rows) != n_files:
            raise CorruptIndex(f"build {name} on Milvus at {self.uri} lost file rows: run `bridge index --rebuild`")
        files = {
            str(r["path"]): FileEntry(
                str(r["sha"]), int(r["size"]), int(r["mtime_ns"]), int(r["first_chunk"]), int(r["n_chunks"])
            )
            for r in rows
        }
        return Manifest(files=files, **data)

    def _paged(self, collection: str, count: int, extra: str, fields: list[str]) -> Iterator[dict[str, Any]]:
        """Rows with ids 0..count-1 (and `extra` filter), a window of ids at a time."""
        for lo in range(0, count, _BATCH):
            expr = f"id >= {lo} and id < {lo + _BATCH}" + (f" and {extra}" if extra else "")
            yield from self.call("read rows", "query", collection, filter=expr, output_fields=fields, limit=_BATCH)

    def open(self, name: str) -> MilvusGeneration:
        # A restarted Milvus Lite keeps collections released until someone loads them; loading a
        # loaded collection is a no-op, so every reader asks.
        for collection in (name, f"{name}_files"):
            self.call("load the live build", "load_collection", collection)
        return MilvusGeneration(self, name, self.manifest(name))

    # ---- writing -------------------------------------------------------------------------

    def write(
        self, chunks: list[Chunk], term_lists: list[list[str]], vectors: np.ndarray | None, manifest: Manifest
    ) -> str:
        """Write one whole build into new collections, then move the alias to it; returns its name."""
        name = f"{self.alias}_g{time.time_ns():020d}"
        dim = int(vectors.shape[1]) if vectors is not None else None
        self.call("create a collection", "create_collection", name, **_chunk_schema(self.client, dim))
        for lo in range(0, len(chunks), _BATCH):
            rows = [
                _chunk_row(i, chunks[i], term_lists[i], vectors[i] if vectors is not None else None)
                for i in range(lo, min(lo + _BATCH, len(chunks)))
            ]
            self.call("insert chunks", "insert", name, rows)
        self.call("create a collection", "create_collection", f"{name}_files", **_file_schema(self.client))
        file_rows: list[dict[str, Any]] = [
            {
                "id": i,
                "path": p,
                "sha": e.sha,
                "size": e.size,
                "mtime_ns": e.mtime_ns,
                "first_chunk": e.first_chunk,
                "n_chunks": e.n_chunks,
                "meta": "",
                "v": [0.0, 0.0],
            }
            for i, (p, e) in enumerate(manifest.files.items())
        ]
        meta = {k: v for k, v in asdict(manifest).items() if k != "files"} | {"n_files": len(file_rows)}
        file_rows.append(
            {
                "id": -1,
                "path": "",
                "sha": "",
                "size": 0,
                "mtime_ns": 0,
                "first_chunk": 0,
                "n_chunks": 0,
                "meta": json.dumps(meta),
                "v": [0.0, 0.0],
            }
        )
        for lo in range(0, len(file_rows), _BATCH):
            self.call("insert files", "insert", f"{name}_files", file_rows[lo : lo + _BATCH])
        for collection in (name, f"{name}_files"):
            self.call("flush", "flush", collection)
            self.call("load", "load_collection", collection)
        self._check_complete(name, len(chunks), len(file_rows))
        previous = self._live_or_none()
        if previous is None:
            self.call("create the alias", "create_alias", name, self.alias)
        else:
            self.call("move the alias", "alter_alias", name, self.alias)
        self.prune(keep={name, previous} - {None})  # type: ignore[arg-type]
        return name

    def _check_complete(self, name: str, chunks: int, file_rows: int) -> None:
        got = self.call("count rows", "query", name, filter="id >= 0", output_fields=["count(*)"])
        files = self.call("count rows", "query", f"{name}_files", filter="id >= -1", output_fields=["count(*)"])
        if got[0]["count(*)"] != chunks or files[0]["count(*)"] != file_rows:
            raise StoreUnavailable(
                f"Milvus at {self.uri} kept {got[0]['count(*)']} of {chunks} chunks of {name}: the alias was not moved; "
                "run `bridge index` again"
            )

    def _live_or_none(self) -> str | None:
        try:
            return self.live()
        except NoIndex:
            return None

    def builds(self) -> list[str]:
        """Chunk collections of this repository, oldest first (published or not)."""
        names = self.call("list collections", "list_collections")
        pattern = re.compile(re.escape(self.alias) + r"_g\d{20}")
        return sorted(n for n in names if pattern.fullmatch(n))

    def prune(self, keep: set[str], grace: float = GRACE_SECONDS) -> list[str]:
        """Drop builds other than `keep` that are older than `grace` seconds; returns their names."""
        live = self._live_or_none()
        now = time.time_ns()
        dropped = []
        for name in self.builds():
            born = int(name.rsplit("_g", 1)[1])
            if name in keep or name == live or (now - born) / 1e9 < grace:
                continue
            for collection in (name, f"{name}_files"):
                self.call("drop an old build", "drop_collection", collection)
            dropped.append(name)
        return dropped


def _is_missing(message: str) -> bool:
    low = message.lower()
    return ("alias" in low or "collection" in low) and ("not exist" in low or "not found" in low)


def _chunk_schema(client: Any, dim: int | None) -> dict[str, Any]:
    from pymilvus import DataType, Function, FunctionType

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("path", DataType.VARCHAR, max_length=4096)
    schema.add_field("start_line", DataType.INT64)
    schema.add_field("end_line", DataType.INT64)
    schema.add_field("language", DataType.VARCHAR, max_length=64)
    schema.add_field("symbol", DataType.VARCHAR, max_length=4096)
    # A VARCHAR holds at most 65,535 bytes and one chunk of a minified file can be longer: the text
    # is stored in parts of at most _PART_CHARS characters (4 bytes each at most).
    schema.add_field("text", DataType.ARRAY, element_type=DataType.VARCHAR, max_length=65535, max_capacity=_MAX_PARTS)
    schema.add_field("hash", DataType.VARCHAR, max_length=64)
    schema.add_field("tokens", DataType.INT64)
    schema.add_field(
        "terms", DataType.VARCHAR, max_length=65535, enable_analyzer=True, analyzer_params={"tokenizer": "standard"}
    )
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(
        Function(
            name="bm25", function_type=FunctionType.BM25, input_field_names=["terms"], output_field_names=["sparse"]
        )
    )
    index = client.prepare_index_params()
    index.add_index(
        "sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25", params={"bm25_k1": 1.2, "bm25_b": 0.75}
    )
    if dim is not None:
        schema.add_field("dense", DataType.FLOAT_VECTOR, dim=dim)
        index.add_index("dense", index_type="FLAT", metric_type="COSINE")  # exact, as faiss's flat index
    return {"schema": schema, "index_params": index}


def _file_schema(client: Any) -> dict[str, Any]:
    from pymilvus import DataType

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("path", DataType.VARCHAR, max_length=4096)
    schema.add_field("sha", DataType.VARCHAR, max_length=64)
    schema.add_field("size", DataType.INT64)
    schema.add_field("mtime_ns", DataType.INT64)
    schema.add_field("first_chunk", DataType.INT64)
    schema.add_field("n_chunks", DataType.INT64)
    schema.add_field("meta", DataType.VARCHAR, max_length=65535)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)  # Milvus wants a vector field in every collection
    index = client.prepare_index_params()
    index.add_index("v", index_type="FLAT", metric_type="L2")
    return {"schema": schema, "index_params": index}


def _chunk_row(i: int, c: Chunk, words: list[str], vector: np.ndarray | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": i,
        "path": c.path,
        "start_line": c.start_line,
        "end_line": c.end_line,
        "language": c.language or "",
        "symbol": c.symbol or "",
        "text": [c.text[i : i + _PART_CHARS] for i in range(0, len(c.text), _PART_CHARS)] or [""],
        "hash": c.hash,
        "tokens": c.tokens,
        "terms": encode_terms(words),
    }
    if vector is not None:
        row["dense"] = vector.astype(np.float32).tolist()
    return row


class MilvusGeneration:
    """One published build on Milvus, as search reads it: only the file tables are held here."""

    def __init__(self, store: MilvusStore, name: str, manifest: Manifest) -> None:
        self.store = store
        self.name = name
        self.manifest = manifest
        self.files: FileEvidence
        self.files, self.paths = file_evidence(manifest, self._symbols)
        meta = manifest.stats.get("vectors")
        self._meta: dict[str, Any] = meta if isinstance(meta, dict) else {}

    def _symbols(self) -> list[tuple[int, str]]:
        rows = self.store._paged(self.name, self.manifest.chunks, 'symbol != ""', ["id", "symbol"])
        return [(int(r["id"]), str(r["symbol"])) for r in rows]

    def _filter(self, allowed: np.ndarray | None) -> str:
        if allowed is None or bool(allowed.all()):
            return ""
        paths = sorted(set(self.paths[allowed].tolist()))
        return f"path in {json.dumps(paths)}"

    def bm25(self, words: Sequence[str], allowed: np.ndarray | None) -> np.ndarray:
        scores = np.zeros(self.manifest.chunks, dtype=np.float32)
        if not words or (allowed is not None and not allowed.any()):
            return scores
        for hit in self.search(encode_terms(words), "sparse", "BM25", BM25_CANDIDATES, allowed):
            scores[int(hit["id"])] = abs(float(hit["distance"]))  # Milvus Lite reports -score, Milvus the score
        return scores

    def search(self, data: Any, field: str, metric: str, limit: int, allowed: np.ndarray | None) -> list[Any]:
        """The hits of one search on `field` (`sparse`: BM25 over our terms; `dense`: cosine)."""
        hits = self.store.call(
            "search",
            "search",
            self.name,
            data=[data],
            anns_field=field,
            limit=min(limit, _MAX_TOPK),
            filter=self._filter(allowed),
            output_fields=[],
            search_params={"metric_type": metric},
        )
        return list(hits[0])

    def chunks(self, ids: list[int]) -> dict[int, Chunk]:
        if not ids:
            return {}
        rows = self.store.call(
            "read chunks",
            "query",
            self.name,
            filter=f"id in {[int(i) for i in ids]}",
            output_fields=_CHUNK_FIELDS,
            limit=len(ids),
        )
        return {
            int(r["id"]): Chunk(
                r["path"],
                int(r["start_line"]),
                int(r["end_line"]),
                r["language"] or None,
                r["symbol"] or None,
                "".join(r["text"]),
                r["hash"],
                int(r["tokens"]),
            )
            for r in rows
        }

    def vectors(self) -> MilvusVectors | None:
        return MilvusVectors(self) if self._meta else None

    def vector_meta(self) -> dict[str, Any]:
        return dict(self._meta)

    def close(self) -> None:
        pass  # the client belongs to the store


class MilvusVectors:
    def __init__(self, gen: MilvusGeneration) -> None:
        self._gen = gen

    @property
    def count(self) -> int:
        return self._gen.manifest.chunks

    def top(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        if k <= 0 or (allowed is not None and not allowed.any()):
            return []
        vector = np.asarray(query, dtype=np.float32).reshape(-1).tolist()
        return [(int(h["id"]), float(h["distance"])) for h in self._gen.search(vector, "dense", "COSINE", k, allowed)]


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
    previous = store._live_or_none()
    if previous is not None and not rebuild:
        old = store.manifest(previous)
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
