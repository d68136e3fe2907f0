"""`bridge compare`: what one question costs with retrieval, and with the whole repository in context.

Both sides are counted the same way: prompt tokens (system prompt, chat template and question
included) plus the answer reserve give the KV-cache length, and KV bytes follow from the model's
shape (bridge.gguf). Prefill time is measured with the local model at several prompt sizes,
fitted to a + b·n + c·n² (attention is quadratic in n, the rest linear), checked on one
held-out size, and only then extrapolated to the full repository.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bridge.budget import DEFAULT_ANSWER_RESERVE, DEFAULT_SNIPPET_BUDGET, TemplateOverhead, plan_prompt
from bridge.errors import BridgeError
from bridge.gguf import CACHE_TYPES, CacheType, ModelFacts, context_limit, kv_bytes
from bridge.prompt import render_question, snippet_from_hit, system_prompt

__all__ = [
    "DEFAULT_FRACTIONS",
    "DEFAULT_SAMPLE_QUESTIONS",
    "GPU_MEMORY_GIB",
    "CompareError",
    "ContextSide",
    "Holdout",
    "Prefill",
    "QuadraticFit",
    "RepoTokens",
    "RetrievalTurn",
    "context_side",
    "ModelSide",
    "bare_prompt_tokens",
    "compare",
    "count_repository",
    "fit_prefill",
    "gpu_fits",
    "holdout",
    "measure_points",
    "prefill_report",
    "prefill_sizes",
    "relative_residuals",
    "retrieval_turn",
]

GIB = 1 << 30
GPU_MEMORY_GIB = (16, 24, 80)
DEFAULT_FRACTIONS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)  # of n_ctx; ~16k tokens in all at 8192
EXACT_COUNT_BYTES = 16 << 20  # repositories larger than this are counted on a random sample
SAMPLE_BYTES = 4 << 20
DEFAULT_SAMPLE_QUESTIONS = (
    "Where is the command-line entry point and what does it do?",
    "How are errors reported to the user?",
    "How is the configuration loaded and validated?",
)
Count = Callable[[str], int]


class CompareError(BridgeError):
    """The comparison cannot be computed: nothing to count, too few prefill sizes, or a bad size."""


# --- the full-context side -----------------------------------------------------------------


@dataclass(frozen=True)
class RepoTokens:
    """Tokens of every indexed file; `error` is the relative half-width of a 95 % interval when sampled."""

    tokens: int
    files: int
    bytes: int
    method: str  # "exact", or "sampled" (ratio estimate from a random sample of files)
    sampled_files: int
    error: float | None


def _read(root: Path, path: str) -> str | None:
    try:
        return (root / path).read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None  # deleted since indexing: it is no longer part of the repository


def count_repository(
    root: Path, paths: Sequence[str], count: Count, *, exact_limit: int = EXACT_COUNT_BYTES,
    sample_bytes: int = SAMPLE_BYTES, seed: int = 0,
) -> RepoTokens:
    """Count every file, or beyond `exact_limit` bytes, a random sample scaled by bytes."""
    sizes = {}
    for path in paths:
        try:
            sizes[path] = (root / path).stat().st_size
        except OSError:
            continue
    if not sizes:
        raise CompareError(f"no indexed file of {root} is readable: run `bridge index {root}` again")
    total = sum(sizes.values())
    if total <= exact_limit:
        tokens = sum(count(text) for path in sizes if (text := _read(root, path)) is not None)
        return RepoTokens(tokens, len(sizes), total, "exact", len(sizes), None)
    order = sorted(sizes)
    random.Random(seed).shuffle(order)
    pairs: list[tuple[int, int]] = []  # (bytes, tokens) of each sampled file
    taken = 0
    for path in order:
        if taken >= sample_bytes and len(pairs) >= 30:
            break
        text = _read(root, path)
        if text is not None:
            pairs.append((sizes[path], count(text)))
            taken += sizes[path]
    estimate, error = _ratio_estimate(pairs, total, len(sizes))
    return RepoTokens(round(estimate), len(sizes), total, "sampled", len(pairs), error)


def _ratio_estimate(pairs: Sequence[tuple[int, int]], total_bytes: int, population: int) -> tuple[float, float]:
    """Tokens per byte from a sample of files, scaled to all bytes; the error uses the usual
    linearised variance of a ratio estimator with the finite-population correction."""
    b = np.array([p[0] for p in pairs], dtype=np.float64)
    t = np.array([p[1] for p in pairs], dtype=np.float64)
    ratio = t.sum() / b.sum()
    n = len(pairs)
    if n < 2 or ratio == 0:
        return ratio * total_bytes, 1.0
    spread = float(np.sum((t - ratio * b) ** 2) / (n - 1))
    se = math.sqrt((1 - n / population) * spread / n) / b.mean()
    return ratio * total_bytes, 1.96 * se / ratio


@dataclass(frozen=True)
class ContextSide:
    """A prompt of `tokens`; its KV cache holds `kv_tokens` (the answer reserve included)."""

    tokens: int
    kv_tokens: int
    cache_type: str
    kv_bytes: int
    kv_bytes_by_type: dict[str, int]


def context_side(facts: ModelFacts, tokens: int, answer_reserve: int, cache_type: CacheType) -> ContextSide:
    kv_tokens = tokens + answer_reserve
    by_type = {t: kv_bytes(facts, kv_tokens, t) for t in CACHE_TYPES}
    return ContextSide(tokens, kv_tokens, cache_type, by_type[cache_type], by_type)


def gpu_fits(weights_bytes: int, kv: int, sizes_gib: Sequence[int] = GPU_MEMORY_GIB) -> dict[str, bool]:
    """Whether weights plus KV cache fit each memory size (compute buffers are not counted)."""
    return {f"{size}GiB": weights_bytes + kv <= size * GIB for size in sizes_gib}


# --- the retrieval side ----------------------------------------------------------------------


@dataclass(frozen=True)
class RetrievalTurn:
    question: str
    tokens: int  # the whole planned prompt: system, template, snippets, question
    snippet_tokens: int
    snippets: int
    notice: str | None


def retrieval_turn(
    search: Callable[[str], Sequence[object]], question: str, *, count: Count, n_ctx: int,
    kv_bytes_per_token: int, overhead: TemplateOverhead = TemplateOverhead(),
    answer_reserve: int = DEFAULT_ANSWER_RESERVE, snippet_budget: int = DEFAULT_SNIPPET_BUDGET,
) -> RetrievalTurn:
    """Plan one turn exactly as the chat loop does: search, render snippets, pack under the budget."""
    plan = plan_prompt(
        n_ctx=n_ctx, answer_reserve=answer_reserve, kv_bytes_per_token=kv_bytes_per_token,
        system=system_prompt(), question=render_question(question), count=count,
        snippets=[snippet_from_hit(hit) for hit in search(question)],  # type: ignore[arg-type]
        snippet_budget=snippet_budget, overhead=overhead,
    )
    return RetrievalTurn(question, plan.prompt_tokens, plan.sections.snippets, len(plan.snippets), plan.notice)


# --- prefill time ----------------------------------------------------------------------------


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
        raise CompareError(f"a quadratic fit needs at least 3 distinct prompt sizes, got {len(points)}")
    n = np.array([p[0] for p in points], dtype=np.float64)
    y = np.array([p[1] for p in points], dtype=np.float64)
    if np.any(y <= 0):
        raise CompareError("prefill times must be positive milliseconds")
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
        raise CompareError(f"holding one size out needs at least 4 prefill sizes, got {len(ordered)}")
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

    The minimum, not the mean: on a shared machine noise only ever adds time.
    """
    if repeats < 1:
        raise CompareError(f"repeats must be at least 1, got {repeats}")
    measure(min(sizes))
    points = []
    for size in sorted(sizes):
        ms = min(measure(size) for _ in range(repeats))
        points.append((size, ms))
        if on_progress is not None:
            on_progress(size, ms)
    return points


@dataclass(frozen=True)
class Prefill:
    measured: tuple[tuple[int, float], ...]
    fit: QuadraticFit
    residuals: tuple[float, ...]  # relative, at each measured size
    holdout: Holdout
    full_context_predicted_ms: float
    extrapolated: bool  # the full-context size lies beyond the largest measured size
    retrieval_ms: float
    retrieval_predicted_ms: float
    ratio: float  # full_context_predicted_ms / retrieval_ms


def prefill_report(points: Sequence[tuple[int, float]], full_tokens: int, retrieval_tokens: int,
                   retrieval_ms: float) -> Prefill:
    fit = fit_prefill(points)
    full = fit.predict(full_tokens)
    return Prefill(
        measured=tuple(sorted(points)),
        fit=fit,
        residuals=tuple(relative_residuals(fit, sorted(points))),
        holdout=holdout(points),
        full_context_predicted_ms=full,
        extrapolated=full_tokens > max(n for n, _ in points),
        retrieval_ms=retrieval_ms,
        retrieval_predicted_ms=fit.predict(retrieval_tokens),
        ratio=full / retrieval_ms,
    )


def bare_prompt_tokens(question: str, count: Count, overhead: TemplateOverhead, n_ctx: int,
                       kv_bytes_per_token: int, answer_reserve: int) -> int:
    """System prompt, chat template and question: what surrounds the repository in a full-context prompt."""
    plan = plan_prompt(
        n_ctx=n_ctx, answer_reserve=answer_reserve, kv_bytes_per_token=kv_bytes_per_token,
        system=system_prompt(), question=render_question(question), count=count, overhead=overhead,
    )
    return plan.prompt_tokens


# --- the whole comparison --------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSide:
    """What the comparison needs from a model; `measure` is None for a preset (no weights here)."""

    facts: ModelFacts
    label: str
    n_ctx: int
    cache_type: CacheType
    count: Count
    exact_tokens: bool
    overhead: TemplateOverhead
    measure: Callable[[int], float] | None


Progress = Callable[[str], None]


def compare(
    model: ModelSide, root: Path, paths: Sequence[str], search: Callable[[str], Sequence[object]],
    questions: Sequence[str], *, sizes: Sequence[int] | None = None, repeats: int = 2,
    answer_reserve: int = DEFAULT_ANSWER_RESERVE, snippet_budget: int = DEFAULT_SNIPPET_BUDGET,
    kv_budget_bytes: int | None = None, on_progress: Progress | None = None,
) -> dict[str, object]:
    """The `bridge compare --json` document."""
    say = on_progress or (lambda _message: None)
    facts, n_ctx = model.facts, model.n_ctx
    per_token = kv_bytes(facts, 1, model.cache_type)
    if not questions:
        raise CompareError("no question to plan a retrieval turn for: pass --question")
    say(f"counting the tokens of {len(paths)} files")
    repo = count_repository(root, paths, model.count)
    turns = [
        retrieval_turn(search, q, count=model.count, n_ctx=n_ctx, kv_bytes_per_token=per_token,
                       overhead=model.overhead, answer_reserve=answer_reserve, snippet_budget=snippet_budget)
        for q in questions
    ]
    turn = sorted(turns, key=lambda t: t.tokens)[len(turns) // 2]  # the median prompt
    bare = bare_prompt_tokens(turn.question, model.count, model.overhead, n_ctx, per_token, answer_reserve)
    full = context_side(facts, repo.tokens + bare, answer_reserve, model.cache_type)
    retrieval = context_side(facts, turn.tokens, answer_reserve, model.cache_type)
    prefill = None
    if model.measure is not None:
        chosen = sorted(sizes) if sizes else prefill_sizes(n_ctx)
        if chosen[-1] > n_ctx or chosen[0] < 1:
            raise CompareError(f"prefill sizes {chosen} must lie in 1..n_ctx {n_ctx}: pick smaller --sizes")
        say(f"measuring prefill at {len(chosen)} sizes up to {chosen[-1]} tokens, {repeats} run(s) each")
        points = measure_points(model.measure, chosen, repeats, lambda n, ms: say(f"  {n:>7} tokens: {ms:,.0f} ms"))
        retrieval_ms = min(model.measure(turn.tokens) for _ in range(repeats))
        prefill = prefill_report(points, full.tokens, turn.tokens, retrieval_ms)
    return _document(model, repo, full, (retrieval, turn), turns, prefill, kv_budget_bytes)


def _side_json(side: ContextSide) -> dict[str, object]:
    return {"tokens": side.tokens, "kv_tokens": side.kv_tokens, "cache_type": side.cache_type,
            "kv_bytes": side.kv_bytes, "kv_bytes_by_type": side.kv_bytes_by_type}


def _memory(facts: ModelFacts, side: ContextSide) -> dict[str, dict[str, dict[str, bool]]]:
    formats = dict(facts.weights_by_format) or {facts.quantization or "file": facts.weights_bytes}
    return {fmt: {t: gpu_fits(weights, side.kv_bytes_by_type[t]) for t in CACHE_TYPES} for fmt, weights in formats.items()}


def _fit_json(fit: QuadraticFit) -> dict[str, float]:
    return {"a": fit.a, "b": fit.b, "c": fit.c}


def _prefill_json(prefill: Prefill | None, full_tokens: int, n_ctx: int) -> dict[str, object]:
    if prefill is None:
        return {"measured": [], "fit": None, "residuals": [], "holdout": None, "full_context_predicted_ms": None,
                "extrapolated": None, "beyond_n_ctx": full_tokens > n_ctx, "retrieval_ms": None,
                "retrieval_predicted_ms": None, "ratio": None,
                "note": "prefill time needs a real model: pass --model FILE.gguf"}
    h = prefill.holdout
    return {
        "measured": [{"tokens": n, "ms": round(ms, 3)} for n, ms in prefill.measured],
        "fit": _fit_json(prefill.fit),
        "residuals": [round(r, 4) for r in prefill.residuals],
        "holdout": {"tokens": h.tokens, "measured_ms": round(h.measured_ms, 3), "predicted_ms": round(h.predicted_ms, 3),
                    "error": round(h.error, 4), "fit": _fit_json(h.fit)},
        "full_context_predicted_ms": round(prefill.full_context_predicted_ms, 1),
        "extrapolated": prefill.extrapolated,
        "beyond_n_ctx": full_tokens > n_ctx,
        "retrieval_ms": round(prefill.retrieval_ms, 3),
        "retrieval_predicted_ms": round(prefill.retrieval_predicted_ms, 3),
        "ratio": round(prefill.ratio, 2),
        "note": ("full-context time is an extrapolation of the fit beyond the largest measured size"
                 if prefill.extrapolated else None),
    }


def _document(model: ModelSide, repo: RepoTokens, full: ContextSide, median: tuple[ContextSide, RetrievalTurn],
              turns: Sequence[RetrievalTurn], prefill: Prefill | None, kv_budget: int | None) -> dict[str, object]:
    f = model.facts
    retrieval, turn = median
    return {
        "model": {
            "name": f.name, "label": model.label, "preset": model.measure is None, "architecture": f.architecture,
            "layers": f.layers, "kv_heads": f.kv_heads, "head_dim": f.head_dim, "trained_context": f.trained_context,
            "context_limit": context_limit(f), "n_ctx": model.n_ctx, "cache_type": model.cache_type,
            "kv_bytes_per_token_by_type": {t: kv_bytes(f, 1, t) for t in CACHE_TYPES},
            "weights_bytes": f.weights_bytes, "weights_by_format": dict(f.weights_by_format),
            "tokenizer": "model" if model.exact_tokens else "estimate",
        },
        "repository": {"files": repo.files, "bytes": repo.bytes, "tokens": repo.tokens, "method": repo.method,
                       "sampled_files": repo.sampled_files, "error": None if repo.error is None else round(repo.error, 4)},
        "full_context": {
            **_side_json(full), "repository_tokens": repo.tokens,
            "fits_trained_context": full.kv_tokens <= f.trained_context,
            "fits_n_ctx": full.kv_tokens <= model.n_ctx,
            "fits_kv_budget": None if kv_budget is None else full.kv_bytes <= kv_budget,
            "fits_gpu": _memory(f, full),
        },
        "retrieval": {
            **_side_json(retrieval), "snippet_tokens": turn.snippet_tokens,
            "fits_kv_budget": None if kv_budget is None else retrieval.kv_bytes <= kv_budget,
            "fits_gpu": _memory(f, retrieval),
            "questions": [{"question": t.question, "tokens": t.tokens, "snippet_tokens": t.snippet_tokens,
                           "snippets": t.snippets} for t in turns],
        },
        "prefill": _prefill_json(prefill, full.tokens, model.n_ctx),
        "kv_budget_bytes": kv_budget,
        "gpu_memory_gib": list(GPU_MEMORY_GIB),
    }
