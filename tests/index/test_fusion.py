"""Reciprocal-rank fusion, merging of neighbouring hits, and packing hits into a token budget."""

from __future__ import annotations

import numpy as np
import pytest

from index.rank.fusion import RRF_K, rrf, top_k
from index.search.hits import merge_hits, pack_hits
from index.types import Hit


def _hit(path: str, start: int, end: int, score: float = 1.0, lexical: int | None = 1, vector: int | None = None) -> Hit:
    text = "\n".join(f"line {i}" for i in range(start, end + 1))
    return Hit(path, start, end, score, lexical, vector, None, "python", text, 2 * (end - start + 1))


def test_a_chunk_found_by_both_retrievers_outranks_one_found_first_by_only_one() -> None:
    fused = rrf([[1, 2, 3], [2, 4, 5]])
    assert max(fused, key=fused.get) == 2
    assert fused[2] == 1 / (RRF_K + 2) + 1 / (RRF_K + 1)


def test_fusion_of_a_single_ranking_keeps_its_order() -> None:
    fused = rrf([[7, 3, 9]])
    assert sorted(fused, key=lambda c: -fused[c]) == [7, 3, 9]


def test_overlapping_hits_of_one_file_merge_into_the_better_one() -> None:
    merged = merge_hits([_hit("a.py", 10, 20, 0.9, 1, None), _hit("a.py", 18, 30, 0.5, None, 2)])
    assert len(merged) == 1
    m = merged[0]
    assert (m.start_line, m.end_line, m.score, m.lexical_rank, m.vector_rank) == (10, 30, 0.9, 1, 2)
    assert m.text.split("\n") == [f"line {i}" for i in range(10, 31)]


def test_adjacent_hits_merge_but_distant_ones_and_other_files_do_not() -> None:
    merged = merge_hits([_hit("a.py", 1, 5), _hit("a.py", 6, 9), _hit("a.py", 20, 25), _hit("b.py", 1, 5)])
    assert [(h.path, h.start_line, h.end_line) for h in merged] == [("a.py", 1, 9), ("a.py", 20, 25), ("b.py", 1, 5)]


def test_packing_keeps_whole_hits_in_rank_order_while_they_fit() -> None:
    hits = [_hit("a.py", 1, 5), _hit("b.py", 1, 5), _hit("c.py", 1, 5)]  # 10 tokens each
    packed, truncated = pack_hits(hits, 20, count=lambda t: 2 * len(t.split("\n")))
    assert [h.path for h in packed] == ["a.py", "b.py"] and truncated


def test_the_first_hit_that_does_not_fit_is_cut_at_a_line_boundary() -> None:
    hits = [_hit("a.py", 1, 5), _hit("b.py", 11, 20)]
    packed, truncated = pack_hits(hits, 16, count=lambda t: 2 * len(t.split("\n")))
    assert truncated
    assert (packed[1].start_line, packed[1].end_line) == (11, 13)
    assert packed[1].text == "line 11\nline 12\nline 13"
    assert sum(h.tokens for h in packed) <= 16


def test_a_hit_cut_around_the_line_the_question_points_at_keeps_as_many_lines_before_it_as_after() -> None:
    hits = [_hit("a.py", 1, 5), _hit("b.py", 11, 20)]
    count = lambda t: 2 * len(t.split("\n"))
    packed, _ = pack_hits(hits, 16, count=count, focus={"b.py": 16})
    assert (packed[1].start_line, packed[1].end_line) == (15, 17)
    assert packed[1].text == "line 15\nline 16\nline 17"
    at_the_end, _ = pack_hits(hits, 16, count=count, focus={"b.py": 20})
    assert (at_the_end[1].start_line, at_the_end[1].end_line) == (18, 20)
    elsewhere, _ = pack_hits(hits, 16, count=count, focus={"b.py": 40, "c.py": 12})
    assert (elsewhere[1].start_line, elsewhere[1].end_line) == (11, 13)  # not in the hit: its first lines


def test_no_budget_means_no_cut() -> None:
    hits = [_hit("a.py", 1, 50)]
    assert pack_hits(hits, None) == (hits, False)


@pytest.mark.parametrize("seed", range(6))
def test_the_k_best_chunks_are_those_of_a_full_sort_ties_to_the_lower_id(seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = np.round(rng.random(300_000) * (5 if seed % 2 else 5000)).astype(np.float32)  # many ties
    scores[rng.random(len(scores)) < 0.5] = 0
    positive = np.flatnonzero(scores > 0)
    for k in (1, 10, 100):
        assert top_k(scores, k) == positive[np.lexsort((positive, -scores[positive]))][:k].tolist()
    assert top_k(np.zeros(10, dtype=np.float32), 5) == []
