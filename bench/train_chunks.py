"""Train the chunk stage (index/rank/chunks.py) on shared/bench, with leave-one-repository-out.

    python -m bench.train_chunks [QUESTIONS.jsonl] [--work DIR] [--corpora DIR] [--mirrors DIR]
                                 [--embedder static|minilm] [--out-dir DIR] [--l2 X] [--write]

Needs the indexes `python -m bench.swebench` keeps under WORK/indexes. For every question and every
gold file the fix edits, it takes that file's chunks with their CHUNK_FEATURES rows
(`index.search.chunk_rows`, exactly what a hybrid search computes), marks those holding a line the
fix edits (`edit_lines`), and fits w so that a softmax over the file's chunks puts those first
(L2-regularised, the same fit as the file stage: bench/train_ranker.py). It reports, per file, how
often the chosen chunk holds an edit line: the fused order's choice (what search showed before
the stage), the model fitted on all questions (in-sample) and, per repository, the model fitted on
the other eight (leave-one-repository-out). `--write` stores the in-sample weights as
index/rank/chunker.json, the file the package ships.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import paths
from bench.swebench_trees import kept_searchers
from bench.train_ranker import Sample, fit, leave_one_repo_out
from bridge.measure.evaluate import load_questions
from index.rank import CHUNK_FEATURES
from index.search import chunk_rows

__all__ = ["chosen_hits", "collect", "main"]

# 0.3: with a report's lead file shown in several chunks (index/search/lead.py), the edit site at 600 and
# 2,000 tokens, in-sample and held out, is at least L2 1.0's on every figure (bench/DECISIONS.md).
L2 = 0.3


def collect(questions_file: Path, corpora: Path, mirrors: Path, work: Path, log: Any, embedder_spec: str = "static",
            repos: frozenset[str] = frozenset()) -> list[Sample]:
    """One sample per (question, gold file with edit lines): the file's chunks and which hold one."""
    questions = load_questions(questions_file)
    if repos:
        questions = [q for q in questions if (q.repo or "").split("/")[-1] in repos]
    raw = {row["id"]: row for row in map(json.loads, questions_file.read_text(encoding="utf-8").splitlines()) if row}
    samples = []
    for job, searcher in kept_searchers(questions, corpora, mirrors, work, log, embedder_spec):
        for q in job.questions:
            edits: dict[str, list[int]] = raw[q.id].get("edit_lines") or {}
            for path, (chunks, rows) in chunk_rows(searcher, q.query, sorted(edits)).items():
                gold = np.fromiter((any(c.start_line <= line <= c.end_line for line in edits[path]) for c in chunks),
                                   dtype=bool, count=len(chunks))
                if gold.any():
                    samples.append(Sample(f"{q.id}:{path}", (q.repo or "?").split("/")[-1], rows, gold,
                                          len(q.query.encode()), tuple(f"{c.start_line}-{c.end_line}" for c in chunks)))
        log(f"{job.name}: {len(job.questions)} question(s)")
    return samples


def chosen_hits(samples: Sequence[Sample], weights: Sequence[np.ndarray]) -> float:
    """Share of samples whose highest-scored chunk holds an edit line."""
    return float(np.mean([s.gold[int(np.argmax(s.features @ w))] for s, w in zip(samples, weights)])) if samples else 0.0


def _fused(samples: Sequence[Sample]) -> float:
    column = CHUNK_FEATURES.index("fused_first")
    return chosen_hits(samples, [np.eye(len(CHUNK_FEATURES))[column]] * len(samples))


def report(samples: Sequence[Sample], l2: float) -> tuple[dict[str, Any], np.ndarray]:
    weights = fit(samples, l2)
    repos = sorted({s.repo for s in samples})
    # with one repository there is nothing to hold out: no model (the first chunk)
    loo = leave_one_repo_out(samples, l2) if len(repos) > 1 else [np.zeros(len(CHUNK_FEATURES))] * len(samples)

    def row(idx: Sequence[int]) -> dict[str, float]:
        picked = [samples[i] for i in idx]
        return {"n": len(picked), "fused": round(_fused(picked), 4),
                "in_sample": round(chosen_hits(picked, [weights] * len(picked)), 4),
                "loo": round(chosen_hits(picked, [loo[i] for i in idx]), 4)}

    held_out = {s.repo: dict(zip(CHUNK_FEATURES, np.round(w, 5).tolist())) for s, w in zip(samples, loo)}
    result = {"l2": l2, "overall": row(range(len(samples))),
              "per_repo": {repo: row([i for i, s in enumerate(samples) if s.repo == repo]) for repo in repos},
              "weights": dict(zip(CHUNK_FEATURES, np.round(weights, 5).tolist())),
              "held_out_weights": held_out}  # per repository: fitted without it (bench.edit_sites --held-out)
    return result, weights


def markdown(result: dict[str, Any], command: str) -> str:
    lines = [f"Chunk stage, softmax over a gold file's chunks, L2 {result['l2']} (`{command}`): share of gold files "
             "whose chosen chunk holds a line the fix edits.", "",
             "| files of | n | fused order | in-sample | leave-one-repository-out |", "|---|---:|---:|---:|---:|"]
    for key, r in [("all", result["overall"]), *result["per_repo"].items()]:
        lines.append(f"| {key} | {r['n']} | {r['fused']:.3f} | {r['in_sample']:.3f} | {r['loo']:.3f} |")
    lines += ["", "Weights: " + ", ".join(f"{k} {v:+.3f}" for k, v in result["weights"].items())]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    paths.add_kept_arguments(parser)
    parser.add_argument("--l2", type=float, default=L2)
    parser.add_argument("--write", action="store_true", help="store the in-sample weights as index/rank/chunker.json")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"{time.perf_counter() - started:7.1f}s {message}", file=sys.stderr, flush=True)

    samples = collect(args.questions, args.corpora, args.mirrors, args.work, log, args.embedder,
                      frozenset(r for r in args.repos.split(",") if r))
    result, weights = report(samples, args.l2)
    command = paths.reproduce("bench.train_chunks", argv).split(": ", 1)[1]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "train_chunks.json").write_text(json.dumps({"command": command, **result}, indent=1) + "\n",
                                                    encoding="utf-8")
    print(markdown(result, command))
    if args.write:
        target = Path(__file__).resolve().parent.parent / "index" / "rank" / "chunker.json"
        model = {"features": list(CHUNK_FEATURES), "weights": result["weights"], "l2": args.l2,
                 "trained_on": f"shared/bench swebench_lite.jsonl, {len(samples)} gold files with edit lines"}
        target.write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
        log(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
