"""Clue features for the learned second stage: how a candidate file's own name and definitions
meet the report's title, and where a traceback ends.

The signals of index/rank/evidence.py rank files by the report's words as a whole. Studying the
questions where the gold file was among the fused top 20 but not first (bench/archive/RESULTS-journal.md,
issue 11, third pass) showed what they miss: the title is the reporter's one-line summary and
often names the module by its own name (`ccode(sinc(x))` → `printing/ccode.py`, a "blueprint"
→ `blueprints.py`, `rst_prolog` → `util/rst.py`, a "(fu.py)" in the title), or a class the
file defines (`Derivative`, `ZeroMatrix`); and a traceback's last repository frame is where the
error was raised. Every feature here is a fact about a file's path or its definitions against
the report's text, never a project's words, so it means the same on a repository never seen.

CLUE_FEATURES, per candidate file:
- stem_title: the file's stem (a package's folder name for `__init__.py`) is a term of the title;
- stem_title_prefix: a title term of 4+ letters starts the stem or the stem starts it
  (`trig` / `trigsimp`, `blueprint` / `blueprints`), without an exact match;
- stem_body: the stem is a term of the rest of the report;
- folder_title: one of its folders below the top one is a term of the title;
- named_title: the title names the file (a path or a dotted module);
- last_frame: the last path the report names that matches a file is this one (the deepest frame
  of a traceback, where the error surfaced);
- title_defines: summed idf of title words the file defines (a class, function or method name),
  relative to the best candidate;
- folder_share: share of the ten best fused candidates that sit in the same folder (a report is
  usually about one area; a lone file from elsewhere is less likely).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np

from index.tokenize import terms

__all__ = ["AGGREGATE_FEATURES", "CLUE_FEATURES", "aggregate_matrix", "clue_matrix", "file_stem", "title_words"]

CLUE_FEATURES = (
    "stem_title", "stem_title_prefix", "stem_body", "folder_title", "named_title", "last_frame",
    "title_defines", "folder_share",
)
# How much of a file the question reaches, beyond its single best chunk (index/rank/evidence.py's signals
# keep one number per file and signal): the title's BM25 summed over the file's chunks (the
# "files" signal for the title alone), and how many of its chunks are among the best lexical and
# the nearest dense chunks. A file the report is about tends to match in several places.
AGGREGATE_FEATURES = ("title_files", "lexical_hits", "dense_hits")
_LEXICAL_BEST = 100  # best BM25 chunks counted per file
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_PREFIX_MIN = 4
_AREA = 10  # the best fused candidates that say which folder the report is about


def file_stem(path: str) -> str:
    """The name a file is known by: its stem, or its package's folder for `__init__.py`."""
    parts = path.lower().split("/")
    name = parts[-1]
    if name.startswith("__init__.") and len(parts) > 1:
        return parts[-2]
    return name.split(".", 1)[0]


@lru_cache(maxsize=1 << 16)
def _path_parts(path: str) -> tuple[str, str, tuple[str, ...]]:
    """(stem, folder, folders below the top one) of a path; cached: the same files come back query after query."""
    parts = path.lower().split("/")
    return file_stem(path), "/".join(parts[:-1]), tuple(parts[1:-1])


def title_words(title: str) -> list[str]:
    """Raw words of the title as written (case kept), for matching definition names."""
    return _WORD.findall(title)


def _stem_facts(stem: str, title_terms: frozenset[str], body_terms: frozenset[str]) -> tuple[float, float, float]:
    exact = stem in title_terms
    prefix = not exact and len(stem) >= _PREFIX_MIN and any(
        len(t) >= _PREFIX_MIN and (stem.startswith(t) or t.startswith(stem)) for t in title_terms
    )
    return float(exact), float(prefix), float(stem in body_terms)


def _title_defines(words: Sequence[str], definitions: Mapping[str, frozenset[int]], n_files: int,
                   rows: np.ndarray) -> np.ndarray:
    """Summed idf of the title words each candidate defines, over the best candidate's (0 if none)."""
    score: dict[int, float] = {}
    for word in set(words):
        where = definitions.get(word)
        if not where or word.startswith("__"):
            continue
        idf = math.log(max(n_files, 2) / len(where))
        for i in where:
            score[i] = score.get(i, 0.0) + idf
    out = np.fromiter((score.get(int(i), 0.0) for i in rows), dtype=np.float64, count=len(rows))
    top = float(out.max()) if len(out) else 0.0
    return out / top if top > 0 else out


def _folder_share(folders: Sequence[str]) -> np.ndarray:
    area = folders[:_AREA]
    if not area:
        return np.zeros(len(folders))
    counts: dict[str, int] = {}
    for folder in area:
        counts[folder] = counts.get(folder, 0) + 1
    return np.asarray([counts.get(f, 0) / len(area) for f in folders], dtype=np.float64)


def clue_matrix(
    paths: Sequence[str],
    rows: np.ndarray,
    query: str,
    title: str | None,
    title_named: frozenset[int],
    last_named: frozenset[int],
    definitions: Mapping[str, frozenset[int]],
) -> np.ndarray:
    """One row of CLUE_FEATURES per file number in `rows` (best fused first); `paths` are all the
    index's files, `title_named`/`last_named` the files the title names and the last-named ones."""
    title_terms = frozenset(terms(title)) if title else frozenset()
    body = query.split("\n", 1)[1] if title and "\n" in query else ("" if title else query)
    body_terms = frozenset(terms(body))
    out = np.zeros((len(rows), len(CLUE_FEATURES)))
    folders = []
    for r, i in enumerate(rows.tolist()):
        stem, folder, below_top = _path_parts(paths[i])
        folders.append(folder)
        out[r, 0:3] = _stem_facts(stem, title_terms, body_terms)
        out[r, 3] = float(any(p in title_terms for p in below_top))
        out[r, 4] = float(i in title_named)
        out[r, 5] = float(i in last_named)
    if title:
        out[:, 6] = _title_defines(title_words(title), definitions, len(paths), rows)
    out[:, 7] = _folder_share(folders)
    return out


def aggregate_matrix(
    rows: np.ndarray,
    chunk_file: np.ndarray,
    title_per_file: np.ndarray | None,
    chunk_scores: np.ndarray,
    dense_ids: np.ndarray,
) -> np.ndarray:
    """One row of AGGREGATE_FEATURES per file number in `rows`: `title_per_file` is the title's
    summed BM25 per file over the square root of its chunk count (None: one-line question),
    `dense_ids` the nearest chunks' ids."""
    out = np.zeros((len(rows), len(AGGREGATE_FEATURES)))
    n_files = int(chunk_file.max()) + 1 if len(chunk_file) else 0
    if title_per_file is not None and len(rows):
        title = title_per_file[rows]
        top = float(title.max())
        out[:, 0] = title / top if top > 0 else 0.0
    for column, ids in ((1, _best(chunk_scores, _LEXICAL_BEST)), (2, dense_ids)):
        if len(ids) and n_files:
            counts = np.bincount(chunk_file[ids], minlength=n_files)
            out[:, column] = np.log1p(counts[rows]) / math.log1p(len(ids))
    return out


def _best(scores: np.ndarray, k: int) -> np.ndarray:
    positive = np.flatnonzero(scores > 0)
    if len(positive) <= k:
        return positive
    return positive[np.argpartition(-scores[positive], k - 1)[:k]]
