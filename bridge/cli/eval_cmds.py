"""`bridge eval`: retrieval quality of an index on a questions file, and optionally answer quality."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

from bridge.cli.common import MilvusOpt, MilvusTokenOpt, console, emit_json, fail, milvus_token, resolve_index

__all__ = ["eval_cmd", "register"]

# Benchmark questions quote whole bug reports (SWE-bench issues run to 25 KB); the interactive
# limit of 4 KB would refuse them.
EVAL_MAX_QUERY_BYTES = 64 * 1024
_METRICS = (("recall@1", "recall_at_1"), ("recall@5", "recall_at_5"), ("recall@10", "recall_at_10"),
            ("MRR", "mrr"), ("nDCG@10", "ndcg_at_10"), ("span recall", "span_recall"),
            ("median ms", "median_latency_ms"))


def _answers(searcher: Any, questions: Sequence[Any], mode: str, model: Path | None, n_ctx: int | None,
             snippet_tokens: int, answer_reserve: int, quiet: bool) -> dict[str, Any]:
    from bridge.chat.settings import Settings
    from bridge.llm.llama import LlamaCppRuntime
    from bridge.measure.evaluate import summarize_answers
    from bridge.measure.runs import answer_arms

    asked = [q for q in questions if q.answer_contains]
    if not asked:
        fail("--answers needs questions with answer_contains strings; none of this file has any")

    def announce(arm: str, n: int) -> None:
        if not quiet:
            console.print(f"answering {n} question(s) with {arm.replace('_', ' ')}")

    with LlamaCppRuntime(model, n_ctx=n_ctx) as runtime:
        settings = Settings(model=model, n_ctx=runtime.n_ctx, mode=mode, snippet_tokens=snippet_tokens,  # type: ignore[arg-type]
                            answer_reserve=answer_reserve)
        arms = answer_arms(runtime, searcher, asked, settings, announce)
    return {
        "model": arms.model,
        "n_ctx": arms.n_ctx,
        "summary": {name: summarize_answers(name, c) for name, c in arms.checks.items()},
        "per_question": [c for side in arms.checks.values() for c in side],
    }


def _print_intervals(per_mode: dict[str, Any], gains: dict[str, Any]) -> None:
    from bridge.measure.intervals import Interval

    console.print("95 % intervals (bootstrap over the questions; a gain is paired):")
    for name, found in [*per_mode.items(), *gains.items()]:
        show = Interval.signed if name in gains else Interval.__str__
        cells = ", ".join(f"{label} {show(Interval(*found[field]))}" for label, field in _METRICS if field in found)
        console.print(f"  {name.replace(' - ', ' − ')}: {cells}")


def _print(metrics: dict[str, Any], intervals: tuple[dict[str, Any], dict[str, Any]], skipped: dict[str, str],
           answers: dict[str, Any] | None, n: int, k: int) -> None:
    from rich.table import Table

    table = Table(show_edge=False, box=None, pad_edge=False)
    table.add_column("metric")
    for mode in metrics:
        table.add_column(mode, justify="right")
    for label, field in _METRICS:
        cells = []
        for m in metrics.values():
            value = getattr(m, field)
            cells.append("-" if value is None else f"{value:.1f}" if field == "median_latency_ms" else f"{value:.3f}")
        table.add_row(label, *cells)
    console.print(f"{n} questions; files ranked by first hit among 50 hits, span recall over the first {k} hits")
    console.print(table)
    _print_intervals(*intervals)
    for mode, why in skipped.items():
        console.print(f"{mode}: skipped ({why})")
    if answers is None:
        return
    console.print(f"answers ({answers['model']}, n_ctx {answers['n_ctx']}):")
    for name, s in answers["summary"].items():
        console.print(f"  {name.replace('_', ' '):<13} strings found {s.contains_rate:.1%}, all found {s.all_contained_rate:.1%}, "
                      f"{s.mean_prompt_tokens:,.0f} prompt tokens, median {s.median_total_ms / 1000:,.1f} s per answer")


def eval_cmd(
    questions_file: Path = typer.Argument(..., help="JSON Lines: {id, query, gold_files[, gold_spans, answer_contains]}."),
    repo: Path | None = typer.Option(None, "--repo", help="Repository (default: the current folder)."),
    index_dir: Path | None = typer.Option(None, "--index-dir", help="Its index folder (default: under BRIDGE_HOME)."),
    mode: str = typer.Option("hybrid", "--mode", help="hybrid, lexical, vector, or all (side by side)."),
    k: int = typer.Option(10, "-k", min=1, max=50, help="Hits a turn reads: span recall counts the first k."),
    answers: bool = typer.Option(False, "--answers", help="Also answer with the model: retrieval vs full context cut to n_ctx."),
    model: Path | None = typer.Option(None, "--model", help="A .gguf file for --answers (default: the bundled SmolLM2)."),
    n_ctx: int | None = typer.Option(None, "--n-ctx", help="Context length for --answers."),
    snippet_tokens: int | None = typer.Option(
        None, "--snippet-tokens", min=0, help="Tokens for retrieved code (--answers; default: as `bridge ask`)."
    ),
    answer_reserve: int = typer.Option(256, "--answer-reserve", min=1, help="Tokens kept for each answer (--answers)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
    milvus_uri: str | None = MilvusOpt,
    milvus_token_env: str | None = MilvusTokenOpt,
) -> None:
    """Score retrieval on a questions file: recall@1/5/10, MRR, nDCG@10, span recall, latency."""
    from bridge.chat.budget import DEFAULT_SNIPPET_BUDGET
    from bridge.measure.evaluate import aggregate, load_questions
    from bridge.measure.intervals import versus
    from bridge.measure.runs import run_modes
    from index.search import Searcher
    from index.types import MODES

    if mode != "all" and mode not in MODES:
        fail(f"--mode {mode!r} is not one of hybrid, lexical, vector, all", code=2)
    questions = load_questions(questions_file)
    root, where = resolve_index(repo, index_dir)
    if milvus_uri:
        from index.milvus import MilvusStore

        store = MilvusStore(milvus_uri, root or Path.cwd().resolve(), milvus_token(milvus_token_env))
        searcher = Searcher(store=store, max_query_bytes=EVAL_MAX_QUERY_BYTES)
    else:
        searcher = Searcher(where, max_query_bytes=EVAL_MAX_QUERY_BYTES)
    modes = MODES if mode == "all" else (mode,)
    results, skipped = run_modes(searcher, questions, modes, k, skip_missing=mode == "all")
    metrics = {m: aggregate(m, r) for m, r in results.items()}
    per_mode, gains = versus(results)
    checked = None
    if answers:
        checked = _answers(searcher, questions, "hybrid" if mode == "all" else mode, model, n_ctx,
                           DEFAULT_SNIPPET_BUDGET if snippet_tokens is None else snippet_tokens, answer_reserve, quiet=json_out)
    if not json_out:
        _print(metrics, (per_mode, gains), skipped, checked, len(questions), k)
        return
    per_question = [
        {"id": q.id, **{m: {"ranked_files": list(results[m][i].ranked_files[:10]),
                            "latency_ms": round(results[m][i].latency_ms, 3)} for m in results}}
        for i, q in enumerate(questions)
    ]
    emit_json({"questions_file": str(questions_file), "questions": len(questions), "k": k,
               "index": searcher.info(), "modes": metrics, "intervals": per_mode, "differences": gains,
               "skipped": skipped, "per_question": per_question, "answers": checked})


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_cmd)
