"""Reference baseline: BM25 over whole files, the retriever of the SWE-bench paper.

Each question's issue text is the query; the documents are all text files of the repository at
the question's base commit, tokenised with a plain word regex. Trees come from
`materialize.sh` (one folder `<name>@<commit[:12]>` per base commit under the corpora folder).

    python -m bench.bm25_files_baseline [QUESTIONS.jsonl] [--corpora DIR] [--out FILE]

The importable core (`bm25_files_ranking`, `build_file_index`, `rank_files`, `run`, `summarize`)
lets the main benchmark score this baseline in the same run as the bridge's own modes.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rank_bm25 import BM25Okapi

from bench import paths
from bridge.measure.evaluate import Question, QuestionResult, aggregate, load_questions

__all__ = [
    "MAX_FILE_BYTES",
    "MODE",
    "FileIndex",
    "bm25_files_ranking",
    "build_file_index",
    "main",
    "rank_files",
    "run",
    "summarize",
    "text_files",
    "tokenize",
    "tree_for",
]

MODE = "bm25_files"
MAX_FILE_BYTES = 1024 * 1024
# Git's own heuristic: a NUL byte near the start means binary.
_BINARY_PROBE_BYTES = 8000
_WORD = re.compile(r"\w+")

DEFAULT_OUT = paths.OUT / "bm25_files.json"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class FileIndex:
    """BM25 over the text files of one tree; `paths[i]` (relative, forward slashes) is doc i."""

    root: Path
    paths: tuple[str, ...]
    bm25: BM25Okapi | None  # None when the tree has no text file


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def text_files(tree: Path, max_bytes: int = MAX_FILE_BYTES) -> Iterator[tuple[str, str]]:
    """(relative path, text) of every regular file under tree that is small and not binary."""
    for path in sorted(tree.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.stat().st_size > max_bytes:
            continue
        data = path.read_bytes()
        if b"\0" in data[:_BINARY_PROBE_BYTES]:
            continue
        yield path.relative_to(tree).as_posix(), data.decode("utf-8", errors="replace")


def build_file_index(tree: Path) -> FileIndex:
    paths: list[str] = []
    documents: list[list[str]] = []
    for relative, text in text_files(tree):
        paths.append(relative)
        documents.append(tokenize(text))
    return FileIndex(root=tree, paths=tuple(paths), bm25=BM25Okapi(documents) if paths else None)


def rank_files(index: FileIndex, query: str) -> list[str]:
    """Every file of the index, best first; equal scores keep path order so runs repeat exactly."""
    if index.bm25 is None:
        return []
    scores = index.bm25.get_scores(tokenize(query))
    order = np.argsort(-scores, kind="stable")
    return [index.paths[i] for i in order]


def bm25_files_ranking(tree: Path, queries: list[str]) -> list[list[str]]:
    """Tokenise the tree once, then rank all its files for each query."""
    index = build_file_index(tree)
    return [rank_files(index, query) for query in queries]


def tree_for(corpora: Path, question: Question) -> Path:
    if not question.repo or not question.base_commit:
        raise ValueError(f"question {question.id} has no repo/base_commit to pick a tree")
    return corpora / f"{question.repo.split('/')[-1]}@{question.base_commit[:12]}"


@dataclass(frozen=True)
class RunRecord:
    result: QuestionResult
    candidates: int
    gold_indexed: bool


def run(
    questions: Sequence[Question], corpora: Path, progress: Progress | None = None
) -> list[RunRecord]:
    """Score every question against its tree; trees are indexed once, in first-seen order."""
    by_tree: dict[Path, list[Question]] = {}
    for question in questions:
        by_tree.setdefault(tree_for(corpora, question), []).append(question)
    missing = [str(tree) for tree in by_tree if not tree.is_dir()]
    if missing:
        raise FileNotFoundError(
            f"{len(missing)} corpus trees missing (first {missing[0]}): run materialize.sh"
        )
    records: dict[str, RunRecord] = {}
    for number, (tree, group) in enumerate(by_tree.items(), start=1):
        started = time.perf_counter()
        index = build_file_index(tree)
        if progress:
            elapsed = time.perf_counter() - started
            progress(f"[{number}/{len(by_tree)}] {tree.name}: {len(index.paths)} files, "
                     f"indexed in {elapsed:.1f}s, {len(group)} question(s)")
        indexed = set(index.paths)
        for question in group:
            started = time.perf_counter()
            ranked = rank_files(index, question.query)
            latency_ms = (time.perf_counter() - started) * 1000
            result = QuestionResult(question, tuple(ranked), (), latency_ms)
            records[question.id] = RunRecord(
                result, len(index.paths), all(g in indexed for g in question.gold_files)
            )
    return [records[question.id] for question in questions]


def _repo(record: RunRecord) -> str:
    return record.result.question.repo or "?"


def summarize(records: Sequence[RunRecord]) -> dict[str, Any]:
    """Micro average over questions, one row per repository, and their macro average."""
    repos = sorted({_repo(r) for r in records})
    per_repo = {
        repo: aggregate(MODE, [r.result for r in records if _repo(r) == repo]) for repo in repos
    }
    macro_fields = ("recall_at_1", "recall_at_5", "recall_at_10", "mrr", "ndcg_at_10")
    macro = {
        name: statistics.fmean(getattr(m, name) for m in per_repo.values())
        for name in macro_fields
    }
    return {
        "overall": asdict(aggregate(MODE, [r.result for r in records])),
        "per_repo": {repo: asdict(metrics) for repo, metrics in per_repo.items()},
        "macro": {"n_repos": len(repos), **macro},
    }


def _gold_rank(result: QuestionResult) -> int | None:
    gold = set(result.question.gold_files)
    return next((i + 1 for i, path in enumerate(result.ranked_files) if path in gold), None)


def _per_question(records: Sequence[RunRecord]) -> list[dict[str, Any]]:
    return [
        {
            "id": r.result.question_id,
            "repo": r.result.question.repo,
            "gold_files": list(r.result.question.gold_files),
            "gold_rank": _gold_rank(r.result),
            "gold_indexed": r.gold_indexed,
            "candidates": r.candidates,
            "top10": list(r.result.ranked_files[:10]),
            "latency_ms": round(r.result.latency_ms, 3),
        }
        for r in records
    ]


def _table(summary: dict[str, Any]) -> str:
    header = f"{'repository':<22}{'n':>5}{'R@1':>8}{'R@5':>8}{'R@10':>8}{'MRR':>8}{'nDCG@10':>9}"
    lines = [header, "-" * len(header)]

    def row(name: str, n: int | str, m: dict[str, Any]) -> str:
        return (f"{name:<22}{n:>5}{m['recall_at_1']:>8.3f}{m['recall_at_5']:>8.3f}"
                f"{m['recall_at_10']:>8.3f}{m['mrr']:>8.3f}{m['ndcg_at_10']:>9.3f}")

    for repo, m in summary["per_repo"].items():
        lines.append(row(repo, m["n"], m))
    lines.append("-" * len(header))
    lines.append(row("micro (all questions)", summary["overall"]["n"], summary["overall"]))
    lines.append(row("macro (per repo)", summary["macro"]["n_repos"], summary["macro"]))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("questions", nargs="?", type=Path, default=paths.questions())
    parser.add_argument("--corpora", type=Path, default=paths.corpora())
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    try:
        records = run(load_questions(args.questions), args.corpora, progress)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    summary = summarize(records)
    report = {
        "mode": MODE,
        "retriever": "rank_bm25.BM25Okapi(k1=1.5, b=0.75, epsilon=0.25) over whole files",
        "tokenizer": r're.findall(r"\w+", text.lower())',
        "candidates": f"text files (no NUL in first {_BINARY_PROBE_BYTES} bytes), "
                      f"at most {MAX_FILE_BYTES} bytes",
        "questions_file": str(args.questions),
        "corpora": str(args.corpora),
        "seconds": round(time.perf_counter() - started, 1),
        "gold_not_indexed": [r.result.question_id for r in records if not r.gold_indexed],
        **summary,
        "per_question": _per_question(records),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(_table(summary))
    print(f"\n{len(records)} questions in {report['seconds']}s; "
          f"gold file not indexed for {len(report['gold_not_indexed'])}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
