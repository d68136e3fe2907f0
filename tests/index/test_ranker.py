"""The learned second stage (index/rank/ranker.py) and how hybrid search uses it."""

from __future__ import annotations

import numpy as np
import pytest

from index.rank.evidence import FileEvidence, QueryEvidence
from index.rank.question import Question
from index.rank.ranker import FEATURES, RERANK, Ranker, load_ranker


def evidence(paths: list[str]) -> FileEvidence:
    counts = np.ones(len(paths), dtype=np.int64)
    return FileEvidence(paths, np.arange(len(paths), dtype=np.int64), counts, lambda: [])


REPORT = "a title\nand a body"  # the second stage re-orders files for questions of several lines


def only(feature: str) -> Ranker:
    weights = np.zeros(len(FEATURES))
    weights[FEATURES.index(feature)] = 1.0
    return Ranker(weights, "test")


def test_the_shipped_model_loads_and_covers_every_feature() -> None:
    ranker = load_ranker()
    assert ranker is not None and ranker.weights.shape == (len(FEATURES),)
    assert np.all(np.isfinite(ranker.weights)) and "shared/bench" in ranker.trained_on


@pytest.mark.parametrize("feature", ["commit_title", "subject_votes", "subject_voters"])
def test_the_second_stage_can_rank_by_each_history_feature(feature: str) -> None:
    found = QueryEvidence(Question.of(REPORT), np.array([3.0, 2.0, 1.0]), **{feature: np.array([0.0, 1.0, 4.0])})
    learned = evidence(["a.py", "b.py", "c.py"]).rank(found, ranker=only(feature))
    assert max(learned, key=lambda f: learned[f]) == 2


def test_a_model_for_other_features_is_not_used() -> None:
    assert load_ranker("no-such-model.json") is None


def test_the_model_reorders_the_fused_files_and_keeps_their_scores_above_the_rest() -> None:
    files = evidence(["pkg/a.py", "pkg/b.py", "pkg/c.py"])
    chunk_scores = np.array([3.0, 2.0, 1.0])
    fused = files.rank(QueryEvidence(Question.of(REPORT), chunk_scores))
    assert sorted(fused, key=lambda f: -fused[f]) == [0, 1, 2]
    history = np.array([0.0, 0.0, 5.0])  # only c.py was touched by similar past commits
    learned = files.rank(QueryEvidence(Question.of(REPORT), chunk_scores, history=history), ranker=only("history_relative"))
    assert max(learned, key=lambda f: learned[f]) == 2
    assert all(1.0 < score <= 2.0 for score in learned.values())


def test_files_past_the_reranked_ones_keep_the_fused_order_below_them() -> None:
    n = RERANK + 20
    files = evidence([f"pkg/m{i}.py" for i in range(n)])
    chunk_scores = np.linspace(2.0, 1.0, n)
    learned = files.rank(QueryEvidence(Question.of(REPORT), chunk_scores), ranker=only("chunks_inv_rank"))
    order = sorted(learned, key=lambda f: (-learned[f], f))
    assert order[RERANK:] == list(range(RERANK, n))
    assert min(learned[f] for f in order[:RERANK]) > max(learned[f] for f in order[RERANK:])


def test_a_question_of_one_line_keeps_the_fused_order_the_model_was_not_trained_for() -> None:
    files = evidence(["pkg/a.py", "pkg/b.py", "pkg/c.py"])
    chunk_scores = np.array([3.0, 2.0, 1.0])
    history = np.array([0.0, 0.0, 5.0])
    ranker = only("history_relative")
    one_line = files.rank(QueryEvidence(Question.of("where is c"), chunk_scores, history=history), ranker=ranker)
    assert one_line == files.rank(QueryEvidence(Question.of("where is c"), chunk_scores, history=history))
    assert max(one_line, key=lambda f: one_line[f]) == 0
    report = files.rank(QueryEvidence(Question.of("where is c\nit breaks"), chunk_scores, history=history), ranker=ranker)
    assert max(report, key=lambda f: report[f]) == 2


def test_a_64_kb_report_of_one_long_word_is_read_for_clues_without_backtracking() -> None:
    # The path pattern once backtracked cubically on a long run without a dot (4 KB took 50 s).
    from index.rank.question import extract_clues

    clues = extract_clues("a" * 65536 + " see pkg/core.py")
    assert clues.paths == ("pkg/core.py",)
