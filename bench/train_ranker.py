"""Train the learned second stage (index/rank/ranker.py) on shared/bench, with leave-one-repository-out.

    python -m bench.train_ranker [QUESTIONS.jsonl] [--work DIR] [--corpora DIR] [--mirrors DIR]
                                 [--embedder static|minilm] [--out-dir DIR] [--l2 X] [--write]

Needs the indexes (and their history) that `python -m bench.swebench` keeps under WORK/indexes.
For every question it takes the RERANK best files of the fused order with their feature rows
(`index.search.file_features`), then fits w so that a softmax over each question's candidates puts
the gold files first (L2-regularised, L-BFGS from scipy). It reports, for the fused order, the
model fitted on all questions (in-sample) and, per repository, the model fitted on the other
eight (leave-one-repository-out, the figure that says how it generalises), each with a 95 %
bootstrap interval, and the paired interval of the held-out figure's loss. `--write` stores the
in-sample weights as index/rank/ranker.json, the file the package ships.

No question of another SWE-bench split and no commit after a question's base commit is used:
the features come from the trees and the ancestors-only history of shared/bench.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

from bench.swebench_trees import kept_searchers
from bridge.measure.evaluate import load_questions
from bridge.measure.intervals import METRICS, bootstrap_means, listed, markdown_rows
from index.rank import FEATURES, RERANK
from index.search import file_features

__all__ = ["Sample", "evaluate", "fit", "main"]

DEFAULT_OUT = Path(__file__).resolve().parent / "out"
L2 = 1.0


@dataclass(frozen=True)
class Sample:
    """One question: its candidate files' features and which of them are gold."""

    id: str
    repo: str
    features: np.ndarray
    gold: np.ndarray  # bool per candidate
    query_bytes: int
    paths: tuple[str, ...] = ()  # the candidates' paths, for studying the misses


def collect(questions_file: Path, corpora: Path, mirrors: Path, work: Path, log: Any, embedder_spec: str = "static") -> list[Sample]:
    questions = load_questions(questions_file)
    samples = []
    for job, searcher in kept_searchers(questions, corpora, mirrors, work, log, embedder_spec, learned=False):
        for q in job.questions:
            paths, features = file_features(searcher, q.query)
            gold = np.fromiter((p in q.gold_files for p in paths), dtype=bool, count=len(paths))
            samples.append(Sample(q.id, q.repo or "?", features, gold, len(q.query.encode()), tuple(paths)))
        log(f"{job.name}: {len(job.questions)} question(s)")
    return samples


def _loss(w: np.ndarray, samples: Sequence[Sample], l2: float, weights: np.ndarray) -> tuple[float, np.ndarray]:
    """Σ weight·(-log P(gold | question)) under a softmax over the candidates, plus l2·|w|²; and its
    gradient.

    (Pulling w towards the fused order instead of towards 0 was tried: leave-one-repository-out
    recall@1 0.543-0.550 against 0.557 here, bench/archive/RESULTS-journal.md.)"""
    total, grad = l2 * float(w @ w), 2 * l2 * w
    for s, weight in zip(samples, weights):
        z = s.features @ w
        p = np.exp(z - logsumexp(z))
        zg = z[s.gold]
        pg = np.exp(zg - logsumexp(zg))  # the gold files' share among themselves
        total += weight * float(logsumexp(z) - logsumexp(zg))
        grad += weight * (s.features.T @ p - s.features[s.gold].T @ pg)
    return total, grad


def fit(samples: Sequence[Sample], l2: float = L2, extra: Sequence[Sample] = (), extra_weight: float = 1.0) -> np.ndarray:
    """Weights fitted to `samples` and, each counting `extra_weight`, to the `extra` pairs."""
    usable = [s for s in samples if s.gold.any()]
    more = [s for s in extra if s.gold.any()]
    weights = np.asarray([1.0] * len(usable) + [extra_weight] * len(more))
    width = usable[0].features.shape[1] if usable else len(FEATURES)
    done = minimize(_loss, np.zeros(width), args=([*usable, *more], l2, weights), jac=True,
                    method="L-BFGS-B", options={"maxiter": 500})
    return np.asarray(done.x)


def _gold_rank(scores: np.ndarray, gold: np.ndarray) -> int | None:
    if not gold.any():
        return None
    order = np.lexsort((np.arange(len(scores)), -scores))
    return int(np.flatnonzero(gold[order])[0]) + 1


def _values(samples: Sequence[Sample], weights: Sequence[np.ndarray]) -> dict[str, list[float]]:
    """Per sample ranked by its own weights: whether the gold file is first, in the best 5 or 10, and
    1 / its rank (0 for a miss: gold not a candidate)."""
    ranks = [_gold_rank(s.features @ w, s.gold) for s, w in zip(samples, weights)]
    return {
        "recall_at_1": [float(r is not None and r <= 1) for r in ranks],
        "recall_at_5": [float(r is not None and r <= 5) for r in ranks],
        "recall_at_10": [float(r is not None and r <= 10) for r in ranks],
        "mrr": [1 / r if r else 0.0 for r in ranks],
    }


def evaluate(samples: Sequence[Sample], weights: Sequence[np.ndarray]) -> dict[str, float]:
    """Recall@1/5/10 and MRR of each sample ranked by its own weights."""
    values = _values(samples, weights)
    n = max(len(samples), 1)
    return {"n": len(samples), **{name: round(sum(column) / n, 4) for name, column in values.items()}}


def _intervals(samples: Sequence[Sample], in_sample: np.ndarray, loo: Sequence[np.ndarray]) -> dict[str, Any]:
    """Bootstrap intervals of the in-sample and held-out figures, and of their paired difference."""
    inside = _values(samples, [in_sample] * len(samples))
    held = _values(samples, loo)
    return {
        "intervals": {"in-sample": listed(bootstrap_means({m: inside[m] for m in METRICS})),
                      "LOO": listed(bootstrap_means({m: held[m] for m in METRICS}))},
        "differences": {"LOO - in-sample": listed(bootstrap_means({m: np.subtract(held[m], inside[m])
                                                                  for m in METRICS}))},
    }


def leave_one_repo_out(samples: Sequence[Sample], l2: float, extra: Sequence[Sample] = (),
                       extra_weight: float = 1.0) -> list[np.ndarray]:
    """Per sample, the weights fitted without any question of its repository (extra pairs: always)."""
    by_repo = {repo: fit([s for s in samples if s.repo != repo], l2, extra, extra_weight)
               for repo in sorted({s.repo for s in samples})}
    return [by_repo[s.repo] for s in samples]


def report(samples: Sequence[Sample], l2: float, extra: Sequence[Sample] = (),
           extra_weight: float = 1.0) -> tuple[dict[str, Any], np.ndarray]:
    fused = np.zeros(len(FEATURES))
    fused[FEATURES.index("fused_inv_rank")] = 1.0
    weights = fit(samples, l2, extra, extra_weight)
    loo = leave_one_repo_out(samples, l2, extra, extra_weight)
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(samples):
        groups.setdefault(s.repo, []).append(i)
        groups.setdefault(">=4000 bytes" if s.query_bytes >= 4000 else "<4000 bytes", []).append(i)

    def rows(idx: Sequence[int]) -> dict[str, dict[str, float]]:
        picked = [samples[i] for i in idx]
        return {"fused": evaluate(picked, [fused] * len(picked)),
                "in_sample": evaluate(picked, [weights] * len(picked)),
                "loo": evaluate(picked, [loo[i] for i in idx])}

    out = {"l2": l2, "rerank": RERANK, "extra_pairs": len(extra), "extra_weight": extra_weight,
           "overall": rows(range(len(samples))),
           "groups": {key: rows(idx) for key, idx in sorted(groups.items())},
           **_intervals(samples, weights, loo),
           "weights": dict(zip(FEATURES, np.round(weights, 5).tolist())),
           # per repository, fitted without it: bench.edit_sites --file-stage searches it with these
           "held_out_weights": {s.repo.split("/")[-1]: dict(zip(FEATURES, w.tolist())) for s, w in zip(samples, loo)}}
    return out, weights


def markdown(result: dict[str, Any]) -> str:
    extra = (f", with {result['extra_pairs']} commit pairs of other repositories (weight {result['extra_weight']})"
             if result["extra_pairs"] else "")
    lines = [f"Second stage, softmax over the {result['rerank']} best fused files, L2 {result['l2']}{extra}:", "",
             "| questions | n | fused R@1 | fused R@5 | in-sample R@1 | in-sample R@5 | in-sample MRR "
             "| LOO R@1 | LOO R@5 | LOO MRR |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, r in [("all", result["overall"]), *result["groups"].items()]:
        f, i, o = r["fused"], r["in_sample"], r["loo"]
        lines.append(f"| {key} | {f['n']} | {f['recall_at_1']:.3f} | {f['recall_at_5']:.3f} | {i['recall_at_1']:.3f} "
                     f"| {i['recall_at_5']:.3f} | {i['mrr']:.3f} | {o['recall_at_1']:.3f} | {o['recall_at_5']:.3f} "
                     f"| {o['mrr']:.3f} |")
    lines += ["", "95 % intervals (bootstrap over the questions; the difference is paired):", "",
              *markdown_rows(result["intervals"], result["differences"])]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("questions", type=Path)
    parser.add_argument("--corpora", type=Path, required=True)
    parser.add_argument("--mirrors", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True, help="the --work folder of bench.swebench")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--embedder", default="static", help="the embedder WORK's indexes were built with (bench.swebench --embedder)")
    parser.add_argument("--l2", type=float, default=L2)
    parser.add_argument("--samples", type=Path, default=None,
                        help="where the features are saved and --reuse finds them (default WORK/ranker-samples.pkl)")
    parser.add_argument("--reuse", action="store_true", help="reuse the features saved by the last run (--samples)")
    parser.add_argument("--extra", type=Path, action="append", default=[],
                        help="commit pairs of other repositories (bench.commit_pairs --out), added to every fit")
    parser.add_argument("--extra-weight", type=float, default=1.0, help="how much each extra pair counts")
    parser.add_argument("--write", action="store_true", help="store the in-sample weights as index/rank/ranker.json")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"{time.perf_counter() - started:7.1f}s {message}", file=sys.stderr, flush=True)

    saved = args.samples or args.work / "ranker-samples.pkl"
    if args.reuse and saved.is_file():
        samples = pickle.loads(saved.read_bytes())
    else:
        samples = collect(args.questions, args.corpora, args.mirrors, args.work, log, args.embedder)
        saved.write_bytes(pickle.dumps(samples))
    extra = [s for path in args.extra for s in pickle.loads(path.read_bytes())]
    result, weights = report(samples, args.l2, extra, args.extra_weight)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "train_ranker.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    text = markdown(result)
    (args.out_dir / "train_ranker.md").write_text(text, encoding="utf-8")
    print(text)
    if args.write:
        model = {"features": list(FEATURES), "weights": dict(zip(FEATURES, weights.tolist())),
                 "trained_on": f"shared/bench swebench_lite, {len(samples)} questions, l2 {args.l2}"
                 + (f", {len(extra)} commit pairs of other repositories (weight {args.extra_weight})" if extra else "")}
        target = Path(__file__).resolve().parent.parent / "index" / "rank" / "ranker.json"
        target.write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
        log(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
