"""The learned second stage: a linear model over per-file features re-orders the best files.

The hand-set fusion of index/rank/evidence.py (every signal weight 1, tests and docs halved) is the first
stage; its RERANK best files are then scored by w·x over FEATURES (each signal's rank and relative
score, the fused score, auxiliary and named flags, history votes, path facts, and index/rank/clues.py's
facts about the file's name and definitions against the title and its share of the best chunks,
how well its commit text, index/history/commit_text.py, matches the question, and the votes of the past
commits whose subjects mean what the title means, index/history/subjects.py) and re-ordered.
Files past RERANK keep their fused order below the re-ordered ones. A question of one line keeps
the fused order (index/rank.FileEvidence.rank): every training question is a report of several lines.

The weights are trained offline on shared/bench by `python -m bench.train_ranker` (a softmax over
each question's candidate files, so the gold file is pushed to the top; leave-one-repository-out
figures in bench/RESULTS.md) and shipped as index/rank/ranker.json. A missing or damaged file means
no second stage: search falls back to the fused order.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

import numpy as np

from index.rank.clues import AGGREGATE_FEATURES, CLUE_FEATURES
from index.rank.fusion import RRF_K

__all__ = [
    "COMMIT_TEXT_FEATURES", "FEATURES", "PATH_FACTS", "RERANK", "SIGNAL_NAMES", "SUBJECT_FEATURES", "Ranker",
    "feature_matrix", "load_ranker", "relative_columns", "subject_columns",
]

RERANK = 300  # best files of the fused order that the model re-orders
# How well a candidate's commit text (index/history/commit_text.py) matches the question and its title,
# each relative to the best candidate's (0 without history).
COMMIT_TEXT_FEATURES = ("commit_text", "commit_title")
# The summed cosine of the past commits whose subjects are nearest the title and touched the file,
# relative to the best candidate's, and log(1 + how many they are) (0 without subject vectors).
SUBJECT_FEATURES = ("subject_votes", "subject_voters")
SIGNAL_NAMES = ("chunks", "files", "title", "mentions", "definitions", "dense", "history")
PATH_FACTS = ("auxiliary", "test", "doc", "not_code", "init", "depth", "log_chunks")
FEATURES = (
    *(f"{s}_{kind}" for s in SIGNAL_NAMES for kind in ("inv_rank", "rrf", "relative")),
    "fused_relative", "fused_inv_rank", "named", "demoted", "history_voters", "bias",
    *PATH_FACTS,
    *CLUE_FEATURES,
    *AGGREGATE_FEATURES,
    *COMMIT_TEXT_FEATURES,
    *SUBJECT_FEATURES,
)


@dataclass(frozen=True)
class Ranker:
    """w·x over FEATURES; `trained_on` says what the weights were fitted to."""

    weights: np.ndarray
    trained_on: str

    def scores(self, features: np.ndarray) -> np.ndarray:
        return np.asarray(features @ self.weights, dtype=np.float64)


def load_ranker(name: str = "ranker.json") -> Ranker | None:
    """The shipped model, or None when it is missing, damaged or made for other features."""
    try:
        data = json.loads(resources.files("index.rank").joinpath(name).read_text(encoding="utf-8"))
        if tuple(data["features"]) != FEATURES:
            return None
        weights = np.asarray([float(data["weights"][f]) for f in FEATURES], dtype=np.float64)
        return Ranker(weights, str(data.get("trained_on", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _rank_features(order: Sequence[int] | np.ndarray, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """inv_rank, rrf and relative score of each file in `rows` for one signal (0 where absent)."""
    position = np.zeros(len(values))
    position[np.asarray(order, dtype=np.int64)] = np.arange(1, len(order) + 1)
    rank = position[rows]
    present = rank > 0
    out = np.zeros((len(rows), 3))
    out[present, 0] = 1.0 / rank[present]
    out[present, 1] = RRF_K / (RRF_K + rank[present])
    top = float(values[order[0]]) if len(order) else 0.0
    if top > 0:
        out[present, 2] = np.clip(values[rows][present] / top, 0.0, 1.0)
    return out


def feature_matrix(
    rows: np.ndarray,
    orders: Mapping[str, Sequence[int] | np.ndarray],
    values: Mapping[str, np.ndarray],
    fused: np.ndarray,
    named: np.ndarray,
    demoted: np.ndarray,
    voters: np.ndarray,
    path_facts: np.ndarray,
) -> np.ndarray:
    """One row of FEATURES per file number in `rows` (the candidates, best fused first)."""
    parts = [_rank_features(orders.get(s, ()), values.get(s, np.zeros(len(fused))), rows) for s in SIGNAL_NAMES]
    top = float(fused[rows[0]]) if len(rows) and fused[rows[0]] > 0 else 1.0
    extra = np.column_stack([
        fused[rows] / top,
        1.0 / np.arange(1, len(rows) + 1),
        named[rows].astype(np.float64),
        demoted[rows].astype(np.float64),
        np.log1p(voters[rows]),
        np.ones(len(rows)),
    ])
    return np.hstack([*parts, extra, path_facts[rows]])


def relative_columns(rows: np.ndarray, *per_file: np.ndarray | None) -> np.ndarray:
    """One column per array of values per file: the values of `rows` over their largest (0 where
    the array is None or no row has a positive value)."""
    out = np.zeros((len(rows), len(per_file)))
    for column, values in enumerate(per_file):
        if values is not None and len(rows):
            picked = values[rows]
            top = float(picked.max())
            if top > 0:
                out[:, column] = picked / top
    return out


def subject_columns(rows: np.ndarray, votes: np.ndarray | None, voters: np.ndarray | None) -> np.ndarray:
    """SUBJECT_FEATURES of the candidate files `rows`."""
    out = relative_columns(rows, votes, None)
    if voters is not None and len(rows):
        out[:, 1] = np.log1p(voters[rows])
    return out


def path_fact_row(path: str, auxiliary: bool, test: bool, doc: bool, not_code: bool, n_chunks: int) -> list[float]:
    name = path.rsplit("/", 1)[-1]
    return [float(auxiliary), float(test), float(doc), float(not_code), float(name == "__init__.py"),
            min(path.count("/"), 8) / 8.0, math.log1p(n_chunks) / 5.0]
