"""Load benchmark of `bridge serve`: many MCP clients over Streamable HTTP while the index is rebuilt.

    python bench/load_bench.py [--duration 60] [--clients 16] [--embedder static] [--mix search=0.7,read=0.3]

1. Copies the CPython stdlib (`sysconfig.get_paths()["stdlib"]`, .py files only, without test
   folders, site-packages and a few large generated or legacy packages, about 10k chunks) to a
   temporary folder and indexes it: BM25 plus dense vectors (`static` embedder by default, the
   fastest to build; its distilled table is cached under BRIDGE_HOME/models after the first run).
2. Starts `bridge serve` as a subprocess (token on, audit log on, watching off: the re-index is
   driven explicitly so it runs the whole time) and measures its RSS once the index is loaded.
3. Overhead: the same queries through `Searcher.search` in this process and through
   `search_code` over HTTP with one client, one at a time.
4. Load: `--clients` MCP sessions call a mix of `search_code`, `read_file` and `list_files`
   (`--mix`, default 70/30 search/read) for `--duration` seconds while one more client keeps
   editing a file and calling `refresh_index`. The server's RSS is sampled every second.

Prints a table and writes bench/out/load.json. Targets: 0 errors, p99 <= 200 ms, RSS <= 800 MB,
RSS growth between the first and last 10 s of the load <= 5 %.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SKIP = {
    "test", "tests", "idle_test", "site-packages", "__pycache__", "encodings", "pydoc_data", "idlelib",
    "distutils", "tkinter", "lib2to3", "turtledemo", "ensurepip", "email", "xml", "multiprocessing",
    "asyncio", "unittest",
}
QUERIES = [
    "parse a url into components", "json decoder error position", "thread pool executor submit",
    "read a zip archive member", "format a date with strftime", "http request headers",
    "compile a regular expression", "walk a directory tree", "temporary file cleanup",
    "subprocess pipe communicate timeout", "csv writer quoting", "hash a file sha256",
    "socket connect timeout", "pickle protocol version", "decimal rounding context",
    "logging handler formatter", "argparse add_argument choices", "shutil copytree ignore",
    "dataclass field default factory", "base64 decode padding", "gzip compress level",
    "sqlite3 connect isolation level", "random choice weights", "struct pack format",
    "textwrap dedent", "heapq merge sorted", "functools lru_cache maxsize", "typing get_type_hints",
    "tarfile extract filter", "ssl context verify mode", "smtp send message", "configparser interpolation",
    "inspect signature parameters", "tokenize generate tokens", "ast literal_eval", "pathlib glob pattern",
    "enum auto value", "contextlib suppress", "weakref finalize", "uuid4 random",
]


def copy_corpus(dst: Path) -> Path:
    src = Path(sysconfig.get_paths()["stdlib"])

    def ignore(folder: str, names: list[str]) -> list[str]:
        return [
            n for n in names
            if n in SKIP or n.startswith("config-3") or (not n.endswith(".py") and not Path(folder, n).is_dir())
        ]

    shutil.copytree(src, dst, ignore=ignore, symlinks=True)
    return dst


def build(corpus: Path, index_dir: Path, embedder: str) -> dict:
    from index.build import BuildOptions, build_index, fill_vectors

    t0 = time.perf_counter()
    report = build_index(corpus, index_dir, BuildOptions(embedder=embedder))
    t1 = time.perf_counter()
    fill = fill_vectors(index_dir)
    t2 = time.perf_counter()
    return {"files": report.files, "chunks": report.chunks, "embedded": fill.embedded_chunks,
            "lexical_s": round(t1 - t0, 2), "vectors_s": round(t2 - t1, 2), "embedder": embedder}


def start_server(corpus: Path, index_dir: Path, audit: Path, token: str) -> tuple[subprocess.Popen, str, list[str]]:
    env = dict(os.environ, BENCH_TOKEN=token, PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "bridge", "serve", "--repo", str(corpus), "--index-dir", str(index_dir),
               "--port", "0", "--token-env", "BENCH_TOKEN", "--no-watch", "--audit-log", str(audit)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    assert proc.stderr is not None
    lines: list[str] = []
    def drain() -> None:  # until the server exits; then the pipe is closed here, not left to the GC
        lines.extend(proc.stderr)  # type: ignore[arg-type]
        proc.stderr.close()  # type: ignore[union-attr]

    for line in proc.stderr:
        lines.append(line)
        if line.startswith("MCP endpoint: "):
            threading.Thread(target=drain, daemon=True).start()
            return proc, line.split(": ", 1)[1].strip(), lines
    raise SystemExit("bridge serve did not start:\n" + "".join(lines))


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident memory of a process in MB: VmRSS (all), RssAnon (heap) or RssFile (mapped files)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for process {pid}")


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict:
    return {"n": len(values), "p50_ms": round(pct(values, 50), 2), "p90_ms": round(pct(values, 90), 2),
            "p99_ms": round(pct(values, 99), 2), "max_ms": round(max(values, default=float("nan")), 2),
            "mean_ms": round(statistics.fmean(values), 2) if values else float("nan")}


async def wait_embedded(url: str, token: str) -> dict:
    from bridge.server.connect import connect

    async with connect(url, token) as client:
        while True:
            status = (await client.call_tool("index_status", {})).structured_content
            if status["embedded_chunks"] >= status["chunks"] and not status["reindexing"]:
                await client.call_tool("search_code", {"query": "warm up the query embedder"})
                return status
            await asyncio.sleep(0.5)


async def overhead(url: str, token: str, index_dir: Path, n: int) -> dict:
    import faiss

    from bridge.server.connect import connect
    from index.search import Searcher

    faiss.omp_set_num_threads(1)  # as the server does (bridge.server.repos)
    queries = [QUERIES[i % len(QUERIES)] for i in range(n)]
    searcher = Searcher(index_dir)
    searcher.search("warm up", k=5, max_tokens=600)
    local = []
    for q in queries:
        t = time.perf_counter()
        searcher.search(q, k=5, max_tokens=600, mode="hybrid")
        local.append((time.perf_counter() - t) * 1000)
    remote = []
    async with connect(url, token) as client:
        await client.call_tool("search_code", {"query": "warm up"})
        for q in queries:
            t = time.perf_counter()
            await client.call_tool("search_code", {"query": q, "k": 5, "max_tokens": 600})
            remote.append((time.perf_counter() - t) * 1000)
    return {"in_process": summary(local), "mcp_http": summary(remote),
            "overhead_p50_ms": round(pct(remote, 50) - pct(local, 50), 2)}


DEFAULT_MIX = {"search": 0.7, "read": 0.3}
GLOBS = ["**/*.py", "json/**", "*", "**/__init__.py", "http/*"]


def parse_mix(text: str) -> dict[str, float]:
    """`search=0.6,read=0.3,list=0.1` -> shares of each call kind (normalised to sum 1)."""
    mix = {}
    for part in text.split(","):
        kind, _, share = part.partition("=")
        if kind.strip() not in ("search", "read", "list"):
            raise SystemExit(f"--mix: unknown call kind {kind!r}: use search, read and list")
        mix[kind.strip()] = float(share)
    total = sum(mix.values())
    return {k: v / total for k, v in mix.items()}


def pick_call(rng: random.Random, mix: dict[str, float], files: list[str]) -> tuple[str, dict]:
    kind = rng.choices(list(mix), weights=list(mix.values()))[0]
    if kind == "search":
        return "search_code", {"query": rng.choice(QUERIES), "k": 5, "max_tokens": 600}
    if kind == "read":
        end = rng.randint(40, 200)
        return "read_file", {"path": rng.choice(files), "start_line": 1, "end_line": end, "max_tokens": 800}
    return "list_files", {"path_glob": rng.choice(GLOBS), "limit": 200}


async def one_client(
    url: str, token: str, files: list[str], deadline: float, seed: int, out: list[tuple],
    mix: dict[str, float] = DEFAULT_MIX,
) -> None:
    from bridge.server.connect import connect

    rng = random.Random(seed)
    async with connect(url, token) as client:
        while time.monotonic() < deadline:
            kind, args = pick_call(rng, mix, files)
            t = time.perf_counter()
            try:
                result = await client.call_tool(kind, args)
                error = result.content[0].text if result.is_error else None
            except Exception as exc:  # noqa: BLE001 - counted as an error, the run goes on
                error = f"{type(exc).__name__}: {exc}"
            out.append((time.monotonic(), kind, (time.perf_counter() - t) * 1000, error))


async def reindexer(url: str, token: str, corpus: Path, deadline: float, out: list[tuple[float, float]]) -> None:
    from bridge.server.connect import connect

    target = corpus / "bench_churn.py"
    async with connect(url, token) as client:
        n = 0
        while time.monotonic() < deadline:
            n += 1
            target.write_text(f'"""Churn for the load benchmark."""\n\ndef churn_{n}():\n    return {n}\n')
            t = time.perf_counter()
            result = await client.call_tool("refresh_index", {})
            if not result.is_error:
                out.append((time.monotonic(), time.perf_counter() - t))


async def load(
    url: str, token: str, pid: int, corpus: Path, clients: int, duration: float, reindex: bool,
    mix: dict[str, float] = DEFAULT_MIX, warmup: float = 0.0,
) -> dict:
    """Run the load for warmup + duration seconds; figures are of the last `duration` seconds."""
    from bridge.server.connect import connect

    async with connect(url, token) as client:
        files = (await client.call_tool("list_files", {"limit": 10000})).structured_content["files"]
    samples: list[tuple] = []
    refreshes: list[tuple[float, float]] = []
    rss: list[tuple[float, float, float, float]] = []  # time, VmRSS, RssAnon, RssFile
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(1.0):
            rss.append((time.monotonic(), rss_mb(pid), rss_mb(pid, "RssAnon"), rss_mb(pid, "RssFile")))

    sampler = threading.Thread(target=sample, daemon=True)
    began = time.monotonic()
    start = began + warmup
    deadline = start + duration
    sampler.start()
    churn = [reindexer(url, token, corpus, deadline, refreshes)] if reindex else []
    await asyncio.gather(*churn, *(one_client(url, token, files, deadline, seed, samples, mix) for seed in range(clients)))
    stop.set()
    sampler.join()
    elapsed = time.monotonic() - start
    warm_rss = [r for r in rss if r[0] < start]
    samples = [s for s in samples if s[0] >= start]
    rss = [r for r in rss if r[0] >= start]
    reindex_s = [seconds for t, seconds in refreshes if t >= start]
    latencies = [s[2] for s in samples]
    errors = [s[3] for s in samples if s[3]]
    window = min(10.0, duration / 3)  # first and last 10 s (a third of a short run)
    first = [r[1] for r in rss if r[0] - start <= window]
    last = [r[1] for r in rss if r[0] >= deadline - window]
    growth = (statistics.fmean(last) / statistics.fmean(first) - 1) * 100 if first and last else float("nan")
    return {
        "clients": clients, "duration_s": round(elapsed, 1), "calls": len(samples),
        "throughput_per_s": round(len(samples) / elapsed, 1), "errors": len(errors), "error_examples": errors[:5],
        "all": summary(latencies),
        "search_code": summary([s[2] for s in samples if s[1] == "search_code"]),
        "read_file": summary([s[2] for s in samples if s[1] == "read_file"]),
        "list_files": summary([s[2] for s in samples if s[1] == "list_files"]),
        "mix": mix,
        "reindexes": len(reindex_s), "reindex_mean_s": round(statistics.fmean(reindex_s), 2) if reindex_s else None,
        "rss_first_10s_mb": round(statistics.fmean(first), 1) if first else None,
        "rss_last_10s_mb": round(statistics.fmean(last), 1) if last else None,
        "rss_growth_pct": round(growth, 2),
        "warmup_s": warmup,
        "rss_warmup_first_mb": round(warm_rss[0][1], 1) if warm_rss else None,
        "rss_warmup_last_mb": round(warm_rss[-1][1], 1) if warm_rss else None,
        "rss_timeline_mb": [(round(t - start, 1), round(m, 1), round(a, 1), round(f, 1)) for t, m, a, f in rss],
    }


def table(result: dict) -> str:
    ld, ov = result["load"], result["overhead"]
    rows = [
        ("corpus", f"{result['index']['files']} files, {result['index']['chunks']} chunks, embedder {result['index']['embedder']}"),
        ("index build", f"lexical {result['index']['lexical_s']} s, vectors {result['index']['vectors_s']} s"),
        ("load", f"{ld['clients']} clients x {ld['duration_s']} s, {ld['reindexes']} re-indexes (mean {ld['reindex_mean_s']} s)"),
        ("throughput", f"{ld['throughput_per_s']} calls/s ({ld['calls']} calls)"),
        ("errors", str(ld["errors"])),
    ]
    for kind in ("all", "search_code", "read_file", "list_files"):
        s = ld[kind]
        if not s["n"]:
            continue
        rows.append((f"latency {kind}", f"p50 {s['p50_ms']} ms, p90 {s['p90_ms']} ms, p99 {s['p99_ms']} ms, max {s['max_ms']} ms"))
    rows += [
        ("search in-process", f"p50 {ov['in_process']['p50_ms']} ms, p99 {ov['in_process']['p99_ms']} ms"),
        ("search over MCP HTTP", f"p50 {ov['mcp_http']['p50_ms']} ms, p99 {ov['mcp_http']['p99_ms']} ms"),
        ("MCP HTTP overhead", f"{ov['overhead_p50_ms']} ms at p50"),
        ("server RSS", f"{result['rss_after_load_mb']} MB loaded, {result['rss_after_run_mb']} MB after the run"),
        ("RSS first/last 10 s", f"{ld['rss_first_10s_mb']} / {ld['rss_last_10s_mb']} MB ({ld['rss_growth_pct']} %)"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load (default 60)")
    parser.add_argument("--clients", type=int, default=16, help="concurrent MCP sessions (default 16)")
    parser.add_argument("--embedder", default="static", help="static (default), minilm or hash")
    parser.add_argument("--overhead-queries", type=int, default=100)
    parser.add_argument("--warmup", type=float, default=10.0,
                        help="seconds of the same load before measuring, not counted (default 10)")
    parser.add_argument("--no-reindex", action="store_true", help="no re-index during the load (for comparison)")
    parser.add_argument("--mix", type=parse_mix, default=DEFAULT_MIX,
                        help="shares of call kinds, e.g. search=0.6,read=0.3,list=0.1 (default search=0.7,read=0.3)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "load.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bridge-load-"))
    proc = None
    try:
        corpus = copy_corpus(work / "stdlib")
        index_dir = work / "index"
        print("indexing the stdlib copy ...", file=sys.stderr)
        info = build(corpus, index_dir, args.embedder)
        token = secrets.token_urlsafe(24)
        proc, url, _ = start_server(corpus, index_dir, work / "audit.jsonl", token)
        asyncio.run(wait_embedded(url, token))
        loaded = rss_mb(proc.pid)
        print(f"server at {url}, RSS {loaded:.0f} MB; measuring overhead ...", file=sys.stderr)
        over = asyncio.run(overhead(url, token, index_dir, args.overhead_queries))
        print(f"load: {args.clients} clients for {args.duration:.0f} s ...", file=sys.stderr)
        result_load = asyncio.run(
            load(url, token, proc.pid, corpus, args.clients, args.duration, not args.no_reindex, args.mix, args.warmup)
        )
        result = {"index": info, "rss_after_load_mb": round(loaded, 1), "overhead": over, "load": result_load,
                  "rss_after_run_mb": round(rss_mb(proc.pid), 1), "cpus": os.cpu_count(),
                  "targets": {"errors": 0, "p99_ms": 200, "rss_mb": 800, "rss_growth_pct": 5}}
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    print(f"written {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
