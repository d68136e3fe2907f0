from __future__ import annotations

import math

import pytest

from bridge.measure.evaluate import Question, QuestionResult, aggregate
from bridge.measure.intervals import bootstrap_means, difference, intervals, versus


def result(number: int, ranked: tuple[str, ...]) -> QuestionResult:
    return QuestionResult(Question(f"q{number}", "where?", ("gold.py",)), ranked, (), 1.0)


def results(first: int, second: int, missed: int) -> list[QuestionResult]:
    """Questions whose gold file is ranked first, second, or not at all, in that order."""
    ranks = [("gold.py", "x.py")] * first + [("x.py", "gold.py")] * second + [("x.py", "y.py")] * missed
    return [result(i, ranked) for i, ranked in enumerate(ranks)]


def test_an_interval_holds_the_figure_aggregate_reports() -> None:
    found = results(first=60, second=20, missed=20)
    metrics = aggregate("m", found)
    got = intervals(found)
    assert got["recall_at_1"].value == pytest.approx(metrics.recall_at_1)
    assert got["recall_at_5"].value == pytest.approx(metrics.recall_at_5)
    assert got["mrr"].value == pytest.approx(metrics.mrr)
    for interval in got.values():
        assert interval.low < interval.value < interval.high


def test_a_recall_of_half_over_400_questions_is_about_five_points_either_way() -> None:
    # the normal approximation: 1.96 * sqrt(0.5 * 0.5 / 400) = 0.049
    got = bootstrap_means({"recall": [1.0, 0.0] * 200})["recall"]
    assert got.value == 0.5
    assert got.high - got.value == pytest.approx(0.049, abs=0.006)
    assert got.value - got.low == pytest.approx(0.049, abs=0.006)


def test_more_questions_give_a_narrower_interval() -> None:
    small = bootstrap_means({"recall": [1.0, 0.0] * 20})["recall"]
    large = bootstrap_means({"recall": [1.0, 0.0] * 500})["recall"]
    assert large.high - large.low < (small.high - small.low) / 3


def test_the_same_results_give_the_same_interval_every_time() -> None:
    found = results(first=7, second=5, missed=9)
    assert intervals(found) == intervals(found)


def test_two_modes_that_agree_everywhere_differ_by_exactly_zero() -> None:
    found = results(first=30, second=10, missed=10)
    for interval in difference(found, found).values():
        assert (interval.value, interval.low, interval.high) == (0.0, 0.0, 0.0)


def test_a_paired_difference_is_narrower_than_the_figures_it_compares() -> None:
    # b finds the gold file first on five more questions than a; the other 95 agree
    a = results(first=50, second=0, missed=50)
    b = results(first=55, second=0, missed=45)
    gap = difference(b, a)["recall_at_1"]
    own = intervals(a)["recall_at_1"]
    assert gap.value == pytest.approx(0.05)
    assert gap.low >= 0.0  # b never loses a question a wins
    assert gap.high - gap.low < (own.high - own.low) / 2


def test_a_difference_over_other_questions_is_refused() -> None:
    with pytest.raises(ValueError, match="same questions"):
        difference(results(2, 0, 0), results(1, 0, 0))


def test_columns_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="same number of questions"):
        bootstrap_means({"a": [1.0, 0.0], "b": [1.0]})


def test_no_questions_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        bootstrap_means({"a": []})


def test_an_interval_prints_as_the_figure_and_its_bounds() -> None:
    got = bootstrap_means({"a": [1.0, 0.0, 1.0, 1.0]})["a"]
    assert str(got).startswith("0.750 [")
    assert got.signed().startswith("+0.750 [+")
    assert all(math.isfinite(x) for x in got.as_list())


def test_modes_are_set_against_hybrid_and_without_hybrid_against_nothing() -> None:
    found = {"hybrid": results(3, 0, 1), "lexical": results(1, 2, 1), "vector": results(0, 0, 4)}
    per_mode, gains = versus(found)
    assert list(per_mode) == ["hybrid", "lexical", "vector"]
    assert list(gains) == ["hybrid - lexical", "hybrid - vector"]
    assert gains["hybrid - lexical"]["recall_at_1"][0] == 0.5
    assert versus({"lexical": found["lexical"]})[1] == {}
