"""The query side of an index's vectors: the live generation's vectors and the model that embeds queries
(and commit titles), loaded once per process.

An install without the dense extra (no faiss, no query model's runtime) cannot read an index's vectors.
`QueryModel` then says why once (`missing`), and searches go on without them: the vectors are left as
they are for an install that can read them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from index.errors import IncompatibleIndex
from index.history import SubjectEncoder, SubjectVectors
from index.search.source import Generation, Vectors

if TYPE_CHECKING:
    from index.embed import Embedder

__all__ = ["QueryModel", "lexical_only"]


def lexical_only(module: str) -> str:
    """What a search says when the index's vectors need `module` and this install lacks it."""
    return (f"lexical only: the index has vectors, but this install cannot read them ({module} is not installed; "
            "pip install 'mcp-retrieval-bridge[dense]' adds it)")


class QueryModel:
    """Thread-safe: one model call at a time (`lock`), as for the chunks' vectors."""

    def __init__(self, loader: Callable[[str], Embedder] | None = None) -> None:
        self._loader = loader
        self.lock = threading.Lock()
        self.embedder: Embedder | None = None
        self.missing: str | None = None  # why this process cannot use the index's vectors (set once)

    def _lacks(self, exc: ImportError) -> None:
        self.missing = lexical_only((exc.name or "").split(".")[0] or str(exc))

    def vectors(self, gen: Generation) -> Vectors | None:
        """The generation's vectors; None without any, or where this install cannot read them."""
        if not gen.manifest.embedder or self.missing is not None:
            return None
        try:
            return gen.vectors()
        except ImportError as exc:  # no faiss: an install without the dense extra
            self._lacks(exc)
            return None

    def has_vectors(self, gen: Generation) -> bool:
        vectors = self.vectors(gen)
        return vectors is not None and vectors.count > 0

    def load(self, gen: Generation) -> float:
        """Load the query embedder if it is not loaded yet; the milliseconds that took (0 if it was, or
        where this install cannot load it: `missing` then says why)."""
        with self.lock:
            if self.embedder is not None or self.missing is not None:
                return 0.0
            t0 = time.perf_counter()
            try:
                embedder = self._new(gen.manifest.embedder or "")
                meta = gen.vector_meta()
                if meta.get("embedder_id") != embedder.id:
                    raise IncompatibleIndex(
                        f"index vectors were made by {meta.get('embedder_id')}, not {embedder.id}: "
                        "run `bridge index --rebuild`"
                    )
                # A lazy embedder (index/embed/minilm.py) builds its query model on first use: do it now,
                # so that the one-off cost is counted as load, not as search.
                prepare = getattr(embedder, "query_model", None)
                if callable(prepare):
                    prepare()
            except ImportError as exc:  # the query model's runtime is missing: no dense extra
                self._lacks(exc)
                return 0.0
            self.embedder = embedder
            return (time.perf_counter() - t0) * 1000

    def _new(self, spec: str) -> Embedder:
        if self._loader is not None:
            return self._loader(spec)
        from index.embed import load_embedder
        from index.store import default_home

        return load_embedder(spec, cache_dir=default_home() / "models")

    def encode(self, gen: Generation, query: str) -> np.ndarray | None:
        """The query's vector; None where the query model cannot be loaded here."""
        self.load(gen)
        with self.lock:
            return self.embedder.encode_query(query) if self.embedder is not None else None

    def subject_encoder(self, gen: Generation, spec: str) -> SubjectEncoder:
        """The model that reads titles against subject vectors of `spec`: the chunk embedder when it
        is that model, else the process's one copy (index/history/subjects.py loads each model once)."""
        if spec == gen.manifest.embedder and self.has_vectors(gen):
            self.load(gen)
            chunk_embedder = self.embedder
            if chunk_embedder is not None:
                return SubjectEncoder(spec, lambda _spec: chunk_embedder)
        return SubjectEncoder(spec)

    def read_title(self, gen: Generation, vectors: SubjectVectors, title: str) -> np.ndarray | None:
        """The title's vector by the model that made the history's subject vectors (index/history/subjects.py),
        or None when that model is not the one loaded (or cannot be loaded here)."""
        if self.missing is not None:
            return None
        try:
            encoder = self.subject_encoder(gen, vectors.spec)
            with self.lock:
                return encoder.encode_query(title) if encoder.embedder.id == vectors.model_id else None
        except ImportError as exc:
            self._lacks(exc)
            return None

    def warm_subjects(self, gen: Generation, spec: str) -> None:
        """Load the model that reads commit titles now, not in the first search."""
        if self.missing is not None:
            return
        try:
            self.subject_encoder(gen, spec).embedder  # noqa: B018 - load it now
        except ImportError as exc:
            self._lacks(exc)
