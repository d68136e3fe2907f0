"""Prefill time as a function of prompt length: measure, fit a + b·n + c·n², check on a held-out size.

Each layer's weights cost the same per token (b·n); attention over the tokens before costs in
proportion to them (c·n²); a is fixed overhead. Used by `bridge compare` to extrapolate the time
of prompts longer than the context the model was loaded with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bridge.errors import PrefillError

__all__ = [
    "DEFAULT_FRACTIONS",
    "Holdout",
    "PrefillError",
    "QuadraticFit",
    "fit_prefill",
    "holdout",
    "measure_points",
    "prefill_sizes",
    "relative_residuals",
]

DEFAULT_FRACTIONS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)  # of n_ctx; ~16k tokens in all at 8192


@dataclass(frozen=True)
class QuadraticFit:
    """ms = a + b·n + c·n², fitted by relative least squares with b, c >= 0."""

    a: float
    b: float
    c: float

    def predict(self, tokens: float) -> float:
        return self.a + self.b * tokens + self.c * tokens * tokens


def fit_prefill(points: Sequence[tuple[int, float]]) -> QuadraticFit:
    """Least squares on relative error, so small sizes count as much as large ones.

    Timing noise can make the unconstrained c (or b) negative, which would predict a shrinking
    time far out; the constrained optimum then lies on a face where that term is zero, so every
    subset of {n, n²} is solved and the best one with non-negative coefficients kept.
    """
    if len({n for n, _ in points}) < 3:
        raise PrefillError(f"a quadratic fit needs at least 3 distinct prompt sizes, got {len(points)}")
    n = np.array([p[0] for p in points], dtype=np.float64)
    y = np.array([p[1] for p in points], dtype=np.float64)
    if np.any(y <= 0):
        raise PrefillError("prefill times must be positive milliseconds")
    columns = {"a": np.ones_like(n), "b": n, "c": n * n}
    best: tuple[float, dict[str, float]] | None = None
    for terms in (("a", "b", "c"), ("a", "b"), ("a", "c"), ("b", "c"), ("b",), ("c",)):
        design = np.stack([columns[t] for t in terms], axis=1) / y[:, None]
        coef, *_ = np.linalg.lstsq(design, np.ones_like(y), rcond=None)
        values = dict(zip(terms, coef.tolist()))
        if values.get("b", 0.0) < 0 or values.get("c", 0.0) < 0:
            continue
        sse = float(np.sum((design @ coef - 1.0) ** 2))
        if best is None or sse < best[0] - 1e-15:
            best = (sse, values)
    assert best is not None  # ("b",) alone is always feasible for positive times and sizes
    return QuadraticFit(best[1].get("a", 0.0), best[1].get("b", 0.0), best[1].get("c", 0.0))


def relative_residuals(fit: QuadraticFit, points: Sequence[tuple[int, float]]) -> list[float]:
    return [(fit.predict(n) - ms) / ms for n, ms in points]


@dataclass(frozen=True)
class Holdout:
    tokens: int
    measured_ms: float
    predicted_ms: float
    error: float  # (predicted - measured) / measured
    fit: QuadraticFit  # fitted without this size


def holdout(points: Sequence[tuple[int, float]]) -> Holdout:
    """Fit without the largest size and predict it: the same kind of step as the extrapolation."""
    ordered = sorted(points)
    if len(ordered) < 4:
        raise PrefillError(f"holding one size out needs at least 4 prefill sizes, got {len(ordered)}")
    (tokens, measured), rest = ordered[-1], ordered[:-1]
    fit = fit_prefill(rest)
    predicted = fit.predict(tokens)
    return Holdout(tokens, measured, predicted, (predicted - measured) / measured, fit)


def prefill_sizes(n_ctx: int, fractions: Sequence[float] = DEFAULT_FRACTIONS) -> list[int]:
    return sorted({max(8, int(n_ctx * f)) for f in fractions if 0 < f <= 1})


def measure_points(
    measure: Callable[[int], float], sizes: Sequence[int], repeats: int = 2,
    on_progress: Callable[[int, float], None] | None = None,
) -> list[tuple[int, float]]:
    """The fastest of `repeats` prefills at each size, after one discarded warm-up run.

    The minimum, not the mean: on a shared machine noise only ever adds time. Each round visits
    every size once, so a burst of load from elsewhere spoils one run of several sizes rather
    than every run of one size.
    """
    if repeats < 1:
        raise PrefillError(f"repeats must be at least 1, got {repeats}")
    measure(min(sizes))
    best: dict[int, float] = {}
    for _ in range(repeats):
        for size in sorted(sizes):
            ms = measure(size)
            best[size] = min(ms, best.get(size, ms))
            if on_progress is not None:
                on_progress(size, ms)
    return sorted(best.items())
