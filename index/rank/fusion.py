"""Reciprocal rank fusion and the exact top k of a score array.

score = Σ weight / (RRF_K + rank) over the rankings an item appears in (rank is 1-based). RRF_K = 60
is the constant of Cormack, Clarke and Büttcher (SIGIR 2009); it damps the head of each list so that
agreement between retrievers beats a single first place. Chunks (index/search/searcher.py), files
(index/rank/evidence.py) and the ranker's rrf features (index/rank/ranker.py) use this one constant.
"""

from __future__ import annotations

import numpy as np

__all__ = ["RRF_K", "rrf", "top_k"]

RRF_K = 60
_SAMPLE_STRIDE = 64  # `top_k`: one score in 64 sets the bar for the candidates


def rrf(rankings: list[list[int]]) -> dict[int, float]:
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, cid in enumerate(ranking, 1):
            fused[cid] = fused.get(cid, 0.0) + 1.0 / (RRF_K + rank)
    return fused


def top_k(scores: np.ndarray, k: int) -> list[int]:
    """The k best chunk ids with a positive score, best first (ties: lower id first).

    Partitioning a million scores costs about 10 ms, so the candidates are first cut to those at
    or above the k-th best of a strided sample: when at least k scores reach that bar, every
    one of the k best does too (ties included), so the answer is the same. Ties at the k-th
    score keep the lower ids, as the ordering promises (a bare argpartition picked any of them)."""
    candidates = np.flatnonzero(scores > 0)
    k = min(k, len(candidates))
    if k <= 0:
        return []
    sample = scores[candidates[:: _SAMPLE_STRIDE]]
    if len(candidates) > 4 * _SAMPLE_STRIDE * k and len(sample) > k:
        bar = np.partition(sample, len(sample) - k)[len(sample) - k]
        above = candidates[scores[candidates] >= bar]
        if len(above) >= k:
            candidates = above
    values = scores[candidates]
    kth = np.partition(values, len(values) - k)[len(values) - k]  # the k-th best score
    better = candidates[values > kth]
    chosen = np.concatenate([better, candidates[values == kth][: k - len(better)]])  # ties: lower ids
    ordered: list[int] = chosen[np.lexsort((chosen, -scores[chosen]))].tolist()
    return ordered
