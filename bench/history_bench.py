"""What indexing the git history costs: a first index and a one-commit re-index, with and without it.

    python -m bench.history_bench GIT_REPO [--commit SHA] [--work DIR] [--embedder SPEC]

Clones GIT_REPO (sharing its objects; the source is not written) into WORK, checks out --commit
(default: its HEAD), then times a first index with history off and on, and after one new commit
touching one file, the incremental re-index with history on; prints one Markdown table and writes
WORK/history_bench.json. Without --embedder the index is lexical only and keeps no subject
vectors; with one, each index is `build_index` then `fill_vectors`, as `bridge index` does, and
the history embeds its commit subjects with MiniLM (index/history/subjects.py). `static`, the fastest
model, leaves the history its largest share.

Each index is timed twice: when it is searchable (`build_index` returns: lexical, with the
history's commits and BM25 votes) and when it is complete (`fill_vectors` returns: chunk vectors,
and the subject vectors a first index leaves for the fill).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from index.build import BuildOptions, build_index, fill_vectors
from index.history import History

__all__ = ["main"]


def _git(cwd: Path, *args: str) -> None:
    env = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@x", "HOME": str(cwd), "PATH": os.environ.get("PATH", "")}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _timed_build(root: Path, index_dir: Path, history: bool, embedder: str | None) -> tuple[float, float, float]:
    """(seconds until searchable, seconds until complete, the build's history part)."""
    started = time.perf_counter()
    report = build_index(root, index_dir, BuildOptions(embedder=embedder, history=history))
    searchable = time.perf_counter() - started
    if embedder is not None:
        fill_vectors(index_dir)
    return searchable, time.perf_counter() - started, report.seconds.get("history", 0.0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--embedder", default=None, help="a model spec (e.g. static); default: lexical only")
    args = parser.parse_args(argv)
    checkout = args.work / "checkout"
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(args.repo), str(checkout)], check=True)
    _git(checkout, "checkout", "-q", "--detach", args.commit)
    off, off_done, _ = _timed_build(checkout, args.work / "index-off", False, args.embedder)
    on, on_done, history_first = _timed_build(checkout, args.work / "index-on", True, args.embedder)
    loaded = History.load(args.work / "index-on")
    target = next(p for p in sorted(checkout.rglob("*.py")) if ".git" not in p.parts)
    target.write_text(target.read_text(encoding="utf-8") + "\n# touched by bench/history_bench.py\n", encoding="utf-8")
    _git(checkout, "commit", "-q", "-am", "Touch one file")
    again, again_done, history_again = _timed_build(checkout, args.work / "index-on", True, args.embedder)
    result = {"repo": str(args.repo), "commit": args.commit, "embedder": args.embedder,
              "subject_vectors": loaded is not None and loaded.subjects is not None,
              "commits": len(loaded.commits) if loaded else 0,
              "first_off_searchable_s": round(off, 2), "first_off_complete_s": round(off_done, 2),
              "first_on_searchable_s": round(on, 2), "first_on_complete_s": round(on_done, 2),
              "history_in_build_s": round(history_first, 2),
              "added_share_searchable": round(on / off - 1, 3), "added_share_complete": round(on_done / off_done - 1, 3),
              "incremental_s": round(again_done, 2), "incremental_searchable_s": round(again, 2),
              "history_incremental_s": round(history_again, 3)}
    (args.work / "history_bench.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print("| repository | commits kept | first index, no history: searchable / complete | with history "
          "| history adds: searchable / complete | history part of the build "
          "| re-index after 1 commit | history part of it |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {args.repo.parent.name} | {result['commits']} | {off:.1f} / {off_done:.1f} s | {on:.1f} / {on_done:.1f} s "
          f"| {result['added_share_searchable']:.0%} / {result['added_share_complete']:.0%} | {history_first:.2f} s "
          f"| {again_done:.2f} s | {history_again:.3f} s |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
