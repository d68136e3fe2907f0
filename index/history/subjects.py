"""Past commits by meaning: a vector per commit subject, and the commits whose subjects read most
like a report's title.

BM25 over the commit messages (index/history/commits.py) finds past commits that share a report's words.
A report's title and the subject of an earlier fix often say the same thing in other words, which
a sentence model matches. MiniLM does; the static table distilled from it does not: on shared/bench,
leave-one-repository-out R@1 went up 3 questions with MiniLM and 0 with the static vectors
(bench/archive/RESULTS-journal.md). So the subjects are embedded with MiniLM whatever model embeds the chunks, and
an index built without a model has none.

The SUBJECT_VOTERS commits nearest to the title vote for the files they touched. The learned second stage
(index/rank/ranker.py) reads two numbers per file: the summed cosine of its voters, and how many there are.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # index.embed is imported only when a model is loaded: searches start faster
    from index.embed import Embedder

__all__ = ["SUBJECT_FILES", "SUBJECT_VOTERS", "SubjectEncoder", "SubjectVectors", "per_file", "subject_spec", "subject_votes"]

SUBJECT_VOTERS = 30  # the same number of voters as the BM25 votes (index/history.VOTERS)
# Up to this many subjects go through the query path one by one: a re-index after a few commits
# then loads MiniLM's query model instead of the bulk one (0.6 s against 1.5 s on 2 cores before
# OpenVINO's compile cache holds them; index/embed/bulk.py).
_FEW = 32
_VECTORS = "subjects.npy"
_META = "subjects.json"
SUBJECT_FILES = (_VECTORS, _META)  # what SubjectVectors.save writes in a history folder


def subject_spec(chunk_spec: str | None) -> str | None:
    """The model for commit subjects, given the chunks' one: none for a lexical-only index, the
    same for the test-only hash vectors and for either MiniLM (a question's vector then serves
    both), MiniLM for every other model."""
    if chunk_spec is None:
        return None
    return chunk_spec if chunk_spec.startswith("hash") or chunk_spec in ("minilm", "minilm-int8") else "minilm"


class SubjectEncoder:
    """Embeds texts with the model `spec` names, loaded on first use: a re-index that finds no new
    commit loads nothing."""

    def __init__(self, spec: str, loader: Callable[[str], Embedder] | None = None) -> None:
        self.spec = spec
        self._loader = loader or _load
        self._embedder: Embedder | None = None

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self._loader(self.spec)
        return self._embedder

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        if len(texts) <= _FEW:
            return np.stack([self.encode_query(text) for text in texts])
        # Each subject once (13 % of sympy's repeat: "Fix typo", ...), by length: batches of
        # similar length waste little on padding.
        unique = sorted(set(texts), key=lambda text: (len(text), text))
        vectors = np.asarray(self.embedder.encode(unique, batch_size=128), dtype=np.float32)
        row = {text: i for i, text in enumerate(unique)}
        return vectors[[row[text] for text in texts]]

    def encode_query(self, text: str) -> np.ndarray:
        return np.asarray(self.embedder.encode_query(text), dtype=np.float32)


@functools.lru_cache(maxsize=4)
def _load(spec: str) -> Embedder:
    """One copy of each model per process: a server's repositories, a benchmark's trees share it."""
    from index.embed import load_embedder
    from index.store import default_home

    return load_embedder(spec, cache_dir=default_home() / "models")


@dataclass(frozen=True)
class SubjectVectors:
    """Row i: the unit vector of commit i's subject (the history's order), made by model `spec`
    (whose embedder id is `model_id`)."""

    spec: str
    model_id: str
    # (commits, dim), float32 in memory: converting 20k float16 rows per query cost more than the
    # rest of the subject votes. Stored as float16: half the disk, cosines within 1e-3.
    matrix: np.ndarray

    @staticmethod
    def extend(encoder: SubjectEncoder, subjects: Sequence[str], fresh: int,
               reused: SubjectVectors | None) -> SubjectVectors:
        """Vectors of `subjects`: the first `fresh` embedded now, the rest taken from `reused`
        (all embedded when it is None)."""
        if reused is None:
            fresh = len(subjects)
        elif fresh == 0:  # nothing new: no model to load
            return SubjectVectors(reused.spec, reused.model_id, reused.matrix[: len(subjects)])
        new = encoder.encode(subjects[:fresh]).astype(np.float32)
        kept = reused.matrix[: len(subjects) - fresh] if reused is not None else new[:0]
        return SubjectVectors(encoder.spec, encoder.embedder.id, np.vstack([new, kept]))

    def save(self, folder: Path) -> None:
        np.save(folder / _VECTORS, self.matrix.astype(np.float16))
        meta = {"spec": self.spec, "model_id": self.model_id, "rows": len(self.matrix)}
        (folder / _META).write_text(json.dumps(meta), encoding="utf-8")

    @staticmethod
    def stored_spec(folder: Path) -> str | None:
        """The model of the vectors saved in `folder` (None: none, or a vectors file that does not hold
        the rows its description counts, e.g. cut short by a full disk, so that the next fill makes
        them again). Reads the description and the vectors file's header, not the vectors."""
        try:
            meta = json.loads((folder / _META).read_text(encoding="utf-8"))
            # mmap checks the file is as long as its header says; a truncated one raises ValueError.
            shape = np.load(folder / _VECTORS, mmap_mode="r").shape
            return str(meta["spec"]) if shape[:1] == (int(meta["rows"]),) else None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @staticmethod
    def load(folder: Path, rows: int) -> SubjectVectors | None:
        """The stored vectors, or None when there are none or they do not fit `rows` commits."""
        try:
            meta = json.loads((folder / _META).read_text(encoding="utf-8"))
            matrix = np.load(folder / _VECTORS).astype(np.float32)
            spec, model_id = str(meta["spec"]), str(meta["model_id"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return SubjectVectors(spec, model_id, matrix) if matrix.ndim == 2 and len(matrix) == rows else None

    def nearest(self, vector: np.ndarray, k: int = SUBJECT_VOTERS) -> tuple[np.ndarray, np.ndarray]:
        """The k commits whose subjects are nearest to `vector`: (commit numbers, cosines), nearest first."""
        if not len(self.matrix) or len(vector) != self.matrix.shape[1]:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        # Not `matrix @ vector`: OpenBLAS splits that over both cores, and with one core busy
        # elsewhere its threads wait for each other; a whole-report search took 68 ms instead of 35
        # (bench/archive/RESULTS-journal.md). einsum's own loop is one thread: 0.33 ms for 6,000 subjects.
        cosines = np.einsum("ij,j->i", self.matrix, vector.astype(np.float32))
        k = min(k, len(cosines))
        top = np.argpartition(-cosines, k - 1)[:k]
        top = top[np.lexsort((top, -cosines[top]))]
        return top.astype(np.int64), cosines[top].astype(np.float64)


def subject_votes(vectors: SubjectVectors, files_of: Callable[[int], Sequence[str]],
                  title_vector: np.ndarray) -> dict[str, list[tuple[int, float]]]:
    """path -> the SUBJECT_VOTERS commits nearest to the title that touched it
    (`files_of(commit number)`), with their cosines."""
    out: dict[str, list[tuple[int, float]]] = {}
    commits, cosines = vectors.nearest(title_vector)
    for commit, cosine in zip(commits.tolist(), cosines.tolist()):
        for path in files_of(commit):
            out.setdefault(path, []).append((commit, cosine))
    return out


def per_file(votes: Mapping[str, Sequence[tuple[int, float]]], numbers: Mapping[str, int],
             n_files: int) -> tuple[np.ndarray, np.ndarray]:
    """Per file number (`numbers`: path -> number, of `n_files`): the summed cosine of its voters,
    and how many they are (files the index no longer has are left out)."""
    summed, count = np.zeros(n_files), np.zeros(n_files)
    for path, commits in votes.items():
        number = numbers.get(path)
        if number is not None:
            summed[number] = sum(cosine for _, cosine in commits)
            count[number] = len(commits)
    return summed, count
