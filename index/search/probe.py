"""Looking inside hybrid search: the file ranking it computes and the second stage's features.

For the benchmarks that measure and train ranking (bench/swebench.py, bench/train_ranker.py) and
for tests of the ranking; no query path of the product calls these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from index.rank import SIGNALS, chunk_features, glob_mask
from index.search.searcher import Searcher, _evidence, _file_scores, _fused_order
from index.search.votes import NO_VOTES
from index.types import Chunk

__all__ = ["chunk_rows", "file_features", "file_ranking"]


def file_ranking(
    searcher: Searcher, query: str, weights: Mapping[str, float] = SIGNALS, path_glob: str | None = None,
    learned: bool = True,
) -> list[tuple[str, float]]:
    """Every file with some evidence for `query`, best first, as hybrid search ranks them;
    `weights` per signal of index/rank/evidence.py (0 leaves a signal out); `learned=False`: the fused
    order without the second stage."""
    gen, question = searcher._open(query)
    allowed = glob_mask(gen.paths, path_glob)
    scores, near = searcher._retrieve(gen, question, "hybrid", allowed)
    ranker = searcher.ranker if learned else None
    votes = searcher._votes(gen, question, subjects=ranker is not None)
    file_score = _file_scores(gen, _evidence(gen, question, scores, near, allowed, votes), allowed, weights, ranker)
    order = file_score.ordered()
    at = np.searchsorted(file_score.files, order)
    return list(zip([gen.files.paths[f] for f in order.tolist()], file_score.scores[at].tolist()))


def file_features(searcher: Searcher, query: str) -> tuple[list[str], np.ndarray]:
    """The files the second stage re-orders (best fused first) and their feature rows, for
    training it (bench/train_ranker.py)."""
    gen, question = searcher._open(query)
    scores, near = searcher._retrieve(gen, question, "hybrid", None)
    evidence = _evidence(gen, question, scores, near, None, searcher._votes(gen, question))
    _, rows, features = gen.files.candidates(evidence)
    return [gen.files.paths[f] for f in rows.tolist()], features


def chunk_rows(searcher: Searcher, query: str, paths: Sequence[str]) -> dict[str, tuple[list[Chunk], np.ndarray]]:
    """Of each file in `paths` (those the index holds), its chunks in file order and their rows of
    CHUNK_FEATURES, exactly as the chunk stage reads them in a hybrid search (bench/train_chunks.py)."""
    gen, question = searcher._open(query)
    scores, near = searcher._retrieve(gen, question, "hybrid", None)
    evidence = _evidence(gen, question, scores, near, None, NO_VOTES)  # the history is no chunk feature
    fused_first: dict[int, int] = {}
    for cid in _fused_order(scores, near)[3]:
        fused_first.setdefault(int(gen.files.chunk_file[cid]), cid)
    dense = dict(near)
    numbers = {path: f for f, path in enumerate(gen.files.paths)}
    out: dict[str, tuple[list[Chunk], np.ndarray]] = {}
    for path in paths:
        f = numbers.get(path)
        if f is None or not int(gen.files.n_chunks[f]):
            continue
        first = int(gen.files.first_chunk[f])
        rows = gen.chunks(list(range(first, first + int(gen.files.n_chunks[f]))))
        ids = sorted(rows)
        chunks = [rows[i] for i in ids]
        out[path] = chunks, chunk_features(question, ids, chunks, scores, evidence.title_scores, dense, fused_first.get(f))
    return out
