"""The builds of one repository on one Milvus, as a Store (index/search/source.py): open the live one, write a new one."""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict
from typing import Any

import numpy as np

from index.errors import StoreUnavailable
from index.milvus.access import BATCH, MilvusAccess
from index.milvus.generation import MilvusGeneration
from index.milvus.schema import chunk_row, chunk_schema, file_schema
from index.store import Manifest
from index.types import Chunk

__all__ = ["GRACE_SECONDS", "MilvusStore"]

GRACE_SECONDS = 60.0  # how long a collection the alias left stays readable


class MilvusStore(MilvusAccess):
    """What a Searcher reads through and `bridge index --milvus-uri` writes to."""

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
        self.call("create a collection", "create_collection", name, **chunk_schema(self.client, dim))
        for lo in range(0, len(chunks), BATCH):
            rows = [
                chunk_row(i, chunks[i], term_lists[i], vectors[i] if vectors is not None else None)
                for i in range(lo, min(lo + BATCH, len(chunks)))
            ]
            self.call("insert chunks", "insert", name, rows)
        self.call("create a collection", "create_collection", f"{name}_files", **file_schema(self.client))
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
        for lo in range(0, len(file_rows), BATCH):
            self.call("insert files", "insert", f"{name}_files", file_rows[lo : lo + BATCH])
        for collection in (name, f"{name}_files"):
            self.call("flush", "flush", collection)
            self.call("load", "load_collection", collection)
        self._check_complete(name, len(chunks), len(file_rows))
        previous = self.live_or_none()
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

    def builds(self) -> list[str]:
        """Chunk collections of this repository, oldest first (published or not)."""
        names = self.call("list collections", "list_collections")
        pattern = re.compile(re.escape(self.alias) + r"_g\d{20}")
        return sorted(n for n in names if pattern.fullmatch(n))

    def prune(self, keep: set[str], grace: float = GRACE_SECONDS) -> list[str]:
        """Drop builds other than `keep` that are older than `grace` seconds; returns their names."""
        live = self.live_or_none()
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
