"""Reading one repository's builds on Milvus: the client, one-line errors, the alias, the manifest."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from index.errors import CorruptIndex, IncompatibleIndex, NoIndex, StoreUnavailable
from index.milvus.client import collection_base, connect, is_missing, one_line
from index.milvus.schema import FILE_FIELDS
from index.store import FORMAT_VERSION, FileEntry, Manifest

__all__ = ["BATCH", "MilvusAccess"]

BATCH = 2000  # rows per insert and per paged query (Milvus caps a query window at 16,384)


class MilvusAccess:
    """The builds of one repository on one Milvus, for reading; MilvusStore adds opening and writing."""

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
            message = one_line(exc)
            if is_missing(message):
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

    def live_or_none(self) -> str | None:
        try:
            return self.live()
        except NoIndex:
            return None

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
        rows = sorted(self.paged(f"{name}_files", n_files, "", FILE_FIELDS), key=lambda r: int(r["id"]))
        if len(rows) != n_files:
            raise CorruptIndex(f"build {name} on Milvus at {self.uri} lost file rows: run `bridge index --rebuild`")
        files = {
            str(r["path"]): FileEntry(
                str(r["sha"]), int(r["size"]), int(r["mtime_ns"]), int(r["first_chunk"]), int(r["n_chunks"])
            )
            for r in rows
        }
        return Manifest(files=files, **data)

    def paged(self, collection: str, count: int, extra: str, fields: list[str]) -> Iterator[dict[str, Any]]:
        """Rows with ids 0..count-1 (and `extra` filter), a window of ids at a time."""
        for lo in range(0, count, BATCH):
            expr = f"id >= {lo} and id < {lo + BATCH}" + (f" and {extra}" if extra else "")
            yield from self.call("read rows", "query", collection, filter=expr, output_fields=fields, limit=BATCH)
