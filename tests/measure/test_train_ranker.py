"""bench/train_ranker.py's report: in-sample and held-out figures, each with its interval."""

from __future__ import annotations

import numpy as np
import pytest

from bench.train_ranker import Sample, fit, markdown, report
from index.rank.ranker import FEATURES


def samples(signal: float) -> list[Sample]:
    """Questions of three repositories; one feature tells the gold file with strength `signal`."""
    rng = np.random.default_rng(1)
    out = []
    for i in range(30):
        features = rng.normal(size=(8, len(FEATURES)))
        gold = np.zeros(8, dtype=bool)
        gold[i % 8] = True
        features[:, 0] += signal * gold
        out.append(Sample(f"q{i}", f"repo{i % 3}", features, gold, 500))
    return out


def test_a_feature_that_always_tells_the_gold_file_leaves_no_gap_to_the_held_out_figure() -> None:
    result, _ = report(samples(signal=50.0), l2=1.0)
    assert result["overall"]["in_sample"]["recall_at_1"] == 1.0
    assert result["intervals"]["in-sample"]["recall_at_1"] == [1.0, 1.0, 1.0]
    assert result["intervals"]["LOO"]["recall_at_1"] == [1.0, 1.0, 1.0]
    assert result["differences"]["LOO - in-sample"]["recall_at_1"] == [0.0, 0.0, 0.0]
    assert "| LOO − in-sample | +0.000 [+0.000, +0.000]" in markdown(result)


def test_the_intervals_hold_the_reported_figures() -> None:
    result, _ = report(samples(signal=1.5), l2=1.0)
    for name, column in (("in-sample", "in_sample"), ("LOO", "loo")):
        value, low, high = result["intervals"][name]["recall_at_5"]
        assert value == pytest.approx(result["overall"][column]["recall_at_5"], abs=1e-4)
        assert low <= value <= high
    gap = result["differences"]["LOO - in-sample"]["mrr"]
    assert gap[0] == pytest.approx(result["overall"]["loo"]["mrr"] - result["overall"]["in_sample"]["mrr"], abs=2e-4)
    assert gap[1] <= gap[0] <= gap[2]


def test_each_repository_gets_the_weights_fitted_without_it_for_the_edit_site_bench() -> None:
    data = samples(signal=1.5)
    result, _ = report(data, l2=1.0)
    held = result["held_out_weights"]
    assert sorted(held) == ["repo0", "repo1", "repo2"] and sorted(held["repo0"]) == sorted(FEATURES)
    alone = fit([s for s in data if s.repo != "repo0"], 1.0)
    assert [held["repo0"][f] for f in FEATURES] == pytest.approx(alone.tolist())
