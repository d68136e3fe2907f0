"""`bridge compare`: retrieval against the whole repository in context (tokens, KV bytes, prefill time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from bridge.cli.common import console, emit_json, fail, resolve_index

__all__ = ["compare_cmd", "register"]


def _sizes(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        fail(f"--sizes {text!r} is not a list of token counts: write e.g. 256,512,1024,2048", code=2)
    if len(sizes) < 4:
        fail(f"--sizes needs at least 4 distinct prompt sizes (one is held out), got {len(sizes)}", code=2)
    return sizes


def _model_side(model: Path | None, preset_name: str | None, n_ctx: int | None, kv_budget: int | None,
                cache_type: str, threads: int | None) -> tuple[Any, Any]:
    """(ModelSide, runtime or None); a preset needs no file and measures nothing."""
    from bridge.llm.gguf import choose_n_ctx, preset
    from bridge.llm.runtime import TemplateOverhead
    from bridge.measure.compare import ModelSide

    if preset_name is not None:
        from bridge.llm.tokens import estimate_tokens

        facts = preset(preset_name)
        chosen = choose_n_ctx(facts, n_ctx, kv_budget, cache_type)  # type: ignore[arg-type]
        side = ModelSide(facts, preset_name, chosen, cache_type, estimate_tokens, False, TemplateOverhead(), None)  # type: ignore[arg-type]
        return side, None
    from bridge.llm.llama import LlamaCppRuntime

    runtime = LlamaCppRuntime(model, n_ctx=n_ctx, cache_type=cache_type, kv_budget_bytes=kv_budget,  # type: ignore[arg-type]
                              n_threads=threads)
    side = ModelSide(runtime.facts, runtime.info.model, runtime.n_ctx, cache_type, runtime.count_tokens, True,  # type: ignore[arg-type]
                     runtime.template_overhead(), runtime.measure_prefill)
    return side, runtime


def compare_cmd(
    repo: Path | None = typer.Option(None, "--repo", help="Repository (default: the current folder)."),
    index_dir: Path | None = typer.Option(None, "--index-dir", help="Its index folder (default: under BRIDGE_HOME)."),
    question: list[str] = typer.Option([], "--question", help="Question for the retrieval side (repeatable; default: 3 samples)."),
    model: Path | None = typer.Option(None, "--model", help="A .gguf file (default: the bundled SmolLM2)."),
    preset_name: str | None = typer.Option(None, "--preset", help="llama-3.1-8b|70b|405b, llama-3.2-1b|3b: no file, no timings."),
    n_ctx: int | None = typer.Option(None, "--n-ctx", help="Context length (default: min(8192, trained context))."),
    cache_type: str = typer.Option("f16", "--cache-type", help="KV cache type for the headline numbers: f16, q8_0 or q4_0."),
    kv_budget: str | None = typer.Option(None, "--kv-budget", help="KV-cache bytes allowed, e.g. 256MiB."),
    sizes: str | None = typer.Option(None, "--sizes", help="Prefill sizes in tokens, e.g. 512,1024,2048,4096 (default: 1/16..1 of n_ctx)."),
    repeats: int = typer.Option(2, "--repeats", min=1, help="Rounds over all prefill sizes; the fastest run of each size counts."),
    threads: int | None = typer.Option(None, "--threads", min=1, help="llama.cpp threads (1 times steadily on a busy machine)."),
    k: int = typer.Option(5, "-k", min=1, max=50, help="Hits retrieved per question."),
    snippet_tokens: int | None = typer.Option(None, "--snippet-tokens", min=0, help="Tokens for retrieved code (default: as ask)."),
    answer_reserve: int = typer.Option(512, "--answer-reserve", min=1, help="Tokens kept for the answer."),
    plot: Path | None = typer.Option(None, "--plot", help="Write a PNG of prefill time and KV memory against context length."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
) -> None:
    """Tokens, KV-cache bytes and prefill time: retrieval versus the whole repository in context."""
    from bridge.chat.budget import DEFAULT_SNIPPET_BUDGET
    from bridge.chat.settings import parse_bytes

    if snippet_tokens is None:  # resolved here: the planner is not imported until a command needs it
        snippet_tokens = DEFAULT_SNIPPET_BUDGET
    from bridge.llm.gguf import CACHE_TYPES
    from bridge.measure.compare import DEFAULT_SAMPLE_QUESTIONS, compare
    from index.search import Searcher

    if model is not None and preset_name is not None:
        fail("pass either --model or --preset, not both", code=2)
    if cache_type not in CACHE_TYPES:
        fail(f"--cache-type {cache_type!r} is not one of {', '.join(CACHE_TYPES)}", code=2)
    if plot is not None:
        from bridge.extras import require

        require("matplotlib", "bridge compare --plot")  # before minutes of measuring, not after
    budget = parse_bytes(kv_budget) if kv_budget else None
    chosen_sizes = _sizes(sizes)
    _, where = resolve_index(repo, index_dir)
    searcher = Searcher(where)
    side, runtime = _model_side(model, preset_name, n_ctx, budget, cache_type, threads)
    try:
        report = compare(
            side, searcher.root, list(searcher.manifest.files),
            lambda q: searcher.search(q, k=k, max_tokens=max(snippet_tokens, 1)).hits,
            question or list(DEFAULT_SAMPLE_QUESTIONS), sizes=chosen_sizes, repeats=repeats,
            answer_reserve=answer_reserve, snippet_budget=snippet_tokens, kv_budget_bytes=budget,
            on_progress=console.print,
        )
    finally:
        if runtime is not None:
            runtime.close()
    if plot is not None:
        from bridge.measure.plot import write_plot

        write_plot(report, plot)
    if json_out:
        emit_json(report)
    else:
        _print(report)
        if plot is not None:
            console.print(f"plot: {plot}")


def _gib(n: int) -> str:
    from bridge.cli.model_cmds import human_bytes

    return human_bytes(n)


def _yes(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _ms(value: float | None) -> str:
    if value is None:
        return "needs a real model"
    if value >= 3_600_000:
        return f"{value / 3_600_000:,.1f} h"
    return f"{value / 1000:,.1f} s" if value >= 10_000 else f"{value:,.0f} ms"


def _print(r: dict[str, Any]) -> None:
    from rich.table import Table

    m, repo, full, ret, pre = r["model"], r["repository"], r["full_context"], r["retrieval"], r["prefill"]
    how = "counted"
    if repo["method"] != "exact":
        how = f"estimated from {repo['samples']:,} random 4 KiB windows, ±{repo['error']:.1%} (95 %)"
    tokenizer = "model tokenizer" if m["tokenizer"] == "model" else "estimate (no tokenizer for a preset)"
    console.print(f"model: {m['label']} — n_ctx {m['n_ctx']:,}, trained context {m['trained_context']:,}, "
                  f"KV {m['kv_bytes_per_token_by_type'][m['cache_type']]:,} B/token ({m['cache_type']})")
    console.print(f"repository: {repo['files']:,} files, {_gib(repo['bytes'])}, {repo['tokens']:,} tokens "
                  f"({how}; {tokenizer})")
    table = Table(show_edge=False, box=None, pad_edge=False)
    for column in ("", "retrieval", "full context"):
        table.add_column(column, justify="right" if column else "left")
    table.add_row("prompt tokens", f"{ret['tokens']:,}", f"{full['tokens']:,}")
    for t in ("f16", "q8_0", "q4_0"):
        table.add_row(f"KV cache {t}", _gib(ret["kv_bytes_by_type"][t]), _gib(full["kv_bytes_by_type"][t]))
    table.add_row(f"fits n_ctx {m['n_ctx']:,}", "yes", _yes(full["fits_n_ctx"]))
    table.add_row(f"fits trained context {m['trained_context']:,}", "yes", _yes(full["fits_trained_context"]))
    if r["kv_budget_bytes"] is not None:
        table.add_row(f"fits KV budget {_gib(r['kv_budget_bytes'])}", _yes(ret["fits_kv_budget"]), _yes(full["fits_kv_budget"]))
    for fmt, weights in m["weights_by_format"].items():
        sizes = "/".join(f"{g}" for g in r["gpu_memory_gib"])
        fits = [" ".join(_yes(side["fits_gpu"][fmt][m["cache_type"]][f"{g}GiB"]) for g in r["gpu_memory_gib"]) for side in (ret, full)]
        table.add_row(f"fits {sizes} GiB, {fmt} {_gib(weights)}", *fits)
    full_ms = _ms(pre["full_context_predicted_ms"])
    if pre["extrapolated"]:
        full_ms += " (extrapolated)"
    table.add_row("prefill", _ms(pre["retrieval_ms"]), full_ms)
    console.print(table)
    console.print(f"retrieval: the median prompt of {len(ret['questions'])} question(s); "
                  f"KV cache counts the prompt plus {ret['kv_tokens'] - ret['tokens']} answer tokens; "
                  f"GPU fits add the weights and the {m['cache_type']} KV cache (compute buffers not counted)")
    if pre["fit"] is None:
        console.print(f"prefill: {pre['note']}")
        return
    fit, h = pre["fit"], pre["holdout"]
    console.print(f"full context / retrieval prefill: {pre['ratio']:,.0f}x")
    console.print(f"fit: ms = {fit['a']:.3g} + {fit['b']:.3g}·n + {fit['c']:.3g}·n² over "
                  + ", ".join(f"{p['tokens']}" for p in pre["measured"]) + " tokens; residuals "
                  + ", ".join(f"{x:+.1%}" for x in pre["residuals"]))
    console.print(f"held out {h['tokens']:,} tokens: measured {_ms(h['measured_ms'])}, predicted {_ms(h['predicted_ms'])} "
                  f"from the other sizes ({h['error']:+.1%}; target ±20%)")
    if pre["note"]:
        console.print(f"note: {pre['note']} ({pre['measured'][-1]['tokens']:,} tokens)")


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_cmd)
