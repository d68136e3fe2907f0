"""Reliability figures at full size: kill -9 sweep, a 1,000-call burst, hostile inputs at scale,
16 clients x 60 s under re-indexing (bench/load_bench.py), and a 50-turn chat with the real model.

    python bench/reliability.py all                       # every section (about 10 min on 2 cores)
    python bench/reliability.py kill burst inputs load chat [--load-duration 60] [--load-clients 16]

Each section's figures are merged into bench/out/reliability.json; bench/out/reliability.md is
rewritten from it with the command of every section. The pass/fail checks are the ones of
tests/test_reliability_*.py (which run the same scenarios at CI size); this script measures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests"), str(ROOT / "tests" / "reliability")]
OUT = ROOT / "bench" / "out"
MIX = "search=0.6,read=0.3,list=0.1"

import load_bench as lb  # noqa: E402  (bench/ is on the path only now)
from reliability_report import write_report  # noqa: E402


def _ms(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50_ms": round(lb.pct(values, 50), 2), "p99_ms": round(lb.pct(values, 99), 2),
            "max_ms": round(max(values, default=float("nan")), 2)}


def _lexical_answers(index_dir: Path) -> list[list[tuple[str, int, int]]]:
    from index.search import Searcher

    searcher = Searcher(index_dir)
    return [[(h.path, h.start_line, h.end_line) for h in searcher.search(q, k=5, mode="lexical").hits]
            for q in lb.QUERIES[:10]]


def _complete(root: Path, index_dir: Path, max_delta: float | None = None) -> float:
    """Index and embed; `max_delta` 0 forces a single-segment build, None takes the default (a delta)."""
    from index.build import BuildOptions, build_index, fill_vectors

    t = time.perf_counter()
    options = BuildOptions(embedder="hash") if max_delta is None else BuildOptions(embedder="hash", max_delta=max_delta)
    build_index(root, index_dir, options)
    fill_vectors(index_dir, batch_size=8)
    return time.perf_counter() - t


# --- kill -9 ---------------------------------------------------------------------------------------


def section_kill(work: Path, args: argparse.Namespace) -> dict:
    """The kill points of tests/test_reliability_kill.py, on the stdlib copy (~10k chunks): the 20
    of a single-segment build, then the 14 of a delta re-index (index/build/delta.py)."""
    import test_reliability_kill as kt

    single = _kill_sweep(work / "single", kt.KILL_POINTS, 0.0)
    return {**single, "delta": _kill_sweep(work / "delta", kt.DELTA_KILL_POINTS, None)}


def _kill_sweep(work: Path, points: list[Any], max_delta: float | None) -> dict:
    import test_reliability_kill as kt

    corpus = lb.copy_corpus(work / "stdlib")
    pristine = work / "pristine"
    _complete(corpus, pristine, max_delta)
    _append(corpus / "json" / "__init__.py", "\n# generation two\n")
    _complete(corpus, pristine, max_delta)
    old = _lexical_answers(pristine)
    _append(corpus / "textwrap.py", "\ndef kill_sweep_marker():\n    return 'thread pool executor submit'\n")
    (corpus / "kill_sweep_new.py").write_text("def parse_a_url_into_components(url):\n    return url.split('/')\n")
    finished = work / "finished"
    shutil.copytree(pristine, finished)
    _complete(corpus, finished, max_delta)
    new = _lexical_answers(finished)
    script = work / "worker.py"
    script.write_text(kt.WORKER)
    worker_delta = str(kt.DELTA_OPTIONS.max_delta if max_delta is None else max_delta)
    rows = []
    for kill in points:
        index_dir = work / "index"
        shutil.rmtree(index_dir, ignore_errors=True)
        shutil.copytree(pristine, index_dir)
        t = time.perf_counter()
        done = subprocess.run([sys.executable, str(script), str(corpus), str(index_dir), kill.point, kill.when,
                               str(kill.nth), worker_delta], capture_output=True, text=True, timeout=600)
        until_kill = time.perf_counter() - t
        evidence = bool(list(index_dir.glob(kill.evidence))) if kill.evidence else None
        answers = _lexical_answers(index_dir)
        rerun = _complete(corpus, index_dir, max_delta)
        rows.append({
            "point": kill.name, "killed": done.returncode == -signal.SIGKILL, "seconds_to_kill": round(until_kill, 2),
            "evidence": evidence,
            "answers_after_kill": "old" if answers == old else "new" if answers == new else "WRONG",
            "expected": kill.live, "rerun_s": round(rerun, 2), "rerun_complete": _lexical_answers(index_dir) == new,
            "leftovers_after_rerun": kt.leftovers(index_dir),
        })
    ok = [r for r in rows if r["killed"] and r["answers_after_kill"] == r["expected"] and r["rerun_complete"]
          and not r["leftovers_after_rerun"] and r["evidence"] is not False]
    return {"points": rows, "passed": len(ok), "total": len(rows),
            "rerun_s_mean": round(statistics.fmean(r["rerun_s"] for r in rows), 2),
            "corpus_chunks": _chunks(pristine)}


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(text)


def _chunks(index_dir: Path) -> int:
    from index.store import IndexDir

    return IndexDir(index_dir).manifest().chunks


# --- burst and rough clients -----------------------------------------------------------------------


def _served(work: Path) -> tuple[subprocess.Popen, str, str, Path]:
    corpus = lb.copy_corpus(work / "stdlib")
    index_dir = work / "index"
    _complete(corpus, index_dir)
    token = secrets.token_urlsafe(16)
    proc, url, _ = lb.start_server(corpus, index_dir, work / "audit.jsonl", token)
    asyncio.run(lb.wait_embedded(url, token))
    return proc, url, token, corpus


async def _burst(url: str, token: str, sessions: int, per_session: int) -> tuple[list[float], list[str], float]:
    from bridge.server.connect import connect

    latencies: list[float] = []
    errors: list[str] = []

    async def timed(client: Any, n: int) -> None:
        t = time.perf_counter()
        try:
            result = await client.call_tool("search_code", {"query": lb.QUERIES[n % len(lb.QUERIES)], "k": 5})
            if result.is_error:
                errors.append(result.content[0].text)
        except Exception as exc:  # noqa: BLE001 - counted, the burst goes on
            errors.append(f"{type(exc).__name__}: {exc}")
        latencies.append((time.perf_counter() - t) * 1000)

    async def session(s: int) -> None:
        async with connect(url, token) as client:
            await asyncio.gather(*(timed(client, s * per_session + i) for i in range(per_session)))

    t = time.perf_counter()
    await asyncio.gather(*(session(s) for s in range(sessions)))
    return latencies, errors, time.perf_counter() - t


def _hang_ups(url: str, token: str, count: int) -> None:
    import socket

    import httpx

    address = (httpx.URL(url).host, httpx.URL(url).port)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).encode()
    head = (f"POST /mcp HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    for _ in range(count):
        with socket.create_connection(address, timeout=10) as sock:
            sock.sendall(head + body[: len(body) // 3])


def section_burst(work: Path, args: argparse.Namespace) -> dict:
    """A burst of 1,000 calls, then rounds of 300 clients that hang up mid-body followed by another
    burst; the server's RSS after each round shows whether anything piles up."""
    proc, url, token, _ = _served(work)
    rounds = []
    try:
        rss = [round(lb.rss_mb(proc.pid), 1)]
        for n in range(4):
            if n:
                _hang_ups(url, token, 300)
            latencies, errors, wall = asyncio.run(_burst(url, token, 10, 100))
            rss.append(round(lb.rss_mb(proc.pid), 1))
            rounds.append({"hang_ups_before": 300 if n else 0, "calls": len(latencies), "errors": len(errors),
                           "error_examples": errors[:3], "wall_s": round(wall, 2),
                           "throughput_per_s": round(len(latencies) / wall, 1), "latency": _ms(latencies)})
        alive = proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(30)
    return {"rounds": rounds, "rss_mb": rss, "server_alive": alive}


# --- hostile inputs at scale ---------------------------------------------------------------------------


CHILD_BUILD = (
    "import json, resource, sys, time\nfrom pathlib import Path\n"
    "from index.build.pipeline import BuildOptions, build_index\nfrom index.types import Selection\n"
    "t = time.perf_counter()\n"
    "r = build_index(Path(sys.argv[1]), Path(sys.argv[2]), BuildOptions(embedder=None, "
    "selection=Selection(max_file_bytes=int(sys.argv[3]))))\n"
    "print(json.dumps({'seconds': round(time.perf_counter() - t, 2), 'files': r.files, 'chunks': r.chunks, "
    "'skipped': r.skipped, 'peak_rss_mb': round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))\n"
)


def _child_build(root: Path, index_dir: Path, max_bytes: int) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD_BUILD, str(root), str(index_dir), str(max_bytes)],
                          capture_output=True, text=True, timeout=1800, cwd=ROOT, check=True)
    return json.loads(done.stdout)



def _spaced_searches(searcher: Any, in_line: bool, seconds: float = 12.0) -> dict[str, float]:
    """Searches 40 ms apart, as a served index gets them. The reference (`in_line`) counts the stale
    files inside the search whenever the last count is older than index.search.stale.TTL, as
    searches did before the count moved to a background thread."""
    from index.search import TTL

    took: list[float] = []
    counted = time.monotonic()
    end = counted + seconds
    while time.monotonic() < end:
        time.sleep(0.04)
        t = time.perf_counter()
        if in_line and time.monotonic() - counted >= TTL:
            searcher.info(fresh=True)
            counted = time.monotonic()
        searcher.search(f"f_{len(took) % 100}_{len(took) * 7 % 1000}", k=5, mode="lexical")
        took.append((time.perf_counter() - t) * 1000)
    return _ms(took)

def section_inputs(work: Path, args: argparse.Namespace) -> dict:
    from index.search import Searcher

    many = work / "many"
    t = time.perf_counter()
    for d in range(100):
        folder = many / f"pkg{d:03d}"
        folder.mkdir(parents=True)
        for i in range(1000):
            (folder / f"m{i:04d}.py").write_text(f"def f_{d}_{i}():\n    return {i}\n")
    made = time.perf_counter() - t
    tiny = _child_build(many, work / "many-index", 1 << 20)
    again = _child_build(many, work / "many-index", 1 << 20)
    searcher = Searcher(work / "many-index")
    took = []
    for n in range(50):
        t = time.perf_counter()
        searcher.search(f"f_{n}_{n * 7}", k=5, mode="lexical")
        took.append((time.perf_counter() - t) * 1000)
    served = {way: _spaced_searches(searcher, in_line=way == "counted_in_line") for way in ("shipped", "counted_in_line")}
    big = work / "big"
    big.mkdir()
    line = "def step_{0}(value):\n    return value * {0} + 1\n\n"
    (big / "big.py").write_text("".join(line.format(i) for i in range(50 * 2**20 // 50)))
    (big / "small.py").write_text("def small():\n    return 1\n")  # an index needs one file
    skipped = _child_build(big, work / "big-skip", 1 << 20)
    indexed = _child_build(big, work / "big-index", 2 * 50 * 2**20)
    from support.hostile import hostile_repo

    (work / "hostile").mkdir()
    hostile = _child_build(hostile_repo(work / "hostile", git=True), work / "hostile-index", 1 << 20)
    return {"tiny_files": {"files": 100_000, "make_s": round(made, 1), "first_index": tiny, "unchanged_reindex": again,
                           "search": _ms(took), "served": served},
            "file_50mb": {"bytes": (big / "big.py").stat().st_size, "default_limit": skipped, "limit_raised": indexed},
            "hostile_repo": hostile}


# --- load and chat -------------------------------------------------------------------------------------------


def section_load(work: Path, args: argparse.Namespace) -> dict:
    out = OUT / "load_reliability.json"
    command = [sys.executable, "bench/load_bench.py", "--duration", str(args.load_duration), "--clients",
               str(args.load_clients), "--embedder", args.embedder, "--mix", MIX, "--out", str(out.relative_to(ROOT))]
    subprocess.run(command, cwd=ROOT, check=True, timeout=3600)
    data = json.loads(out.read_text())
    data["command"] = " ".join(["python", *command[1:]])
    return data


CHAT_QUESTIONS = [
    "where is the BM25 index built", "how does the server check the bearer token", "what does plan_prompt do",
    "how are index generations swapped atomically", "where are secret files skipped", "how is a hit's text cut",
    "what happens when the disk is full while indexing", "how does fill_vectors checkpoint", "what is RRF_K",
    "which tools does the MCP server register",
]


def section_chat(work: Path, args: argparse.Namespace) -> dict:
    from bridge.chat.retrieval import local_server
    from bridge.chat.session import ChatSession, open_runtime
    from bridge.chat.settings import Settings
    from bridge.llm.gguf import bundled_model_path, kv_bytes_per_token, read_gguf

    per_token = kv_bytes_per_token(read_gguf(bundled_model_path()), "f16")
    budget = 1536 * per_token
    settings = Settings(n_ctx=2048, kv_budget=budget, answer_reserve=96, mode="lexical")
    runtime = open_runtime(settings)
    rows = []
    try:
        with local_server(ROOT, work / "chat-index") as server:
            from bridge.chat.retrieval import McpRetriever

            with McpRetriever(server.url, server.token) as retriever:
                chat = ChatSession(runtime, retriever, settings)
                for n in range(args.chat_turns):
                    turn = chat.ask(f"{CHAT_QUESTIONS[n % len(CHAT_QUESTIONS)]}? (turn {n + 1})")
                    p, g = turn.plan, turn.generation
                    used_kv = (g.prompt_tokens + g.completion_tokens) * per_token
                    rows.append({"turn": n + 1, "prompt_tokens_planned": p.prompt_tokens, "prompt_tokens": g.prompt_tokens,
                                 "answer_tokens": g.completion_tokens, "limit": p.limit, "history_kept": len(p.history),
                                 "dropped_turns": len(p.dropped_turns), "kv_bytes_plan": p.kv_bytes, "kv_bytes_used": used_kv,
                                 "fits": g.prompt_tokens + p.answer_reserve <= p.limit and used_kv <= p.kv_bytes <= budget,
                                 "total_ms": round(turn.total_ms, 1)})
    finally:
        runtime.close()
    return {"model": "SmolLM2-135M-Instruct (bundled)", "n_ctx": 2048, "kv_budget_bytes": budget,
            "kv_bytes_per_token": per_token, "turns": rows, "violations": sum(not r["fits"] for r in rows),
            "max_prompt_tokens": max(r["prompt_tokens"] for r in rows),
            "max_kv_bytes_used": max(r["kv_bytes_used"] for r in rows)}


SECTIONS: dict[str, Callable[[Path, argparse.Namespace], dict]] = {
    "kill": section_kill, "burst": section_burst, "inputs": section_inputs, "load": section_load, "chat": section_chat,
}


# --- report --------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sections", nargs="+", choices=[*SECTIONS, "all", "report"])
    parser.add_argument("--load-duration", type=float, default=60.0)
    parser.add_argument("--load-clients", type=int, default=16)
    parser.add_argument("--embedder", default="static", help="embedder of the load run (static, minilm or hash)")
    parser.add_argument("--chat-turns", type=int, default=50)
    args = parser.parse_args()
    names = list(SECTIONS) if "all" in args.sections else [s for s in args.sections if s != "report"]
    store = OUT / "reliability.json"
    results = json.loads(store.read_text()) if store.exists() else {}
    for name in names:
        work = Path(tempfile.mkdtemp(prefix=f"bridge-rel-{name}-"))
        saved = dict(os.environ)
        if name != "load":  # the load run keeps the usual home, where the distilled static model is cached
            os.environ["BRIDGE_HOME"] = str(work / "home")
        print(f"{name} ...", file=sys.stderr)
        t = time.perf_counter()
        try:
            results[name] = {**SECTIONS[name](work, args), "section_s": round(time.perf_counter() - t, 1)}
        finally:
            os.environ.clear()
            os.environ.update(saved)
            shutil.rmtree(work, ignore_errors=True)
        results["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform(),
                              "date": datetime.now(UTC).isoformat(timespec="minutes")}
        OUT.mkdir(parents=True, exist_ok=True)
        store.write_text(json.dumps(results, indent=1) + "\n")
    (OUT / "reliability.md").write_text(write_report(results))
    print(f"written {OUT / 'reliability.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
