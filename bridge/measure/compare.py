"""`bridge compare`: what one question costs with retrieval, and with the whole repository in context.

Both sides are counted the same way: prompt tokens (system prompt, chat template and question
included) plus the answer reserve give the KV-cache length, and KV bytes follow from the model's
shape (bridge.llm.gguf). Prefill time is measured with the local model at several prompt sizes,
fitted to a + b·n + c·n² (bridge.llm.prefill), checked on one held-out size, and only then
extrapolated to the full repository.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bridge.chat.budget import DEFAULT_ANSWER_RESERVE, DEFAULT_SNIPPET_BUDGET, plan_prompt
from bridge.chat.prompt import render_question, snippet_from_hit, system_prompt
from bridge.errors import CompareError
from bridge.llm.gguf import CACHE_TYPES, CacheType, ModelFacts, context_limit, kv_bytes
from bridge.llm.prefill import (
    Holdout,
    QuadraticFit,
    fit_prefill,
    holdout,
    measure_points,
    prefill_sizes,
    relative_residuals,
)
from bridge.llm.runtime import TemplateOverhead

__all__ = [
    "DEFAULT_SAMPLE_QUESTIONS",
    "GPU_MEMORY_GIB",
    "CompareError",
    "ContextSide",
    "Prefill",
    "RepoTokens",
    "RetrievalTurn",
    "context_side",
    "ModelSide",
    "bare_prompt_tokens",
    "compare",
    "count_repository",
    "gpu_fits",
    "prefill_report",
    "retrieval_turn",
]

GIB = 1 << 30
GPU_MEMORY_GIB = (16, 24, 80)
EXACT_COUNT_BYTES = 16 << 20  # larger repositories are estimated from a sample (llama's tokenizer: ~2 MB/s here)
SAMPLE_BYTES = 4 << 20
WINDOW_BYTES = 4096
MIN_WINDOWS = 100
DEFAULT_SAMPLE_QUESTIONS = (
    "Where is the command-line entry point and what does it do?",
    "How are errors reported to the user?",
    "How is the configuration loaded and validated?",
)
Count = Callable[[str], int]


# --- the full-context side -----------------------------------------------------------------


@dataclass(frozen=True)
class RepoTokens:
    """Tokens of every indexed file; `error` is the relative half-width of a 95 % interval when sampled."""

    tokens: int
    files: int
    bytes: int
    method: str  # "exact", or "sampled" (tokens per byte of random windows, times all bytes)
    samples: int  # files counted, or windows when sampled
    error: float | None


def _read(root: Path, path: str) -> bytes | None:
    try:
        return (root / path).read_bytes()
    except OSError:
        return None  # deleted since indexing: it is no longer part of the repository


def count_repository(
    root: Path, paths: Sequence[str], count: Count, *, exact_limit: int = EXACT_COUNT_BYTES,
    sample_bytes: int = SAMPLE_BYTES, seed: int = 0,
) -> RepoTokens:
    """Count every file, or beyond `exact_limit` bytes, random windows scaled to all bytes."""
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
        texts = (_read(root, path) for path in sizes)
        tokens = sum(count(data.decode("utf-8", errors="replace")) for data in texts if data is not None)
        return RepoTokens(tokens, len(sizes), total, "exact", len(sizes), None)
    pairs = _sample_windows(root, sizes, count, max(MIN_WINDOWS, sample_bytes // WINDOW_BYTES), seed)
    ratio, error = _ratio_estimate(pairs)
    return RepoTokens(round(ratio * total), len(sizes), total, "sampled", len(pairs), error)


def _sample_windows(root: Path, sizes: dict[str, int], count: Count, n: int, seed: int) -> list[tuple[int, int]]:
    """(bytes, tokens) of the lines that start inside each of n random windows of WINDOW_BYTES.

    Windows, not whole files: files differ wildly in size and in tokens per byte (data tables,
    minified code), and many small draws estimate the mean far more steadily. A file is drawn
    with weight size + WINDOW_BYTES - 1 and the window's start uniformly from -WINDOW_BYTES + 1
    to size - 1, so every line start of the repository falls in a window with the same chance;
    taking whole lines by their start keeps long and short lines unbiased and cuts no token.
    """
    rng = random.Random(seed)
    order = sorted(p for p in sizes if sizes[p] > 0)
    chosen = rng.choices(order, weights=[sizes[p] + WINDOW_BYTES - 1 for p in order], k=n)
    pairs = []
    for path in chosen:
        data = _read(root, path)
        if not data:
            continue
        start = rng.randrange(-WINDOW_BYTES + 1, len(data))
        low, high = max(0, start), min(len(data), start + WINDOW_BYTES)
        first = 0 if low == 0 else data.find(b"\n", low - 1) + 1  # first line start at or after low
        if first == 0 and low > 0 or first >= high:
            pairs.append((0, 0))  # no line starts in this window
            continue
        end = data.find(b"\n", high - 1)  # end of the line holding the last byte of the window
        piece = data[first : len(data) if end < 0 else end + 1]
        pairs.append((len(piece), count(piece.decode("utf-8", errors="replace"))))
    if sum(b for b, _ in pairs) == 0 or len(pairs) < 2:
        raise CompareError(f"too few readable bytes under {root} to sample: run `bridge index {root}` again")
    return pairs


def _ratio_estimate(pairs: Sequence[tuple[int, int]]) -> tuple[float, float]:
    """Tokens per byte and the relative half-width of its 95 % interval (linearised variance of
    a ratio estimator; draws are with replacement, so no finite-population correction)."""
    b = np.array([p[0] for p in pairs], dtype=np.float64)
    t = np.array([p[1] for p in pairs], dtype=np.float64)
    ratio = float(t.sum() / b.sum())
    if ratio == 0:
        return 0.0, 1.0
    n = len(pairs)
    se = math.sqrt(float(np.sum((t - ratio * b) ** 2)) / (n - 1) / n) / b.mean()
    return ratio, 1.96 * se / ratio


@dataclass(frozen=True)
class ContextSide:
    """A prompt of `tokens`; its KV cache holds `kv_tokens` (the answer reserve included)."""

    tokens: int
    kv_tokens: int
    cache_type: str
    kv_bytes: int
    kv_bytes_by_type: dict[CacheType, int]


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
    snippets = [snippet_from_hit(hit) for hit in search(question)]  # type: ignore[arg-type]
    shape = (snippets[0].citation,) if snippets else ()
    plan = plan_prompt(
        n_ctx=n_ctx, answer_reserve=answer_reserve, kv_bytes_per_token=kv_bytes_per_token,
        system=system_prompt(), question=render_question(question, *shape), count=count,
        snippets=snippets, snippet_budget=snippet_budget, overhead=overhead,
    )
    return RetrievalTurn(question, plan.prompt_tokens, plan.sections.snippets, len(plan.snippets), plan.notice)


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
        say(f"measuring the retrieval prompt ({turn.tokens} tokens)")
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
                       "samples": repo.samples, "error": None if repo.error is None else round(repo.error, 4)},
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
