"""Where the benchmarks find their inputs and keep their work; nothing names one machine's paths.

Flags win; then these environment variables; then defaults relative to this repository (the
steering checkout's `../shared/bench`) or to the cache folder (`$BRIDGE_HOME/bench`):

- `BRIDGE_BENCH_SHARED`  the public benchmark folder (`swebench_lite.jsonl`, `materialize.sh`)
- `BRIDGE_BENCH_HOME`    corpora, git mirrors and indexes the benchmarks build (large; never committed)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from index.store import default_home

__all__ = ["OUT", "REPO", "bench_home", "corpora", "materialize_script", "mirrors", "questions", "reproduce",
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


def reproduce(module: str, argv: Sequence[str] | None) -> str:
    """The line every benchmark ends with: the command that gave its figures, for bench/RESULTS.md."""
    args = list(argv) if argv is not None else sys.argv[1:]
    return "reproduce (from the repository root): " + " ".join(["python -m", module, *args])
