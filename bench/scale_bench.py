"""Monorepo scale: a tree of about a million chunks, this engine next to a reference engine.

    python -m bench.scale_bench --corpora DIR --questions FILE --tree DIR --reference DIR
                                [--trees-per-repo 6] [--queries 30]

`--corpora` holds the shared/bench source trees (NAME@COMMIT folders, built from the public
SWE-bench repositories by shared/bench/materialize.sh); `--questions` is the SWE-bench-style JSONL
file whose `query` texts are searched. The tree is made once in `--tree` (outside the
repository, never committed): up to `--trees-per-repo` commits of every repository side by side,
hard-linked (the one file the re-index step edits is replaced, never written through the link).
`--reference` is a checkout of the engine to compare with
(e.g. `git archive main | tar -x -C DIR`); both engines run from their own source in child
processes on the same tree:

1. `bridge index --no-vectors` from scratch: wall time, peak RSS (the child's own VmHWM), size
   of the index folder;
2. cold `bridge search --mode lexical`: fresh processes, wall time and took_ms;
3. warm lexical search in one process: p50 / p95 of took_ms over `--queries` questions;
4. one-file re-index: one file edited, `bridge index` again (wall time), then the edit undone.

Every step reports wall time and CPU time (user + sys): on a shared machine the CPU time is what
idle cores would need. `--reindex-only N` skips 1-3 and times N one-file re-indexes per engine
on the indexes an earlier run left in `--work`.

The engines run at the same time (each one's steps in order), so both see the same load.

Hybrid search with static vectors is not measured here: embedding a million chunks takes longer
than this benchmark's budget on two cores. Writes bench/out/scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.paths import reproduce

__all__ = ["main", "make_tree"]

_ROOT = Path(__file__).resolve().parents[1]
_OUT = _ROOT / "bench" / "out"
# A child that runs the CLI and then reports its own peak RSS (kB) on the last stderr line.
_CLI = (
    "import sys; from bridge.cli import main\n"
    "code = 0\n"
    "try:\n    main()\nexcept SystemExit as stop:\n    code = stop.code or 0\n"
    "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
    "print('VmHWM', hwm, file=sys.stderr)\n"
    "import resource\n"
    "cpu = sum(getattr(resource.getrusage(w), f) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)"
    " for f in ('ru_utime', 'ru_stime'))\n"
    "print('CPU', cpu, file=sys.stderr)\nsys.exit(code)\n"
)
_WARM = (
    "import json, sys\nfrom pathlib import Path\nfrom index.search.searcher import Searcher\n"
    "s = Searcher(Path(sys.argv[1])); queries = json.loads(sys.argv[2]); s.search(queries[0], mode='lexical')\n"
    "print(json.dumps([s.search(q, k=10, mode='lexical').took_ms for q in queries]))\n"
)


def make_tree(corpora: Path, tree: Path, per_repo: int) -> list[str]:
    """Hard-link up to `per_repo` source trees of every repository from `corpora` (one folder
    per NAME@COMMIT, as shared/bench/materialize.sh makes them) into `tree`; the folder names."""
    by_repo: dict[str, list[Path]] = {}
    for folder in sorted(p for p in corpora.iterdir() if p.is_dir() and "@" in p.name):
        by_repo.setdefault(folder.name.split("@")[0], []).append(folder)
    tree.mkdir(parents=True, exist_ok=True)
    names = []
    for folders in by_repo.values():
        for folder in folders[:per_repo]:
            names.append(folder.name)
            if not (tree / folder.name).exists():
                subprocess.run(["cp", "-al", str(folder), str(tree / folder.name)], check=True)
    return names


@dataclass(frozen=True)
class _Run:
    seconds: float  # wall time
    rss_mb: float  # the child's peak RSS
    cpu_s: float  # user + sys CPU of the child and its own children: what idle cores would need
    stdout: str


def _child(source: Path, argv: list[str], code: str = _CLI) -> _Run:
    """One child running `code` from the engine at `source`."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    t0 = time.perf_counter()
    proc = subprocess.run(["nice", "-n", "10", sys.executable, "-c", code, *argv], env=env, capture_output=True,
                          text=True, check=False, cwd=source)
    seconds = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(f"{argv[:2]} failed in {source}: {proc.stderr.strip()[-600:]}")
    lines = proc.stderr.splitlines()
    hwm = [line for line in lines if line.startswith("VmHWM")]
    cpu = [line for line in lines if line.startswith("CPU")]
    return _Run(seconds, int(hwm[-1].split()[1]) / 1024 if hwm else 0.0, float(cpu[-1].split()[1]) if cpu else 0.0,
                proc.stdout)


@dataclass(frozen=True)
class _Turns:
    barrier: threading.Barrier
    lock: threading.Lock


def _replace(path: Path, data: bytes) -> None:
    """Write `path` as a new file: the tree is hard-linked to the corpora, which must not change."""
    path.unlink()
    path.write_bytes(data)


def _size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def _engine(
    name: str, source: Path, tree: Path, index_dir: Path, queries: list[str], edit: Path, turn: _Turns
) -> dict[str, Any]:
    try:
        return _measure(name, source, tree, index_dir, queries, edit, turn)
    except BaseException:
        turn.barrier.abort()  # the other engines must not wait for this one
        raise


def _measure(
    name: str, source: Path, tree: Path, index_dir: Path, queries: list[str], edit: Path, turn: _Turns
) -> dict[str, Any]:
    shutil.rmtree(index_dir, ignore_errors=True)
    run = _child(source, ["index", str(tree), "--index-dir", str(index_dir), "--no-vectors", "--json"])
    built = json.loads(run.stdout)["build"]
    row: dict[str, Any] = {
        "engine": name, "index_s": round(run.seconds, 1), "index_cpu_s": round(run.cpu_s, 1),
        "peak_rss_mb": round(run.rss_mb), "index_mb": round(_size_mb(index_dir)),
        "files": built.get("files"), "chunks": built.get("chunks"), "load_at_end": os.getloadavg()[0],
    }
    cold = []
    for query in queries[:5]:
        run = _child(source, ["search", query, "--index-dir", str(index_dir), "--mode", "lexical", "--json"])
        cold.append((run.seconds, json.loads(run.stdout)["took_ms"], run.rss_mb))
    row["cold_lexical_s_median"] = round(statistics.median(c[0] for c in cold), 2)
    row["cold_lexical_took_ms_median"] = round(statistics.median(c[1] for c in cold), 1)
    row["cold_lexical_rss_mb"] = round(max(c[2] for c in cold))
    took = sorted(json.loads(_child(source, [str(index_dir), json.dumps(queries)], _WARM).stdout))
    row["warm_lexical_p50_ms"] = round(statistics.median(took), 1)
    row["warm_lexical_p95_ms"] = round(took[int(0.95 * (len(took) - 1))], 1)
    turn.barrier.wait()  # no engine edits the tree while another is still building from it
    with turn.lock:  # one engine at a time edits, re-indexes and restores the file
        row.update(_one_file(source, tree, index_dir, edit))
    return row


def _one_file(source: Path, tree: Path, index_dir: Path, edit: Path) -> dict[str, Any]:
    row: dict[str, Any] = {}
    original = edit.read_bytes()
    try:
        _replace(edit, original + b"\n# scale bench: one edited line\n")
        run = _child(source, ["index", str(tree), "--index-dir", str(index_dir), "--no-vectors", "--json"])
        row["one_file_reindex_s"] = round(run.seconds, 1)
        row["one_file_reindex_cpu_s"] = round(run.cpu_s, 1)
        row["one_file_reindex_rss_mb"] = round(run.rss_mb)
        build = json.loads(run.stdout)["build"]
        row["one_file_reindex_new_chunks"] = build["new_chunks"]
        row["one_file_reindex_phases_s"] = {k: round(v, 2) for k, v in build.get("seconds", {}).items()}
    finally:
        _replace(edit, original)
    return row


def _reindex_only(name: str, source: Path, tree: Path, index_dir: Path, edit: Path, repeats: int) -> dict[str, Any]:
    """The one-file step alone on an index an earlier run left: brought up to date with the tree
    first, then `repeats` edits (each restored and indexed again before the next)."""
    argv = ["index", str(tree), "--index-dir", str(index_dir), "--no-vectors", "--json"]
    sync = _child(source, argv)
    runs = []
    for _ in range(repeats):
        runs.append(_one_file(source, tree, index_dir, edit))
        _child(source, argv)
    return {"engine": name, "sync_s": round(sync.seconds, 1), "sync_cpu_s": round(sync.cpu_s, 1), "runs": runs,
            "load_at_end": os.getloadavg()[0]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", type=Path, required=True, help="folder of NAME@COMMIT source trees")
    parser.add_argument("--questions", type=Path, required=True, help="SWE-bench-style questions (JSONL)")
    parser.add_argument("--tree", type=Path, required=True, help="where the big tree is unpacked (outside the repo)")
    parser.add_argument("--reference", type=Path, help="checkout of the engine to compare with (skipped if absent)")
    parser.add_argument("--trees-per-repo", type=int, default=6)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--work", type=Path, default=_OUT / "scale", help="where the two indexes are written")
    parser.add_argument("--out", type=Path, default=_OUT / "scale.json")
    parser.add_argument("--reindex-only", type=int, metavar="N", default=0,
                        help="only time N one-file re-indexes per engine on the indexes already in --work")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    names = make_tree(args.corpora, args.tree, args.trees_per_repo)
    result: dict[str, Any] = {"trees": len(names), "tree_mb": round(_size_mb(args.tree)),
                              "make_tree_s": round(time.perf_counter() - t0, 1), "cpus": os.cpu_count(),
                              "load_at_start": os.getloadavg()[0]}
    rows = [json.loads(line) for line in args.questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    queries = [" ".join(r["query"].split()[:40]) for r in rows[: args.queries]]
    edit = min((args.tree / names[0]).rglob("*.py"))
    engines = [("this", _ROOT)] + ([("reference", args.reference.resolve())] if args.reference else [])
    if args.reindex_only:  # engines one after the other: each re-index edits the same file
        result["reindex"] = [_reindex_only(n, src, args.tree, args.work / n, edit, args.reindex_only)
                             for n, src in engines]
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result["reindex"], indent=1))
        return 0
    # The engines run side by side (each one's steps in order), so that both see the same machine
    # load; the one-file edit is made in each engine's own copy of that file's folder.
    with ThreadPoolExecutor(max_workers=len(engines)) as pool:
        turns = _Turns(threading.Barrier(len(engines)), threading.Lock())
        jobs = [pool.submit(_engine, n, src, args.tree, args.work / n, queries, edit, turns) for n, src in engines]
        result["engines"] = [job.result() for job in jobs]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{result['trees']} trees, {result['tree_mb']} MB; made in {result['make_tree_s']} s")
    keys = ("chunks", "index_s", "index_cpu_s", "peak_rss_mb", "index_mb", "cold_lexical_s_median", "cold_lexical_took_ms_median",
            "warm_lexical_p50_ms", "warm_lexical_p95_ms", "one_file_reindex_s", "one_file_reindex_cpu_s",
            "one_file_reindex_rss_mb")
    print(f"{'measure':<28}" + "".join(f"{e['engine']:>14}" for e in result["engines"]))
    for key in keys:
        print(f"{key:<28}" + "".join(f"{e.get(key)!s:>14}" for e in result["engines"]))
    print(f"wrote {args.out}")
    print(reproduce("bench.scale_bench", argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
