"""How sure a retrieval figure is: 95 % percentile-bootstrap intervals over the questions.

One question moves a recall over 140 questions by 0.007, and a benchmark of that size cannot tell
apart two systems a question or two apart. These intervals say how far a figure could move on
another sample of reports of the same kind (the questions resampled with replacement).

A difference between two modes, or between a model's in-sample and held-out ranks, is resampled
*paired*: each draw takes the same questions for both, so the questions both get right or both
miss cancel and the difference's interval is much narrower than either figure's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bridge.measure.evaluate import QuestionResult, recall_at, reciprocal_rank

__all__ = [
    "LEVEL", "METRICS", "RESAMPLES", "Interval", "bootstrap_means", "difference", "intervals", "listed",
    "markdown_rows", "metric_values", "versus",
]

RESAMPLES = 10_000  # 20 seeds at 140 questions: the ends moved by at most one question (1/140)
LEVEL = 0.95
SEED = 0  # fixed: the same results give the same interval in every run
METRICS = ("recall_at_1", "recall_at_5", "mrr")
# Question draws held at once (16 MB): all 10,000 resamples of a 10,000-question file would be 800 MB.
DRAWS_AT_ONCE = 2_000_000


@dataclass(frozen=True)
class Interval:
    """A mean over questions and the bounds of its bootstrap interval."""

    value: float
    low: float
    high: float

    def as_list(self) -> list[float]:
        return [round(self.value, 6), round(self.low, 6), round(self.high, 6)]

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"

    def signed(self) -> str:
        """The interval of a difference: every number with its sign."""
        return f"{self.value:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


def bootstrap_means(columns: Mapping[str, Sequence[float] | np.ndarray], *, resamples: int = RESAMPLES,
                    level: float = LEVEL, seed: int = SEED) -> dict[str, Interval]:
    """The mean of each column and its interval; every column is resampled at the same questions."""
    arrays = {name: np.asarray(values, dtype=np.float64) for name, values in columns.items()}
    sizes = {len(values) for values in arrays.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise ValueError(f"columns need the same number of questions, at least one (got {sorted(sizes)})")
    if not 0 < level < 1:
        raise ValueError(f"level must lie between 0 and 1 (got {level})")
    n = sizes.pop()
    rng = np.random.default_rng(seed)
    means = {name: np.empty(resamples) for name in arrays}
    step = max(1, DRAWS_AT_ONCE // n)
    for start in range(0, resamples, step):
        draws = rng.integers(0, n, size=(min(step, resamples - start), n))
        for name, values in arrays.items():
            means[name][start:start + len(draws)] = values[draws].mean(axis=1)
    tail = (1 - level) / 2
    out = {}
    for name, values in arrays.items():
        low, high = np.quantile(means[name], [tail, 1 - tail])
        out[name] = Interval(float(values.mean()), float(low), float(high))
    return out


def metric_values(results: Sequence[QuestionResult]) -> dict[str, list[float]]:
    """Per question, the recall@1, recall@5 and reciprocal rank that `aggregate` averages."""
    return {
        "recall_at_1": [recall_at(r.ranked_files, r.question.gold_files, 1) for r in results],
        "recall_at_5": [recall_at(r.ranked_files, r.question.gold_files, 5) for r in results],
        "mrr": [reciprocal_rank(r.ranked_files, r.question.gold_files) for r in results],
    }


def intervals(results: Sequence[QuestionResult]) -> dict[str, Interval]:
    """Recall@1, recall@5 and MRR of one mode, each with its interval."""
    return bootstrap_means(metric_values(results))


def difference(a: Sequence[QuestionResult], b: Sequence[QuestionResult]) -> dict[str, Interval]:
    """a − b for recall@1, recall@5 and MRR, resampled paired over the questions both answered."""
    if [r.question_id for r in a] != [r.question_id for r in b]:
        raise ValueError("a paired difference needs the same questions in the same order")
    values_a, values_b = metric_values(a), metric_values(b)
    return bootstrap_means({name: np.subtract(values_a[name], values_b[name]) for name in values_a})


def versus(results: Mapping[str, Sequence[QuestionResult]], base: str = "hybrid"
           ) -> tuple[dict[str, dict[str, list[float]]], dict[str, dict[str, list[float]]]]:
    """`listed` intervals of every mode, and of `base` − each other mode (keys "base - mode"; none
    without `base`), for a report's JSON and `markdown_rows`."""
    per_mode = {mode: listed(intervals(found)) for mode, found in results.items()}
    gains = {f"{base} - {mode}": listed(difference(results[base], found))
             for mode, found in results.items() if mode != base and base in results}
    return per_mode, gains


def listed(found: Mapping[str, Interval]) -> dict[str, list[float]]:
    """For a JSON report: each metric as [value, low, high]."""
    return {name: interval.as_list() for name, interval in found.items()}


def markdown_rows(per_mode: Mapping[str, Mapping[str, Sequence[float]]],
                  differences: Mapping[str, Mapping[str, Sequence[float]]]) -> list[str]:
    """A table of `listed` intervals: one row a mode, then one a paired difference ("a - b")."""
    lines = ["| mode | R@1 | R@5 | MRR |", "|---|---:|---:|---:|"]
    for mode, found in per_mode.items():
        lines.append(f"| {mode} | " + " | ".join(str(Interval(*found[m])) for m in METRICS) + " |")
    for pair, found in differences.items():
        lines.append(f"| {pair.replace(' - ', ' − ')} | " + " | ".join(Interval(*found[m]).signed() for m in METRICS) + " |")
    return lines
