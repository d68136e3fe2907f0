"""`bridge eval`: retrieval quality of an index on a questions file, and optionally answer quality."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import typer

from bridge.cli.common import console, emit_json, fail, resolve_index

__all__ = ["EVAL_MAX_QUERY_BYTES", "FULL_CONTEXT_SLACK", "WholeRepository", "eval_cmd", "register"]

# Benchmark questions quote whole bug reports (SWE-bench issues run to 25 KB); the interactive
# limit of 4 KB would refuse them.
EVAL_MAX_QUERY_BYTES = 64 * 1024
# The full-context mode hands the planner files worth this many times n_ctx by the (high)
# token estimate; the planner then packs what really fits, so the repository is cut at n_ctx.
FULL_CONTEXT_SLACK = 2
_METRICS = (("recall@1", "recall_at_1"), ("recall@5", "recall_at_5"), ("recall@10", "recall_at_10"),
            ("MRR", "mrr"), ("nDCG@10", "ndcg_at_10"), ("span recall", "span_recall"),
            ("median ms", "median_latency_ms"))


class SearcherRetriever:
    """The chat loop's Retriever protocol over a Searcher in this process (no MCP round trip)."""

    def __init__(self, searcher: Any) -> None:
        self._searcher = searcher

    def search(self, query: str, *, k: int, max_tokens: int, mode: str) -> Any:
        from bridge.chat import Retrieval

        result = self._searcher.search(query, k=k, max_tokens=max_tokens, mode=mode)
        return Retrieval(result.hits, result.took_ms)


class WholeRepository:
    """A Retriever that returns whole files in path order, ignoring the query: full context."""

    def __init__(self, root: Path, paths: Sequence[str], n_ctx: int) -> None:
        from index.tokenize import estimate_tokens
        from index.types import Hit

        hits, total = [], 0
        for path in sorted(paths):
            try:
                text = (root / path).read_text(encoding="utf-8", errors="replace").rstrip("\n")
            except OSError:
                continue
            tokens = estimate_tokens(text)
            hits.append(Hit(path, 1, max(1, text.count("\n") + 1), 0.0, None, None, None, None, text, tokens))
            total += tokens
            if total >= FULL_CONTEXT_SLACK * n_ctx:
                break
        self.hits = tuple(hits)

    def search(self, query: str, *, k: int, max_tokens: int, mode: str) -> Any:
        from bridge.chat import Retrieval

        return Retrieval(self.hits, 0.0)


def _run_modes(searcher: Any, questions: Sequence[Any], modes: Sequence[str], k: int,
               skip_missing: bool) -> tuple[dict[str, list[Any]], dict[str, str]]:
    from bridge.evaluate import score_search
    from index.errors import NoIndex
    from index.search import MAX_K

    results: dict[str, list[Any]] = {}
    skipped: dict[str, str] = {}
    for mode in modes:
        try:
            # Up to MAX_K hits so that ten distinct files can be ranked; spans use the first k.
            found = [(q, searcher.search(q.query, k=MAX_K, mode=mode)) for q in questions]
        except NoIndex as exc:
            if not skip_missing:
                raise
            skipped[mode] = str(exc)
            continue
        results[mode] = [score_search(q, r.hits, r.took_ms, k) for q, r in found]
    return results, skipped


def _answers(searcher: Any, questions: Sequence[Any], mode: str, model: Path | None, n_ctx: int | None,
             snippet_tokens: int, answer_reserve: int, quiet: bool) -> dict[str, Any]:
    from bridge.chat import ChatSession
    from bridge.config import Settings
    from bridge.evaluate import check_answers, summarize_answers
    from bridge.runtime import LlamaCppRuntime

    asked = [q for q in questions if q.answer_contains]
    if not asked:
        fail("--answers needs questions with answer_contains strings; none of this file has any")
    runtime = LlamaCppRuntime(model, n_ctx=n_ctx)
    try:
        base = Settings(model=model, n_ctx=runtime.n_ctx, mode=mode, snippet_tokens=snippet_tokens,  # type: ignore[arg-type]
                        answer_reserve=answer_reserve)
        sides = {
            "retrieval": ChatSession(runtime, SearcherRetriever(searcher), base),
            "full_context": ChatSession(runtime, WholeRepository(searcher.root, list(searcher.manifest.files), runtime.n_ctx),
                                        dataclasses.replace(base, snippet_tokens=runtime.n_ctx)),
        }
        checks: dict[str, list[Any]] = {}
        for name, session in sides.items():
            if not quiet:
                console.print(f"answering {len(asked)} question(s) with {name.replace('_', ' ')}")

            def ask(query: str, session: Any = session) -> tuple[str, int, float]:
                session.reset()
                turn = session.ask(query)
                return turn.answer, turn.plan.prompt_tokens, turn.total_ms

            checks[name] = check_answers(name, asked, ask)
    finally:
        runtime.close()
    return {
        "model": runtime.info.model,
        "n_ctx": runtime.n_ctx,
        "summary": {name: summarize_answers(name, c) for name, c in checks.items()},
        "per_question": [c for side in checks.values() for c in side],
    }


def _print(metrics: dict[str, Any], skipped: dict[str, str], answers: dict[str, Any] | None, n: int, k: int) -> None:
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
    repo: Optional[Path] = typer.Option(None, "--repo", help="Repository (default: the current folder)."),
    index_dir: Optional[Path] = typer.Option(None, "--index-dir", help="Its index folder (default: under BRIDGE_HOME)."),
    mode: str = typer.Option("hybrid", "--mode", help="hybrid, lexical, vector, or all (side by side)."),
    k: int = typer.Option(10, "-k", min=1, max=50, help="Hits a turn reads: span recall counts the first k."),
    answers: bool = typer.Option(False, "--answers", help="Also answer with the model: retrieval vs full context cut to n_ctx."),
    model: Optional[Path] = typer.Option(None, "--model", help="A .gguf file for --answers (default: the bundled SmolLM2)."),
    n_ctx: Optional[int] = typer.Option(None, "--n-ctx", help="Context length for --answers."),
    snippet_tokens: int = typer.Option(600, "--snippet-tokens", min=0, help="Tokens for retrieved code (--answers)."),
    answer_reserve: int = typer.Option(256, "--answer-reserve", min=1, help="Tokens kept for each answer (--answers)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
) -> None:
    """Score retrieval on a questions file: recall@1/5/10, MRR, nDCG@10, span recall, latency."""
    from bridge.evaluate import aggregate, load_questions
    from index.search import Searcher
    from index.types import MODES

    if mode != "all" and mode not in MODES:
        fail(f"--mode {mode!r} is not one of hybrid, lexical, vector, all", code=2)
    questions = load_questions(questions_file)
    _, where = resolve_index(repo, index_dir)
    searcher = Searcher(where, max_query_bytes=EVAL_MAX_QUERY_BYTES)
    modes = MODES if mode == "all" else (mode,)
    results, skipped = _run_modes(searcher, questions, modes, k, skip_missing=mode == "all")
    metrics = {m: aggregate(m, r) for m, r in results.items()}
    checked = None
    if answers:
        checked = _answers(searcher, questions, "hybrid" if mode == "all" else mode, model, n_ctx,
                           snippet_tokens, answer_reserve, quiet=json_out)
    if not json_out:
        _print(metrics, skipped, checked, len(questions), k)
        return
    per_question = [
        {"id": q.id, **{m: {"ranked_files": list(results[m][i].ranked_files[:10]),
                            "latency_ms": round(results[m][i].latency_ms, 3)} for m in results}}
        for i, q in enumerate(questions)
    ]
    emit_json({"questions_file": str(questions_file), "questions": len(questions), "k": k,
               "index": searcher.info(), "modes": metrics, "skipped": skipped, "per_question": per_question,
               "answers": checked})


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_cmd)
