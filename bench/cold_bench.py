"""Cold `bridge search`: default (hybrid) mode against lexical, each a fresh process.

    python -m bench.cold_bench [--repo PATH] [--runs 5] [--embedder minilm]

Indexes `--repo` (default: this repository) with `--embedder` into a temporary BRIDGE_HOME (so
the ONNX export of the query model is part of the index run, as for a user), then alternates
`--runs` cold `bridge search --json` processes per mode on the same index. Reports the median
wall time and peak RSS per mode, the ratio hybrid / lexical (target <= 2.5x), the took_ms and
load_ms the JSON reported, and whether the hybrid process imported torch (it must not).

Peak RSS is the child's own VmHWM, read just before it exits. Writes bench/out/cold.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.paths import reproduce

__all__ = ["main", "run"]

_ROOT = Path(__file__).resolve().parents[1]
_OUT = _ROOT / "bench" / "out"
_QUERIES = ("where is the embedding cache written", "how does hybrid search fuse ranks")
# Runs the CLI in-process, then tells on stderr whether torch was imported along the way.
_PROBE = (
    "import sys; from bridge.cli import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr)\n"
)


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, str, str]:
    """(seconds, stdout, stderr) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(f"{' '.join(argv[3:6])} failed: {proc.stderr.strip()[-400:]}")
    return seconds, proc.stdout, proc.stderr


def run(repo: Path, runs: int, embedder: str, home: Path) -> dict[str, Any]:
    env = {**os.environ, "BRIDGE_HOME": str(home), "PYTHONPATH": str(_ROOT)}
    index_dir = home / "index"
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "bridge", "index", str(repo), "--index-dir", str(index_dir),
         "--embedder", embedder, "--json"],
        env=env, check=True, capture_output=True,
    )
    result: dict[str, Any] = {"repo": str(repo), "embedder": embedder, "index_s": round(time.perf_counter() - t0, 1)}
    samples: dict[str, list[dict[str, Any]]] = {"lexical": [], "hybrid": []}
    for n in range(runs):
        for mode in ("lexical", "hybrid"):
            query = _QUERIES[n % len(_QUERIES)]
            argv = [sys.executable, "-c", _PROBE, "search", query, "--index-dir", str(index_dir),
                    "--mode", mode, "--json"]
            seconds, out, err = _timed(argv, env)
            data = json.loads(out)
            samples[mode].append({
                "wall_s": seconds, "took_ms": data["took_ms"], "load_ms": data.get("load_ms", 0.0),
                "torch": "NO-TORCH" not in err,
            })
    for mode, rows in samples.items():
        result[mode] = {
            "wall_s_median": round(statistics.median(r["wall_s"] for r in rows), 3),
            "wall_s_all": [round(r["wall_s"], 3) for r in rows],
            "took_ms_median": round(statistics.median(r["took_ms"] for r in rows), 1),
            "load_ms_median": round(statistics.median(r["load_ms"] for r in rows), 1),
            "imported_torch": any(r["torch"] for r in rows),
        }
    result["peak_rss_mb"] = {mode: round(_rss_of(mode, index_dir, env), 1) for mode in ("lexical", "hybrid")}
    result["ratio_hybrid_vs_lexical"] = round(result["hybrid"]["wall_s_median"] / result["lexical"]["wall_s_median"], 2)
    return result


def _rss_of(mode: str, index_dir: Path, env: dict[str, str]) -> float:
    """Peak RSS (MB) of one more cold search: the child reads its own VmHWM before exiting."""
    probe = (
        "import sys; from bridge.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
        "print(int(hwm) / 1024, file=sys.stderr)\n"
    )
    argv = [sys.executable, "-c", probe, "search", _QUERIES[0], "--index-dir", str(index_dir), "--mode", mode, "--json"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    return float(proc.stderr.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=_ROOT, help="repository to index (default: this one)")
    parser.add_argument("--runs", type=int, default=5, help="cold processes per mode")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--out", type=Path, default=_OUT / "cold.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = run(args.repo.resolve(), args.runs, args.embedder, Path(tmp))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    lex, hyb = result["lexical"], result["hybrid"]
    print(f"index ({args.embedder}): {result['index_s']} s")
    for name, row in (("lexical", lex), ("hybrid (default)", hyb)):
        print(f"cold {name:<17} {row['wall_s_median']:.2f} s median, took_ms {row['took_ms_median']}, "
              f"load_ms {row['load_ms_median']}, peak RSS {result['peak_rss_mb'][name.split()[0]]} MB, "
              f"torch imported: {row['imported_torch']}")
    verdict = "ok" if result["ratio_hybrid_vs_lexical"] <= 2.5 else "ABOVE 2.5x"
    print(f"hybrid / lexical: {result['ratio_hybrid_vs_lexical']}x ({verdict}); wrote {args.out}")
    print(reproduce("bench.cold_bench", argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
