"""SWE-bench Lite, file level: the bridge's retrieval modes against two baselines, in one run.

    python -m bench.swebench [QUESTIONS.jsonl] [--corpora DIR] [--mirrors DIR] [--work DIR]
                             [--out-dir DIR] [--repos sympy,flask] [--build-only | --kept]
                             [--embedder static|minilm]

Builds the missing trees (materialize.sh), indexes each base commit once (lexical + static
vectors; see bench/swebench_trees.py), then ranks files for every question with:

- lexical, vector, hybrid: `bridge search` modes (50 chunk hits, files in order of first hit);
  `lexical` (BM25 over chunks) and `vector` (dense-only over chunks) are the single retrievers,
  `hybrid` the product's fusion with its file-level signals (index/rank/evidence.py);
- bm25_files: the SWE-bench paper's baseline, BM25 over whole files with a plain word tokenizer
  (bench/bm25_files_baseline.py);
- hybrid-fused: the hybrid file ranking without the learned second stage (index/rank/ranker.py): the
  hand-set fusion of index/rank/evidence.py alone;
- hybrid-<signal>: that fused ranking (`index.search.file_ranking`) with one signal left out, to show
  what each signal contributes.

Every tree's index gets the git history of its base commit's ancestors (from the mirror; nothing
later can leak in), as `bridge index` gives a git checkout; `--kept` reads the histories a stopped
run left missing too, so it never ranks without them.

Writes OUT_DIR/swebench.json (every number, per question gold ranks) and OUT_DIR/swebench.md
(tables for bench/RESULTS.md), and reports where recall@5 is lost: per repository, per query
length and by whether the question names the gold file. The main modes' R@1, R@5 and MRR come
with 95 % bootstrap intervals, and hybrid's gain over each with a paired one
(bridge/measure/intervals.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from bench import paths
from bench.bm25_files_baseline import build_file_index, rank_files
from bench.swebench_trees import DONE_MARKER, TreeJob, ensure_corpora, plan_jobs, prepare_history, prepare_indexes
from bridge.measure.evaluate import ModeMetrics, Question, QuestionResult, aggregate, load_questions, ranked_files
from bridge.measure.intervals import RESAMPLES, markdown_rows, versus
from index.embed import Embedder, load_embedder
from index.rank import SIGNALS
from index.search import MAX_K, Searcher, file_ranking
from index.store import default_home

__all__ = ["MODES", "Record", "main", "run_job", "summarize"]

DEFAULT_OUT = paths.OUT
SEARCH_MODES = ("lexical", "vector", "hybrid")
ABLATIONS = {f"hybrid-{name}": {**SIGNALS, name: 0.0} for name in SIGNALS if SIGNALS[name]}
MODES = ("bm25_files", *SEARCH_MODES, "hybrid-fused", *ABLATIONS)
SINGLE = ("bm25_files", "lexical", "vector")  # the single retrievers hybrid must beat
# In the tables, with intervals, and their ranked lists kept in the JSON.
MAIN_MODES = ("bm25_files", "lexical", "vector", "hybrid-fused", "hybrid")
KEEP = 50  # ranked files kept per question and mode
LENGTH_BUCKETS = ((0, 500), (500, 1500), (1500, 4000), (4000, None))  # query bytes
MAX_QUERY_BYTES = 1 << 20  # issue texts run to 25 KB; the CLI default (4 KB) would refuse them

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Record:
    """The files each mode ranked for one question (best first, at most KEEP)."""

    question: Question
    tree: str
    ranked: dict[str, tuple[str, ...]]
    latency_ms: dict[str, float]
    gold_named: bool  # the question names the gold file (path or dotted module)


def _timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = call()
    return value, (time.perf_counter() - started) * 1000


def run_job(job: TreeJob, index_dir: Path, embedder: Embedder) -> list[Record]:
    """Rank files with every mode for the questions of one tree."""
    searcher = Searcher(index_dir, embedder_loader=lambda _spec: embedder, max_query_bytes=MAX_QUERY_BYTES)
    files = build_file_index(job.tree)
    # Untimed first search: it loads the index's history, subject vectors and the title's MiniLM, which
    # a fresh run paid inside its first timed hybrid query (median 410 ms against 14 ms for the fused
    # order); the column is meant to be the query's cost, as bench.query_bench measures it.
    searcher.search(job.questions[0].query, k=MAX_K, mode="hybrid")
    records = []
    for question in job.questions:
        ranked: dict[str, tuple[str, ...]] = {}
        latency: dict[str, float] = {}
        query = question.query
        whole, latency["bm25_files"] = _timed(partial(rank_files, files, query))
        ranked["bm25_files"] = tuple(whole[:KEEP])
        for mode in SEARCH_MODES:
            result, latency[mode] = _timed(partial(searcher.search, query, k=MAX_K, mode=mode))
            ranked[mode] = tuple(ranked_files([hit.path for hit in result.hits])[:KEEP])
        order, latency["hybrid-fused"] = _timed(partial(file_ranking, searcher, query, learned=False))
        ranked["hybrid-fused"] = tuple(path for path, _ in order[:KEEP])
        for mode, weights in ABLATIONS.items():
            order, latency[mode] = _timed(partial(file_ranking, searcher, query, weights, learned=False))
            ranked[mode] = tuple(path for path, _ in order[:KEEP])
        named = {path for path, _ in file_ranking(searcher, question.query, {"mentions": 1.0}, learned=False)}
        records.append(Record(question, job.name, ranked, latency, bool(named & set(question.gold_files))))
    return records


# --- summaries -----------------------------------------------------------------------------


def _results(mode: str, records: Sequence[Record]) -> list[QuestionResult]:
    return [QuestionResult(r.question, r.ranked[mode], (), r.latency_ms[mode]) for r in records]


def _metrics(mode: str, records: Sequence[Record]) -> ModeMetrics:
    return aggregate(mode, _results(mode, records))


def _row(metrics: ModeMetrics) -> dict[str, float]:
    keep = ("n", "recall_at_1", "recall_at_5", "recall_at_10", "mrr", "ndcg_at_10", "median_latency_ms")
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(metrics).items() if k in keep}


def _label(low: int, high: int | None) -> str:
    return f"{low}-{high}" if high else f">={low}"


def _bucket(size: int) -> str:
    for low, high in LENGTH_BUCKETS:
        if size >= low and (high is None or size < high):
            return _label(low, high)
    raise AssertionError(size)


def _gold_rank(record: Record, mode: str) -> int | None:
    gold = set(record.question.gold_files)
    return next((i + 1 for i, path in enumerate(record.ranked[mode]) if path in gold), None)


def summarize(records: Sequence[Record]) -> dict[str, Any]:
    """Overall, per repository, macro, per query length and by gold-named, for every mode."""
    repos = sorted({r.question.repo or "?" for r in records})
    groups: dict[str, dict[str, list[Record]]] = {
        "per_repo": {},
        "per_query_bytes": {_label(low, high): [] for low, high in LENGTH_BUCKETS},
        "gold_named": {},
    }
    for r in records:
        groups["per_repo"].setdefault(r.question.repo or "?", []).append(r)
        groups["per_query_bytes"].setdefault(_bucket(len(r.question.query.encode())), []).append(r)
        groups["gold_named"].setdefault("named" if r.gold_named else "not named", []).append(r)
    summary: dict[str, Any] = {"overall": {mode: _row(_metrics(mode, records)) for mode in MODES}}
    for kind, by_key in groups.items():
        summary[kind] = {key: {mode: _row(_metrics(mode, group)) for mode in MODES}
                         for key, group in by_key.items() if group}
    summary["macro"] = {
        mode: {name: round(statistics.fmean(summary["per_repo"][repo][mode][name] for repo in repos), 4)
               for name in ("recall_at_1", "recall_at_5", "recall_at_10", "mrr")}
        for mode in MODES
    }
    summary["intervals"], summary["differences"] = versus({mode: _results(mode, records) for mode in MAIN_MODES})
    best = max(SINGLE, key=lambda m: summary["overall"][m]["recall_at_5"])
    summary["targets"] = {
        "hybrid_recall_at_5": summary["overall"]["hybrid"]["recall_at_5"],
        "best_single_retriever": best,
        "best_single_recall_at_5": summary["overall"][best]["recall_at_5"],
        "goal": "recall@5 >= 0.80 and >= best single retriever + 0.08",
    }
    return summary


def _table(rows: dict[str, dict[str, float]], label: str) -> list[str]:
    lines = [f"| {label} | n | R@1 | R@5 | R@10 | MRR | nDCG@10 | median ms |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, m in rows.items():
        lines.append(f"| {name} | {m['n']} | {m['recall_at_1']:.3f} | {m['recall_at_5']:.3f} | {m['recall_at_10']:.3f} "
                     f"| {m['mrr']:.3f} | {m['ndcg_at_10']:.3f} | {m['median_latency_ms']:.1f} |")
    return lines


def _r5_table(by_key: dict[str, dict[str, dict[str, float]]], label: str, modes: Sequence[str]) -> list[str]:
    lines = [f"| {label} | n | " + " | ".join(modes) + " |", "|---|---:|" + "---:|" * len(modes)]
    for key, per_mode in by_key.items():
        cells = " | ".join(f"{per_mode[m]['recall_at_5']:.3f}" for m in modes)
        lines.append(f"| {key} | {next(iter(per_mode.values()))['n']} | {cells} |")
    return lines


def markdown(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    t = summary["targets"]
    lines = [
        "## SWE-bench Lite, file-level retrieval",
        "",
        f"{meta['questions']} questions, {meta['trees']} trees; embedder `{meta['embedder']}`; "
        f"run took {meta['seconds']:.0f} s (`{meta['command']}`), of which {meta['index_seconds']:.0f} s "
        f"preparing indexes ({meta['trees_built']} built, the rest kept from an earlier run of the script).",
        "",
        *_table(summary["overall"], "mode (all questions)"),
        "",
        "Macro average over repositories (R@5): "
        + ", ".join(f"{m} {summary['macro'][m]['recall_at_5']:.3f}" for m in MAIN_MODES) + ".",
        "",
        f"Target: {t['goal']}. Best single retriever: {t['best_single_retriever']} "
        f"({t['best_single_recall_at_5']:.3f}); hybrid {t['hybrid_recall_at_5']:.3f}. Rows `hybrid-X` "
        "rank files as hybrid does with signal X left out (index/rank/evidence.py).",
        "",
        f"### 95 % intervals (bootstrap over the questions, {RESAMPLES:,} resamples; a difference is paired)",
        "",
        *markdown_rows(summary["intervals"], summary["differences"]),
        "",
        "### Recall@5 per repository",
        "",
        *_r5_table(summary["per_repo"], "repository", MAIN_MODES),
        "",
        "### Recall@5 per query length (bytes)",
        "",
        *_r5_table(summary["per_query_bytes"], "query bytes", MAIN_MODES),
        "",
        "### Recall@5 by whether the question names the gold file",
        "",
        *_r5_table(summary["gold_named"], "gold file", MAIN_MODES),
        "",
    ]
    return "\n".join(lines)


def _per_question(records: Sequence[Record]) -> list[dict[str, Any]]:
    return [
        {"id": r.question.id, "tree": r.tree, "gold_files": list(r.question.gold_files),
         "query_bytes": len(r.question.query.encode()), "gold_named": r.gold_named,
         "gold_rank": {mode: _gold_rank(r, mode) for mode in MODES},
         "ranked": {mode: list(r.ranked[mode]) for mode in MAIN_MODES}}
        for r in records
    ]


def kept_indexes(jobs: Sequence[TreeJob], work: Path) -> dict[str, Path]:
    """The complete index an earlier run kept for every tree (SystemExit naming the first one missing).

    `prepare_indexes` rebuilds an index made by other code (its fingerprint covers the indexing
    modules), which is right for a new engine but costs an hour when only the query path changed."""
    kept = {job.name: work / "indexes" / job.name for job in jobs}
    for folder in kept.values():
        if not (folder / DONE_MARKER).is_file():
            raise SystemExit(f"{folder} is not a complete kept index: run once without --kept to build it")
    return kept


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("questions", nargs="?", type=Path, default=paths.questions())
    parser.add_argument("--corpora", type=Path, default=paths.corpora(), help="one tree per base commit")
    parser.add_argument("--mirrors", type=Path, default=paths.mirrors(), help="bare mirrors as OWNER+NAME/repo")
    parser.add_argument("--work", type=Path, default=paths.bench_home() / "swebench", help="indexes and caches")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--repos", default="", help="comma-separated repository names (default: all)")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--kept", action="store_true",
                        help="rank on the indexes kept in WORK/indexes whatever code built them, with no build (to "
                        "compare query-path changes on the same indexes); only a history an earlier run left "
                        "unfinished is read")
    parser.add_argument("--embedder", default="static",
                        help="static (default) or minilm; give minilm its own --work folder and --out-dir")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    def progress(message: str) -> None:
        print(f"{time.perf_counter() - started:7.1f}s {message}", file=sys.stderr, flush=True)

    questions = load_questions(args.questions)
    wanted = {name for name in args.repos.split(",") if name}
    if wanted:
        questions = [q for q in questions if (q.repo or "").split("/")[-1] in wanted]
    jobs = plan_jobs(questions, args.corpora, args.mirrors)
    ensure_corpora(jobs, args.questions, args.corpora, args.mirrors, progress)
    embedder = load_embedder(args.embedder, cache_dir=default_home() / "models")
    built: list[str] = []
    if args.kept:
        indexes = kept_indexes(jobs, args.work)
    else:
        indexes, built = prepare_indexes(jobs, args.work, embedder, progress, args.embedder)
    prepare_history(jobs, indexes, args.mirrors, progress)  # a no-op where every history is there
    build_seconds = time.perf_counter() - started
    progress(f"{len(jobs)} trees indexed ({len(built)} built now, {len(jobs) - len(built)} kept from an earlier run)")
    if args.build_only:
        return 0
    records: list[Record] = []
    for number, job in enumerate(jobs, start=1):
        records.extend(run_job(job, indexes[job.name], embedder))
        progress(f"[{number}/{len(jobs)}] {job.name}: {len(job.questions)} question(s) ranked")
    summary = summarize(records)
    meta = {"questions": len(records), "trees": len(jobs), "embedder": getattr(embedder, "id", "static"),
            "seconds": round(time.perf_counter() - started, 1), "index_seconds": round(build_seconds, 1),
            "trees_built": len(built),
            "command": "python -m bench.swebench" + (f" --repos {args.repos}" if args.repos else "")
            + (f" --embedder {args.embedder}" if args.embedder != "static" else "")
            + (" --kept" if args.kept else "")}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    report = {**meta, "modes": list(MODES), "signals": dict(SIGNALS), **summary, "per_question": _per_question(records)}
    (args.out_dir / "swebench.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    text = markdown(summary, meta)
    (args.out_dir / "swebench.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
