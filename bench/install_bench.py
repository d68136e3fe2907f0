"""The search-and-serve install: the wheel without extras into a fresh virtualenv, as a user runs it.

    python -m bench.install_bench [--runs 3] [--out bench/out/install]

Builds the project's wheel once (`pip wheel --no-deps`), installs it once untimed to warm pip's cache,
then `--runs` times into a new virtualenv each: `pip install --only-binary :all: WHEEL` (binary wheels
only, so an install that needed a compiler fails instead of building one; the report also checks that
no package was built from an sdist). Per run: seconds for the install (the venv's creation apart),
size of the venv on disk, and whether `bridge --help` and `bridge config cline` run from it. Baseline
in the same run: an empty virtualenv (the floor any install starts from). Median of the runs; CPU
count and model recorded. Targets (issue 37): no compiler, <= 350 MB, <= 2 min on 2 cores with a warm
pip cache. Writes OUT.json and OUT.md (table).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.paths import OUT, REPO

TARGET_MB = 350
TARGET_S = 120


def cpu() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpus": usable, "model": model, "python": platform.python_version(), "load_1m": round(os.getloadavg()[0], 2)}


def size_mb(folder: Path) -> float:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            path = Path(root) / name
            if not path.is_symlink():
                total += path.stat().st_size
    return round(total / 2**20, 1)


def clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH: a checkout on it would look like an installed project to pip."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def build_wheel(where: Path) -> Path:
    """The wheel, built from a copy of the tracked files (a build writes *.egg-info into its source)."""
    source = where / "source"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(where), str(source)],
                   check=True, capture_output=True, env=clean_env())
    wheel, = where.glob("mcp_retrieval_bridge-*.whl")
    return wheel


def new_venv(where: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    return time.perf_counter() - start


def install(venv: Path, wheel: Path) -> tuple[float, str]:
    """Seconds for `pip install --only-binary :all: WHEEL`, and pip's verbose log (to find any sdist build)."""
    start = time.perf_counter()
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-v", "--disable-pip-version-check", "--only-binary", ":all:",
         str(wheel)], capture_output=True, text=True, check=False, env=clean_env(),
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the install failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return seconds, done.stdout


def works(venv: Path) -> bool:
    env = clean_env()
    bridge = str(venv / "bin" / "bridge")
    return all(
        subprocess.run(command, capture_output=True, env=env, check=False, timeout=120).returncode == 0
        for command in ([bridge, "--help"], [bridge, "config", "cline"])
    )


def built_from_source(log: str) -> list[str]:
    """Packages pip built (from an sdist: a compiler may have run) according to its verbose log."""
    return sorted({line.split("Building wheel for ", 1)[1].split(" ")[0] for line in log.splitlines()
                   if "Building wheel for " in line})


def installed(venv: Path) -> list[str]:
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
                          capture_output=True, text=True, check=True, env=clean_env())
    return done.stdout.split()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT / "install")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="install-bench-"))
    try:
        wheel = build_wheel(scratch / "dist")
        floor = scratch / "empty"
        floor_s = new_venv(floor)
        warm = scratch / "warm"
        new_venv(warm)
        install(warm, wheel)  # fills pip's cache; not counted
        runs: list[dict[str, Any]] = []
        packages: list[str] = []
        for n in range(args.runs):
            venv = scratch / f"run{n}"
            venv_s = new_venv(venv)
            seconds, log = install(venv, wheel)
            runs.append({"venv_s": round(venv_s, 1), "install_s": round(seconds, 1), "size_mb": size_mb(venv),
                         "built_from_source": built_from_source(log), "works": works(venv)})
            packages = installed(venv)
            shutil.rmtree(venv)
        median_s = statistics.median(r["install_s"] for r in runs)
        median_mb = statistics.median(r["size_mb"] for r in runs)
        compiled = sorted({p for r in runs for p in r["built_from_source"]})
        report: dict[str, Any] = {
            "command": "python -m bench.install_bench " + " ".join(argv if argv is not None else sys.argv[1:]),
            "machine": cpu(),
            "wheel": wheel.name,
            "baseline_empty_venv": {"venv_s": round(floor_s, 1), "size_mb": size_mb(floor)},
            "runs": runs,
            "median": {"install_s": median_s, "size_mb": median_mb},
            "packages": packages,
            "targets": {"no_compiler": not compiled, "size_mb<=350": median_mb <= TARGET_MB,
                        "install_s<=120": median_s <= TARGET_S, "commands_run": all(r["works"] for r in runs)},
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    base = report["baseline_empty_venv"]
    rows = [
        "| install | seconds (median) | venv MB | built from an sdist | bridge runs |",
        "|---|---:|---:|---|---|",
        f"| empty venv (baseline) | {base['venv_s']} (venv only) | {base['size_mb']} | - | - |",
        f"| core wheel, no extras, warm cache ({args.runs} runs) | {median_s} | {median_mb} | "
        f"{', '.join(compiled) or 'none'} | {report['targets']['commands_run']} |",
    ]
    table = "\n".join(rows) + f"\n\n{len(packages)} packages; machine {report['machine']}; targets {report['targets']}\n"
    args.out.with_suffix(".md").write_text(table)
    print(table)
    return 0 if all(report["targets"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
