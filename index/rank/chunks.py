"""The chunk stage: of a file a bug report leads to, the chunk the report is about.

Hybrid search shows one chunk of each of its best files. The fused chunk order (BM25 of the whole
report, the dense vectors) picks a file's chunk by the report's words, which a long report spreads
over every chunk a little: on shared/bench the chunk it picks in a gold file holds a line the fix
edits far less often than the file is found (bench/edit_sites.py). For a report (a question of
several lines) each chunk of a shown file gets a row of CHUNK_FEATURES, read from the report's
title, the names it uses and where the chunk sits, and a linear model trained on shared/bench by
bench/train_chunks.py picks the chunk with the highest score. One-line questions keep their own
rules (the definition or line they name; index/search/hits.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

import numpy as np

from index.rank.question import QUOTED_LINE, Question, flatten
from index.types import Chunk

__all__ = ["CHUNK_FEATURES", "ChunkStage", "chunk_features", "is_quoted", "load_chunk_stage", "quoted_lines"]

CHUNK_FEATURES = (
    "bm25",  # BM25 of the report, relative to the file's best chunk
    "bm25_top",  # the file's best chunk by it
    "title",  # BM25 of the title line, relative to the file's best chunk
    "title_top",
    "dense",  # cosine of the report's vector, where the chunk is among the nearest
    "dense_top",
    "fused_first",  # the chunk the fused order picks (what hybrid search showed before this stage)
    "named",  # the chunk defines a name the report uses as code
    "title_named",  # ... a name its title uses
    "identifiers",  # share of the report's code names the chunk's text uses, relative to the file's best
    "title_identifiers",  # the same for the title's names
    "first",  # the file's first chunk (imports, the module's docstring)
    "position",  # where in the file (0 first, 1 last)
    "tokens",  # size, in units of a full chunk
    "module_level",  # not inside any definition
    "quoted",  # lines of the chunk the report quotes word for word, relative to the file's most quoted chunk
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_COMMENTS = ("#", "//", '"""', "'''")
_FULL_CHUNK = 250.0


@dataclass(frozen=True)
class ChunkStage:
    weights: np.ndarray
    trained_on: str

    def choose(self, rows: np.ndarray) -> int:
        """The row with the highest score (the first on a tie)."""
        return int(np.argmax(rows @ self.weights))

    def order(self, rows: np.ndarray) -> list[int]:
        """The rows best first (on a tie, the earlier first): `choose` is the first of them."""
        return [int(i) for i in np.argsort(-(rows @ self.weights), kind="stable")]


def load_chunk_stage(name: str = "chunker.json") -> ChunkStage | None:
    """The shipped model, or None when it is missing, damaged or made for other features."""
    try:
        data = json.loads(resources.files("index.rank").joinpath(name).read_text(encoding="utf-8"))
        if tuple(data["features"]) != CHUNK_FEATURES:
            return None
        weights = np.asarray([float(data["weights"][f]) for f in CHUNK_FEATURES], dtype=np.float64)
        return ChunkStage(weights, str(data.get("trained_on", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _tails(names: frozenset[str]) -> frozenset[str]:
    return frozenset(name.rsplit(".", 1)[-1] for name in names)


def _relative(values: np.ndarray) -> np.ndarray:
    top = float(values.max()) if len(values) else 0.0
    return values / top if top > 0 else np.zeros_like(values)


def _is_top(values: np.ndarray) -> np.ndarray:
    out = np.zeros_like(values)
    if len(values) and float(values.max()) > 0:
        out[int(np.argmax(values))] = 1.0
    return out


def is_quoted(question: Question, raw: str) -> bool:
    """Whether the question quotes this line of code word for word, case and spacing aside (lines of
    QUOTED_LINE characters or more, not comments): a report that pastes the code it is about (a
    traceback's source lines, a line copied into prose) points at it."""
    if len(raw) < QUOTED_LINE:  # flattening never lengthens a line
        return False
    line = flatten(raw)
    return (len(line) >= QUOTED_LINE and line[:QUOTED_LINE] in question.flat_windows
            and not line.startswith(_COMMENTS) and any(ch.isalpha() for ch in line) and line in question.flat)


def quoted_lines(question: Question, text: str) -> int:
    """How many lines of `text` the question quotes (`is_quoted`). A chunk holds an edit line where the
    stage's other features miss it (bench/DECISIONS.md)."""
    return sum(is_quoted(question, raw) for raw in text.split("\n"))


def chunk_features(
    question: Question, ids: Sequence[int], chunks: Sequence[Chunk], scores: np.ndarray, title_scores: np.ndarray | None,
    dense: Mapping[int, float], fused_first: int | None,
) -> np.ndarray:
    """CHUNK_FEATURES of one file's chunks (`ids` and their `chunks`, in file order); `scores` and
    `title_scores` are BM25 per chunk id, `dense` the cosine of the nearest chunks by id."""
    n = len(ids)
    at = np.asarray(ids, dtype=np.int64)
    bm25 = scores[at].astype(np.float64) if len(scores) else np.zeros(n)
    title = title_scores[at].astype(np.float64) if title_scores is not None else np.zeros(n)
    near = np.asarray([max(dense.get(cid, 0.0), 0.0) for cid in ids], dtype=np.float64)
    words = [frozenset(_WORD.findall(c.text)) for c in chunks]
    report_names = question.clues.identifiers | _tails(question.names)
    title_clues = question.title_clues
    title_names = (title_clues.identifiers | _tails(frozenset(title_clues.modules))) if title_clues else frozenset()
    symbols = [c.symbol.rsplit(".", 1)[-1] if c.symbol else None for c in chunks]
    rows = np.zeros((n, len(CHUNK_FEATURES)), dtype=np.float64)
    column = {name: i for i, name in enumerate(CHUNK_FEATURES)}
    rows[:, column["bm25"]] = _relative(bm25)
    rows[:, column["bm25_top"]] = _is_top(bm25)
    rows[:, column["title"]] = _relative(title)
    rows[:, column["title_top"]] = _is_top(title)
    rows[:, column["dense"]] = near
    rows[:, column["dense_top"]] = _is_top(near)
    rows[:, column["fused_first"]] = [cid == fused_first for cid in ids]
    rows[:, column["named"]] = [s is not None and s in report_names for s in symbols]
    rows[:, column["title_named"]] = [s is not None and s in title_names for s in symbols]
    rows[:, column["identifiers"]] = _relative(np.asarray([len(w & report_names) for w in words], dtype=np.float64))
    rows[:, column["title_identifiers"]] = _relative(np.asarray([len(w & title_names) for w in words], dtype=np.float64))
    rows[0, column["first"]] = 1.0
    rows[:, column["position"]] = np.arange(n) / max(n - 1, 1)
    rows[:, column["tokens"]] = [c.tokens / _FULL_CHUNK for c in chunks]
    rows[:, column["module_level"]] = [s is None for s in symbols]
    rows[:, column["quoted"]] = _relative(np.asarray([quoted_lines(question, c.text) for c in chunks], dtype=np.float64))
    return rows
