"""SWE-bench Lite, what a small model is shown: does `search_code`'s answer hold the code to change?

    python -m bench.edit_sites [QUESTIONS.jsonl] [--corpora DIR] [--mirrors DIR] [--work DIR]
                               [--out-dir DIR] [--repos sympy,flask] [--budgets 300,600,2000] [-k 5]
                               [--modes hybrid,lexical] [--embedder static|minilm]
                               [--chunk-stage shipped|none|TRAIN_CHUNKS.json] [--file-stage TRAIN_RANKER.json]
                               [--no-title-focus]

Runs on the indexes bench/swebench.py keeps (run it once first; this script builds nothing) and asks
every question exactly as `bridge search` and the MCP `search_code` tool do:
`Searcher.search(report, k=K, mode=MODE, max_tokens=BUDGET)`. For each answer it records:

- gold file: a returned hit is in a file the fix changed;
- edit site: a returned hit's lines overlap a line the fix edits (`edit_lines`: the lines of the file at
  the base commit that the fix removes or changes, and the two lines around each pure insertion);
- gold span: a returned hit's lines overlap a function, method or class the fix touches (`gold_spans`,
  located in the file at the base commit with the index's own outline; `imports` is the lines above
  the first definition).

Held out: `--chunk-stage` with bench.train_chunks's output searches each repository with the chunk stage
fitted on the other eight; `--file-stage` with bench.train_ranker's output does the same for the file
stage. With both, nothing learned has seen the repository searched.

Writes OUT_DIR/edit_sites.json (every figure and each question's hits) and OUT_DIR/edit_sites.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

import index.search.hits as hits_module
from bench import paths
from bench.swebench import MAX_QUERY_BYTES, kept_indexes
from bench.swebench_trees import TreeJob, plan_jobs, prepare_history
from bridge.measure.evaluate import load_questions
from index.embed import Embedder, load_embedder
from index.files import outline, source_file
from index.rank import CHUNK_FEATURES, FEATURES, ChunkStage, Ranker
from index.search import Searcher
from index.store import default_home
from index.types import Hit

__all__ = ["Answer", "GoldSites", "gold_sites", "measure_job", "summarize"]

DEFAULT_BUDGETS = (300, 600, 2000)
# The chunk stage a run uses: "shipped", None (no stage), or per repository the weights fitted without it.
Stage = Literal["shipped"] | dict[str, dict[str, float]] | None
MEASURES = ("gold_file", "edit_site", "gold_span")


@dataclass(frozen=True)
class GoldSites:
    """Where the fix of one report lands: per gold file, its edited lines and its touched spans' lines."""

    files: frozenset[str]
    edit_lines: dict[str, frozenset[int]]
    spans: dict[str, tuple[tuple[int, int], ...]]


@dataclass(frozen=True)
class Answer:
    """What one search showed, judged against the gold sites."""

    gold_file: bool
    edit_site: bool
    gold_span: bool
    tokens: int
    hits: tuple[tuple[str, int, int], ...]


def _span_lines(tree: Path, path: str, names: Sequence[str]) -> tuple[tuple[int, int], ...]:
    """Line ranges of the named definitions (`Class.method`, `function`, `imports`) in the file."""
    try:
        data = (tree / path).read_bytes()
    except OSError:
        return ()
    symbols = outline(source_file(path, data, 0))
    qualified = [(f"{s.parent}.{s.name}" if s.parent else s.name, s.start_line, s.end_line) for s in symbols]
    found: list[tuple[int, int]] = []
    for name in names:
        if name == "imports":
            first = min((start for _, start, _ in qualified), default=data.count(b"\n") + 1)
            found.append((1, max(1, first - 1)))
            continue
        found += [(start, end) for q, start, end in qualified if q == name or q.endswith("." + name)]
    return tuple(found)


def gold_sites(raw: dict[str, Any], tree: Path) -> GoldSites:
    edits = {path: frozenset(lines) for path, lines in (raw.get("edit_lines") or {}).items()}
    spans = {path: _span_lines(tree, path, names) for path, names in (raw.get("gold_spans") or {}).items()}
    return GoldSites(frozenset(raw["gold_files"]), edits, spans)


def judge(hits: Sequence[Hit], gold: GoldSites) -> Answer:
    def overlaps(hit: Hit, start: int, end: int) -> bool:
        return hit.start_line <= end and start <= hit.end_line

    in_gold = [h for h in hits if h.path in gold.files]
    edit = any(any(h.start_line <= line <= h.end_line for line in gold.edit_lines.get(h.path, ())) for h in in_gold)
    span = any(any(overlaps(h, s, e) for s, e in gold.spans.get(h.path, ())) for h in in_gold)
    return Answer(bool(in_gold), edit, span, sum(h.tokens for h in hits),
                  tuple((h.path, h.start_line, h.end_line) for h in hits))


def measure_job(job: TreeJob, index_dir: Path, embedder: Embedder, raw: dict[str, dict[str, Any]], modes: Sequence[str],
                budgets: Sequence[int], k: int, stage: Stage = "shipped",
                file_stage: dict[str, dict[str, float]] | None = None) -> list[dict[str, Any]]:
    """Every question of one tree, in every mode and budget. `stage`: the chunk stage the searches use,
    "shipped" (index/rank/chunker.json), None (none: the fused order's chunk), or weights by repository;
    `file_stage`: the file stage's weights by repository (None: the shipped index/rank/ranker.json)."""
    searcher = Searcher(index_dir, embedder_loader=lambda _spec: embedder, max_query_bytes=MAX_QUERY_BYTES)
    repo = job.repo.split("/")[-1]
    if stage != "shipped":
        weights = stage.get(repo) if stage is not None else None
        searcher.chunk_stage = ChunkStage(np.asarray([weights[f] for f in CHUNK_FEATURES]), "held out") if weights else None
    if file_stage is not None:
        searcher.ranker = Ranker(np.asarray([file_stage[repo][f] for f in FEATURES]), "held out")
    rows = []
    for question in job.questions:
        gold = gold_sites(raw[question.id], job.tree)
        answers: dict[str, dict[str, Any]] = {}
        for mode in modes:
            for budget in budgets:
                started = time.perf_counter()
                result = searcher.search(question.query, k=k, mode=mode, max_tokens=budget)
                answer = judge(result.hits, gold)
                answers[f"{mode}@{budget}"] = {**answer.__dict__, "ms": round((time.perf_counter() - started) * 1000, 2)}
        rows.append({"id": question.id, "repo": (question.repo or "?").split("/")[-1], "tree": job.name,
                     "edit_lines": sum(len(v) for v in gold.edit_lines.values()), "answers": answers})
    return rows


def _rate(rows: Sequence[dict[str, Any]], key: str, measure: str) -> float:
    return round(sum(bool(r["answers"][key][measure]) for r in rows) / len(rows), 4) if rows else 0.0


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    keys = list(rows[0]["answers"]) if rows else []
    repos = sorted({r["repo"] for r in rows})
    overall = {key: {m: _rate(rows, key, m) for m in MEASURES} for key in keys}
    per_repo = {repo: {key: {m: _rate([r for r in rows if r["repo"] == repo], key, m) for m in MEASURES} for key in keys}
                for repo in repos}
    counts = {repo: sum(r["repo"] == repo for r in rows) for repo in repos}
    macro = {key: {m: round(sum(per_repo[repo][key][m] for repo in repos) / len(repos), 4) for m in MEASURES}
             for key in keys} if repos else {}
    return {"n": len(rows), "overall": overall, "macro": macro, "per_repo": per_repo, "repo_counts": counts}


def markdown(summary: dict[str, Any], command: str) -> str:
    keys = list(summary["overall"])
    lines = ["## SWE-bench Lite: what `search_code` shows (k hits under a token budget)", "",
             f"{summary['n']} questions (`{command}`). Share of questions whose answer holds a hit in a gold file, "
             "a hit overlapping a line the fix edits, and a hit overlapping a function the fix touches.", "",
             "| mode@budget | gold file | edit site | gold span | macro edit site |", "|---|---:|---:|---:|---:|"]
    for key in keys:
        o, m = summary["overall"][key], summary["macro"][key]
        lines.append(f"| {key} | {o['gold_file']:.3f} | {o['edit_site']:.3f} | {o['gold_span']:.3f} | {m['edit_site']:.3f} |")
    lines += ["", "### Edit site per repository", "", "| repository | n | " + " | ".join(keys) + " |",
              "|---|---:|" + "---:|" * len(keys)]
    for repo, per_key in summary["per_repo"].items():
        cells = " | ".join(f"{per_key[key]['edit_site']:.3f}" for key in keys)
        lines.append(f"| {repo} | {summary['repo_counts'][repo]} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    paths.add_kept_arguments(parser)
    parser.add_argument("--budgets", default=",".join(map(str, DEFAULT_BUDGETS)))
    parser.add_argument("--modes", default="hybrid,lexical")
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--no-title-focus", action="store_true",
                        help="cut a report's hits at their first lines, not around their title's names (ablation)")
    parser.add_argument("--chunk-stage", default="shipped",
                        help="shipped (index/rank/chunker.json), none, or a bench.train_chunks JSON: each repository "
                        "searched with the weights fitted without it (leave-one-repository-out)")
    parser.add_argument("--file-stage", type=Path, default=None,
                        help="bench.train_ranker's train_ranker.json: each repository with the file stage fitted without it")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    questions = load_questions(args.questions)
    raw = {row["id"]: row for row in map(json.loads, args.questions.read_text(encoding="utf-8").splitlines()) if row}
    wanted = {name for name in args.repos.split(",") if name}
    if wanted:
        questions = [q for q in questions if (q.repo or "").split("/")[-1] in wanted]
    jobs = plan_jobs(questions, args.corpora, args.mirrors)
    indexes = kept_indexes(jobs, args.work)
    prepare_history(jobs, indexes, args.mirrors, lambda message: print(message, file=sys.stderr))
    embedder = load_embedder(args.embedder, cache_dir=default_home() / "models")
    budgets = [int(b) for b in args.budgets.split(",")]
    modes = [m for m in args.modes.split(",") if m]
    hits_module.NAMED_FOCUS = not args.no_title_focus
    stage: Stage = "shipped"
    if args.chunk_stage == "none":
        stage = None
    elif args.chunk_stage != "shipped":
        stage = json.loads(Path(args.chunk_stage).read_text(encoding="utf-8"))["held_out_weights"]
    file_stage = (json.loads(args.file_stage.read_text(encoding="utf-8"))["held_out_weights"]
                  if args.file_stage is not None else None)
    rows: list[dict[str, Any]] = []
    for number, job in enumerate(jobs, start=1):
        rows += measure_job(job, indexes[job.name], embedder, raw, modes, budgets, args.k, stage, file_stage)
        print(f"{time.perf_counter() - started:7.1f}s [{number}/{len(jobs)}] {job.name}", file=sys.stderr, flush=True)
    summary = summarize(rows)
    command = paths.reproduce("bench.edit_sites", argv).split(": ", 1)[1]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    report = {"command": command, "k": args.k, "budgets": budgets, "modes": modes, **summary, "per_question": rows}
    (args.out_dir / "edit_sites.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    text = markdown(summary, command)
    (args.out_dir / "edit_sites.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
