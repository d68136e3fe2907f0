"""Natural-language questions about public codebases: hybrid vs lexical vs vector, file level.

    python -m bench.nl_bench [--questions FILE ...] [--work DIR] [--out-dir DIR]
                             [--root NAME=PATH ...] [--embedder minilm|static] [--keep]

bench/data/nl_questions.jsonl holds questions written by reading the code of CPython's asyncio
package, httpx (an installed dependency) and this repository, in words a user would use rather
than the code's own names; each names its gold file relative to its codebase. A codebase other
than this repository is the package of that name where Python imports it from (asyncio, httpx),
copied first (Python files only) so that the index sees it as a plain folder. This repository is
read at BRIDGE_COMMIT, the commit whose code its questions were written against (a clone of this
checkout, with its git history): indexed live, its later refactors moved gold files away and new
files joined the competition, so the figures drifted from one session to the next. `--root
NAME=PATH` points a codebase elsewhere. A gold file that the indexed codebase lacks is an error,
not a silent miss. `--embedder` picks the vectors: `minilm` (the product's default) or `static`
(the fast distilled one, as bench.swebench uses). `--keep` updates the indexes of an earlier run in
the same --work folder instead of rebuilding them (re-embedding only what changed).

Three more sets, written the same way by reading code the project had never been tuned on (20
questions per codebase, each set committed before its first run), say how far the first set's
figures carry: bench/data/nl_questions_2.jsonl (click 8.5.1, rich 15.0.0, starlette 1.10.0),
nl_questions_3.jsonl (jinja2 3.1.6, uvicorn 0.55.0, anyio 4.16.0) and nl_questions_4.jsonl
(markdown-it-py 4.3.0, packaging 26.4, tqdm 4.70.1); bench/archive/RESULTS-journal.md (sixteenth pass) says which
of them later choices were weighed on. Their codebases are installed dependencies, so a release
that moves a gold file stops the run with the gold-file error above; those are the versions the
questions were written against (install them into another folder and pass `--root NAME=PATH`).
`--questions` takes several files and measures them as one set (`--questions
bench/data/nl_questions_{2,3,4}.jsonl`: the 180 fresh questions).

Modes: lexical and vector (the single retrievers), hybrid-fused (the hand-set fusion of
index/rank/evidence.py) and hybrid (the product: fusion, history and the learned second stage). The
second stage was trained on bug reports only, so this set shows whether it costs plain questions.
Every mode's figures over all the questions come with 95 % bootstrap intervals, and hybrid's gain
over each other mode with a paired one (bridge/measure/intervals.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bridge.measure.evaluate import Question, QuestionResult, aggregate, ranked_files
from bridge.measure.intervals import RESAMPLES, markdown_rows, versus
from index.build import BuildOptions, build_index, fill_vectors
from index.embed import load_embedder, resolve_spec
from index.search import MAX_K, Searcher, file_ranking
from index.store import default_home
from index.types import Selection

__all__ = ["main"]

REPO = Path(__file__).resolve().parent.parent
DEFAULT_QUESTIONS = Path(__file__).resolve().parent / "data" / "nl_questions.jsonl"
DEFAULT_OUT = Path(__file__).resolve().parent / "out"
MODES = ("lexical", "vector", "hybrid-fused", "hybrid")
BRIDGE_COMMIT = "fdcfd3fcad47133f9204aab5b9cc37f1c3c2f5c7"  # where bench/data/nl_questions.jsonl was written


class BenchError(Exception):
    """A codebase that cannot be read as the questions expect it; the message says what to do."""


def installed_package(name: str) -> Path:
    """The folder Python imports package `name` from (asyncio from the standard library, httpx or
    any other installed package)."""
    spec = importlib.util.find_spec(name) if name.isidentifier() else None
    if spec is None or not spec.submodule_search_locations:
        raise BenchError(f"no package {name!r} to read: install it, or point --root {name}=PATH at its code")
    return Path(next(iter(spec.submodule_search_locations)))


def pinned_checkout(repo: Path, commit: str, target: Path) -> Path:
    """`target` as a clone of `repo` at `commit` (history: the commit's ancestors), reused when it
    is one already."""
    head = subprocess.run(["git", "-C", str(target), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0 and head.stdout.strip() == commit:
        return target
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    for command in (["git", "clone", "--quiet", "--shared", "--no-checkout", str(repo), str(target)],
                    ["git", "-C", str(target), "checkout", "--quiet", "--detach", commit]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise BenchError(f"cannot check out {repo} at {commit[:12]} ({done.stderr.strip().splitlines()[-1:]}): "
                             "use a clone with full history, or --root bridge=PATH")
    return target


def check_gold(questions: Sequence[dict[str, Any]], name: str, paths: set[str]) -> None:
    """Every gold file of codebase `name`'s questions is among its indexed `paths`."""
    missing = sorted({g for q in questions if q["codebase"] == name for g in q["gold_files"]} - paths)
    if missing:
        raise BenchError(f"{name} lacks gold file(s) {', '.join(missing)}: point --root {name}=PATH at the code "
                         "the questions were written against")


def _copy_python(source: Path, target: Path) -> Path:
    shutil.rmtree(target, ignore_errors=True)
    for path in source.rglob("*.py"):
        dest = target / path.relative_to(source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    return target


def _rank(searcher: Searcher, query: str, mode: str) -> tuple[list[str], float]:
    started = time.perf_counter()
    if mode == "hybrid-fused":
        files = [path for path, _ in file_ranking(searcher, query, learned=False)]
    else:
        hits = searcher.search(query, k=MAX_K, mode=mode).hits
        files = ranked_files([hit.path for hit in hits])
    return files, (time.perf_counter() - started) * 1000


def index_selection(name: str, root: Path, questions_files: Sequence[Path]) -> Selection:
    """Leave the questions files out of a codebase that holds them (this repository, live or
    pinned): they repeat every question word for word."""
    home = (REPO if name == "bridge" else root).resolve()
    resolved = [f.resolve() for f in questions_files]
    inside = [f.relative_to(home).as_posix() for f in resolved if f.is_relative_to(home)]
    return Selection(exclude=(*inside, "bench/out/")) if inside else Selection()


def load_sets(files: Sequence[Path]) -> list[dict[str, Any]]:
    """The questions of every file, in order; an id asked twice is an error (the ranked lists and
    the paired intervals are kept per id)."""
    questions = [json.loads(line) for f in files for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    twice = sorted(i for i, n in Counter(q["id"] for q in questions).items() if n > 1)
    if twice:
        more = f" and {len(twice) - 3} more" if len(twice) > 3 else ""
        raise BenchError(f"question id(s) {', '.join(twice[:3])}{more} asked more than once: give each set once")
    return questions


def run(questions: list[dict[str, Any]], roots: dict[str, Path], work: Path, log: Any,
        questions_files: Sequence[Path] = (DEFAULT_QUESTIONS,), embedder_spec: str = "minilm",
        keep: bool = False) -> dict[str, Any]:
    embedder_spec = resolve_spec(embedder_spec) or embedder_spec  # the MiniLM the indexes get here, loaded once
    embedder = load_embedder(embedder_spec, cache_dir=default_home() / "models")
    results: dict[str, dict[str, list[QuestionResult]]] = {}
    ranked: dict[str, dict[str, list[str]]] = {}
    for name in sorted({q["codebase"] for q in questions}):
        source = work / "src" / name
        if name == "bridge":
            root = roots.get(name) or pinned_checkout(REPO, BRIDGE_COMMIT, source)
        elif keep and source.is_dir():
            root = source
        else:
            root = _copy_python(roots.get(name) or installed_package(name), source)
        index_dir = work / "indexes" / name
        build_index(root, index_dir, BuildOptions(index_selection(name, root, questions_files), embedder=embedder_spec,
                                                 rebuild=not keep))
        fill_vectors(index_dir, embedder=embedder)
        searcher = Searcher(index_dir, embedder_loader=lambda _spec: embedder)
        check_gold(questions, name, set(searcher.manifest.files))
        history = searcher.history()
        log(f"{name}: indexed {root} ({len(history.commits) if history else 0} past commits)")
        for q in (q for q in questions if q["codebase"] == name):
            question = Question(q["id"], q["query"], tuple(q["gold_files"]), repo=name)
            for mode in MODES:
                files, ms = _rank(searcher, q["query"], mode)
                results.setdefault(mode, {}).setdefault(name, []).append(QuestionResult(question, tuple(files), (), ms))
                ranked.setdefault(q["id"], {})[mode] = files[:10]
    columns = ("n", "recall_at_1", "recall_at_5", "mrr", "median_latency_ms")

    def row(items: list[QuestionResult], mode: str) -> dict[str, Any]:
        return {k: v for k, v in asdict(aggregate(mode, items)).items() if k in columns}

    every = {mode: [r for rs in by.values() for r in rs] for mode, by in results.items()}
    summary = {mode: {"all": row(every[mode], mode), **{name: row(rs, mode) for name, rs in by.items()}}
               for mode, by in results.items()}
    per_mode, gains = versus(every)
    return {"summary": summary, "intervals": per_mode, "differences": gains, "ranked": ranked}


def markdown(result: dict[str, Any]) -> str:
    summary = result["summary"]
    groups = list(next(iter(summary.values())))
    lines = ["| mode | " + " | ".join(f"{g} R@1 | {g} R@5" for g in groups) + " | all MRR |",
             "|---|" + "---:|---:|" * len(groups) + "---:|"]
    for mode, by in summary.items():
        cells = " | ".join(f"{by[g]['recall_at_1']:.3f} | {by[g]['recall_at_5']:.3f}" for g in groups)
        lines.append(f"| {mode} | {cells} | {by['all']['mrr']:.3f} |")
    lines += ["", f"95 % intervals over all the questions (bootstrap, {RESAMPLES:,} resamples; a difference is paired; "
              "the target is hybrid − lexical R@1 ≥ +0.15):", "",
              *markdown_rows(result["intervals"], result["differences"])]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=Path, nargs="+", default=[DEFAULT_QUESTIONS],
                        help="one or more questions files, measured together")
    parser.add_argument("--work", type=Path, default=default_home() / "bench" / "nl")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--root", action="append", default=[], help="NAME=PATH: where a codebase is")
    parser.add_argument("--embedder", default="minilm",
                        help="minilm (the product's default: its int8 variant where the CPU has no AMX), minilm-int8 or static")
    parser.add_argument("--keep", action="store_true", help="update the indexes of an earlier run in --work")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    roots: dict[str, Path] = {}
    for item in args.root:
        name, _, path = item.partition("=")
        roots[name] = Path(path)

    def log(message: str) -> None:
        print(f"{time.perf_counter() - started:7.1f}s {message}", file=sys.stderr, flush=True)

    try:
        result = run(load_sets(args.questions), roots, args.work, log, args.questions, args.embedder, args.keep)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "nl_bench.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    text = markdown(result)
    (args.out_dir / "nl_bench.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
