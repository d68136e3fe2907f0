"""How soon `bridge serve --stdio` answers `initialize` and `tools/list`, against a baseline commit.

    python -m bench.stdio_start_bench [--repo PATH] [--runs 7] [--cold-runs 3] [--base-commit cd91aed]

An MCP host starts the server as a child and waits for it: llama-server gives each server 10 s to list
its tools, then runs without them. This starts the server as such a host does (`serve --stdio --repo
PATH`, the arguments `bridge config` prints, watching and vectors on), sends `initialize` at once, and
times the answer; then `notifications/initialized` and `tools/list`. Each run is a fresh process.

Both trees run in the same benchmark, alternating, on the same index and the same Python: this
checkout, and the baseline commit's code (exported with `git archive` into a temporary folder and put
first on PYTHONPATH). Warm runs follow one unmeasured start of each tree; cold runs drop the page cache
first (`echo 3 > /proc/sys/vm/drop_caches`, root only; skipped, and said so, otherwise).

The index is built once beforehand (`--embedder hash`: vectors present, no model download; the
embedder's own start-up is the index's business, not the handshake's). Writes bench/out/stdio_start.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.paths import OUT, REPO, reproduce

__all__ = ["main", "run"]

_INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
_INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}


def _send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _reply(proc: subprocess.Popen[bytes], id_: int) -> dict[str, Any]:
    assert proc.stdout is not None
    while line := proc.stdout.readline():
        message = json.loads(line)
        if message.get("id") == id_:
            return dict(message)
    raise RuntimeError(f"the server exited before answering request {id_}")


def one_start(tree: Path, repo: Path, home: Path) -> dict[str, float]:
    """Seconds from spawn to the `initialize` answer and to the `tools/list` answer, and to exit."""
    env = {**os.environ, "BRIDGE_HOME": str(home), "PYTHONPATH": str(tree)}
    argv = [sys.executable, "-m", "bridge", "serve", "--stdio", "--repo", str(repo)]
    t0 = time.perf_counter()
    # cwd: `python -m` puts the working directory first on sys.path, before PYTHONPATH
    proc = subprocess.Popen(argv, env=env, cwd=tree, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        _send(proc, _INITIALIZE)
        if "result" not in _reply(proc, 1):
            raise RuntimeError(f"initialize failed in {tree}")
        initialize_s = time.perf_counter() - t0
        _send(proc, _INITIALIZED)
        _send(proc, _TOOLS)
        tools = _reply(proc, 2)["result"]["tools"]
        tools_s = time.perf_counter() - t0
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(60)
        return {"initialize_s": initialize_s, "tools_list_s": tools_s, "exit_s": time.perf_counter() - t0, "tools": len(tools)}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def _drop_caches() -> bool:
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def _cpu() -> dict[str, Any]:
    model, flags = platform.processor() or "unknown", []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = [f for f in line.split(":", 1)[1].split() if f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "fma")]
                break
    except OSError:
        pass
    return {"model": model, "cores": os.cpu_count(), "flags": flags, "loadavg_before": list(os.getloadavg())}


def _summary(rows: list[dict[str, float]]) -> dict[str, Any]:
    return {key: {"median": round(statistics.median(r[key] for r in rows), 3), "all": [round(r[key], 3) for r in rows]}
            for key in ("initialize_s", "tools_list_s")} if rows else {}


def run(repo: Path, runs: int, cold_runs: int, base_commit: str, work: Path) -> dict[str, Any]:
    base = work / "base"
    base.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", base_commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
    trees = {"baseline": base, "this": REPO}
    home = work / "home"
    subprocess.run([sys.executable, "-m", "bridge", "index", str(repo), "--embedder", "hash", "--json"],
                   env={**os.environ, "BRIDGE_HOME": str(home), "PYTHONPATH": str(REPO)}, cwd=REPO, check=True, capture_output=True)
    for name, tree in trees.items():  # each tree must run its own code
        probe = subprocess.run([sys.executable, "-c", "import bridge; print(bridge.__file__)"], env={**os.environ, "PYTHONPATH": str(tree)},
                               cwd=tree, check=True, capture_output=True, text=True).stdout.strip()
        if not Path(probe).resolve().is_relative_to(tree.resolve()):
            raise RuntimeError(f"the {name} tree imports bridge from {probe}, not from {tree}")
    result: dict[str, Any] = {"repo": str(repo), "base_commit": base_commit, "cpu": _cpu(), "python": platform.python_version()}
    for tree in trees.values():  # unmeasured: byte-compile each tree once, fill the page cache
        one_start(tree, repo, home)
    warm: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _ in range(runs):
        for name, tree in trees.items():
            warm[name].append(one_start(tree, repo, home))
    cold: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    result["cold_cache"] = "dropped before each run" if _drop_caches() else "not measured: dropping the page cache needs root"
    if result["cold_cache"].startswith("dropped"):
        for _ in range(cold_runs):
            for name, tree in trees.items():
                _drop_caches()
                cold[name].append(one_start(tree, repo, home))
    result["warm"] = {name: _summary(rows) for name, rows in warm.items()}
    result["cold"] = {name: _summary(rows) for name, rows in cold.items()}
    result["tools"] = {name: rows[0]["tools"] for name, rows in warm.items()}
    for kind in ("warm", "cold"):
        if result[kind]["this"]:
            ratio = result[kind]["this"]["initialize_s"]["median"] / result[kind]["baseline"]["initialize_s"]["median"]
            result[kind]["ratio_initialize"] = round(ratio, 3)
    result["loadavg_after"] = list(os.getloadavg())
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO, help="repository to serve (default: this one)")
    parser.add_argument("--runs", type=int, default=7, help="warm starts per tree")
    parser.add_argument("--cold-runs", type=int, default=3, help="starts per tree after dropping the page cache")
    parser.add_argument("--base-commit", default="cd91aed", help="the baseline: the code before this change")
    parser.add_argument("--out", type=Path, default=OUT / "stdio_start.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = run(args.repo.resolve(), args.runs, args.cold_runs, args.base_commit, Path(tmp))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    cpu = result["cpu"]
    print(f"CPU: {cpu['model']} ({cpu['cores']} cores, {' '.join(cpu['flags'])}); Python {result['python']}; "
          f"load average before {cpu['loadavg_before'][0]:.1f}, after {result['loadavg_after'][0]:.1f}")
    print(f"{'cache':<6} {'tree':<10} {'initialize (median)':>20} {'tools/list (median)':>20}  runs")
    for kind in ("warm", "cold"):
        for name in ("baseline", "this"):
            row = result[kind][name]
            if row:
                print(f"{kind:<6} {name:<10} {row['initialize_s']['median']:>18.2f} s {row['tools_list_s']['median']:>18.2f} s"
                      f"  {len(row['initialize_s']['all'])}")
        if "ratio_initialize" in result[kind]:
            print(f"{kind:<6} this / baseline (initialize): {result[kind]['ratio_initialize']:.0%} (target <= 40 %)")
    if not result["cold"]["this"]:
        print(f"cold: {result['cold_cache']}")
    print(f"wrote {args.out}")
    print(reproduce("bench.stdio_start_bench", argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
