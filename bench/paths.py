"""Where the benchmarks find their inputs and keep their work; nothing names one machine's paths.

Flags win; then these environment variables; then defaults relative to this repository (the
steering checkout's `../shared/bench`) or to the cache folder (`$BRIDGE_HOME/bench`):

- `BRIDGE_BENCH_SHARED`  the public benchmark folder (`swebench_lite.jsonl`, `materialize.sh`)
- `BRIDGE_BENCH_HOME`    corpora, git mirrors and indexes the benchmarks build (large; never committed)
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from index.store import default_home

__all__ = ["OUT", "REPO", "add_kept_arguments", "bench_home", "corpora", "materialize_script", "mirrors", "questions", "reproduce",
           "shared_bench"]

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"  # JSON and tables of each run (git-ignored)


def shared_bench() -> Path:
    return Path(os.environ.get("BRIDGE_BENCH_SHARED") or REPO.parent / "shared" / "bench")


def bench_home() -> Path:
    return Path(os.environ.get("BRIDGE_BENCH_HOME") or default_home() / "bench")


def questions() -> Path:
    return shared_bench() / "swebench_lite.jsonl"


def materialize_script() -> Path:
    return shared_bench() / "materialize.sh"


def corpora() -> Path:
    return bench_home() / "corpora"


def mirrors() -> Path:
    """Bare git mirrors as OWNER+NAME/repo (the shape `git clone --mirror` and the fetch tool give)."""
    return bench_home() / "mirrors"


def add_kept_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of a benchmark that reads the indexes bench/swebench.py keeps: the questions, the
    trees and mirrors, that script's work folder, the embedder, an output folder and a repository filter."""
    parser.add_argument("questions", nargs="?", type=Path, default=questions())
    parser.add_argument("--corpora", type=Path, default=corpora(), help="one tree per base commit")
    parser.add_argument("--mirrors", type=Path, default=mirrors(), help="bare mirrors as OWNER+NAME/repo")
    parser.add_argument("--work", type=Path, default=bench_home() / "swebench", help="the --work folder of bench.swebench")
    parser.add_argument("--embedder", default="static", help="the embedder the kept indexes were built with")
    parser.add_argument("--out-dir", type=Path, default=OUT)
    parser.add_argument("--repos", default="", help="comma-separated repository names (default: all)")


def reproduce(module: str, argv: Sequence[str] | None) -> str:
    """The line every benchmark ends with: the command that gave its figures, for bench/RESULTS.md."""
    args = list(argv) if argv is not None else sys.argv[1:]
    return "reproduce (from the repository root): " + " ".join(["python -m", module, *args])
