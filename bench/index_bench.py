"""Index and search benchmarks (issue 2), on the CPython standard library without test/.

    .venv/bin/python -m bench.index_bench [--extra-repo PATH] [--queries 200]

Every process measurement runs the real CLI in a fresh subprocess (`python -m bridge ...`) and
reads its peak RSS from wait4(). Prints a table and writes bench/out/index.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"


def run_cli(args: list[str], env: dict[str, str]) -> str:
    """stdout of `python -m bridge ARGS` in a new process."""
    proc = subprocess.run([sys.executable, "-m", "bridge", *args], capture_output=True, env=env)
    if proc.returncode:
        raise SystemExit(f"bridge {' '.join(args)} failed: {proc.stderr.decode()[-2000:]}")
    return proc.stdout.decode()


def peak_rss_of(args: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Peak RSS of one child alone, via /usr/bin/time-like wait4 on a fresh Popen."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "bridge", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if status:
        assert proc.stderr is not None
        raise SystemExit(f"bridge {' '.join(args)} failed: {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss // 1024


def copy_stdlib(dest: Path) -> Path:
    src = Path(sysconfig.get_paths()["stdlib"])
    ignore = shutil.ignore_patterns("test", "tests", "__pycache__", "site-packages", "*.pyc", "idle_test")
    shutil.copytree(src, dest, ignore=ignore, symlinks=True)
    return dest


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def lexical_vs_rank_bm25(index_dir: Path, n_queries: int) -> dict:
    """Same chunks, same terms: our bm25s index against rank-bm25's BM25Okapi."""
    from rank_bm25 import BM25Okapi

    from index.search import Searcher
    from index.store import IndexDir, LexicalIndex, TermCorpus
    from index.tokenize import terms

    searcher = Searcher(index_dir)
    gen = IndexDir(index_dir).current()
    corpus = TermCorpus.load(gen / "lexical")
    docs = [[corpus.vocab[i] for i in corpus.doc(d)] for d in range(len(corpus))]
    chunks = searcher.read_chunks(list(range(len(docs))))
    rng = random.Random(7)
    symbols = sorted({c.symbol for c in chunks.values() if c.symbol})
    phrases = ["parse http headers", "open file with encoding", "thread pool executor shutdown", "json decode error",
               "socket timeout", "unicode normalize", "temporary directory cleanup", "regular expression compile flags"]
    queries = [s.replace(".", " ") for s in rng.sample(symbols, min(n_queries - len(phrases), len(symbols)))] + phrases
    reference = BM25Okapi(docs, k1=1.2, b=0.75)
    engine = LexicalIndex.load(gen / "lexical")
    ours_ms, engine_ms, ref_ms, agree = [], [], [], 0
    for q in queries:
        qt = terms(q)
        t = time.perf_counter()
        engine.top(qt, 10)
        engine_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        top = searcher.search(q, k=10, mode="lexical")
        ours_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        scores = reference.get_scores(qt)
        best = sorted(range(len(scores)), key=lambda i: -scores[i])[:10]
        ref_ms.append((time.perf_counter() - t) * 1000)
        agree += bool(top.hits) and any(chunks[i].path == top.hits[0].path for i in best[:3])
    return {
        "chunks": len(docs),
        "queries": len(queries),
        "engine_p50_ms": statistics.median(engine_ms),
        "engine_p95_ms": pct(engine_ms, 0.95),
        "engine_speedup_p50": statistics.median(ref_ms) / statistics.median(engine_ms),
        "engine_speedup_p95": pct(ref_ms, 0.95) / pct(engine_ms, 0.95),
        "ours_p50_ms": statistics.median(ours_ms),
        "ours_p95_ms": pct(ours_ms, 0.95),
        "rank_bm25_p50_ms": statistics.median(ref_ms),
        "rank_bm25_p95_ms": pct(ref_ms, 0.95),
        "speedup_p50": statistics.median(ref_ms) / statistics.median(ours_ms),
        "speedup_p95": pct(ref_ms, 0.95) / pct(ours_ms, 0.95),
        "top1_file_in_reference_top3": agree / len(queries),
        "note": "engine = LexicalIndex.top on the same query terms (like for like with rank-bm25 get_scores + "
        "sort); ours = the whole Searcher.search(mode=lexical, k=10): tokenising, fusion, merging, reading rows",
    }


def hybrid_latency(index_dir: Path, n: int, embedder: str) -> dict:
    from index.embed import load_embedder
    from index.search import Searcher
    from index.store import default_home

    searcher = Searcher(index_dir)
    queries = ["how are http cookies parsed", "retry a failed socket connection", "decode json with object hook",
               "walk a directory tree recursively", "format a date in iso 8601", "compress data with zlib"] * (n // 6 + 1)
    searcher.search(queries[0], k=5)  # loads the embedder
    times = []
    for q in queries[:n]:
        t = time.perf_counter()
        searcher.search(q, k=5, mode="hybrid")
        times.append((time.perf_counter() - t) * 1000)
    minilm = load_embedder("minilm", cache_dir=default_home() / "models")
    minilm.encode_query("warm up")
    enc = []
    for q in queries[:n]:
        t = time.perf_counter()
        minilm.encode_query(q)
        enc.append((time.perf_counter() - t) * 1000)
    return {
        "embedder": embedder,
        "chunks": searcher.info().chunks,
        "embedded": searcher.info().embedded_chunks,
        "hybrid_p50_ms": statistics.median(times),
        "hybrid_p95_ms": pct(times, 0.95),
        "minilm_query_encode_p50_ms": statistics.median(enc),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--extra-repo", type=Path, default=None, help="a larger repository, indexed lexically too")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bridge-bench-"))
    env = {**os.environ, "BRIDGE_HOME": str(work / "home")}
    os.environ["BRIDGE_HOME"] = env["BRIDGE_HOME"]
    repo = copy_stdlib(work / "stdlib")
    results: dict = {"corpus": "CPython stdlib without test/", "python": sys.version.split()[0]}

    lex_dir = work / "idx-lexical"
    wall, rss = peak_rss_of(["index", str(repo), "--index-dir", str(lex_dir), "--no-vectors"], env)
    out = run_cli(["index", str(repo), "--index-dir", str(lex_dir), "--no-vectors", "--json", "--rebuild"], env)
    report = json.loads(out)["build"]
    results["lexical_first_index"] = {"wall_s": wall, "peak_rss_mb": rss, "files": report["files"],
                                      "chunks": report["chunks"], "stage_seconds": report["seconds"]}

    victim = repo / "json" / "decoder.py"
    victim.write_text(victim.read_text() + "\n# touched by the benchmark\n")
    t = time.perf_counter()
    out = run_cli(["index", str(repo), "--index-dir", str(lex_dir), "--no-vectors", "--json"], env)
    wall_inc = time.perf_counter() - t  # a whole new process: start-up, discover, chunk, BM25, write
    inc = json.loads(out)["build"]
    results["incremental_one_file"] = {"wall_s": wall_inc, "new_chunks": inc["new_chunks"],
                                       "reused_chunks": inc["reused_chunks"], "stage_seconds": inc["seconds"]}

    results["lexical_query"] = lexical_vs_rank_bm25(lex_dir, args.queries)

    cold = [peak_rss_of(["search", "json decoder scanstring", "--index-dir", str(lex_dir), "--mode", "lexical", "--json"], env)
            for _ in range(5)]
    results["cold_start_lexical"] = {"median_s": statistics.median(w for w, _ in cold), "peak_rss_mb": max(r for _, r in cold)}

    vec_dir = work / "idx-static"
    wall_v, rss_v = peak_rss_of(["index", str(repo), "--index-dir", str(vec_dir), "--embedder", "static"], env)
    results["full_index_static"] = {"wall_s": wall_v, "peak_rss_mb": rss_v,
                                    "note": "includes the one-time distillation of the static model when not cached"}
    wall_v2, _ = peak_rss_of(["index", str(repo), "--index-dir", str(vec_dir), "--embedder", "static", "--rebuild"], env)
    results["full_index_static"]["rebuild_with_warm_embedding_cache_s"] = wall_v2
    cold_h = [peak_rss_of(["search", "json decoder scanstring", "--index-dir", str(vec_dir), "--json"], env) for _ in range(3)]
    results["cold_start_hybrid_static"] = {"median_s": statistics.median(w for w, _ in cold_h), "peak_rss_mb": max(r for _, r in cold_h)}
    results["hybrid_query"] = hybrid_latency(vec_dir, 60, "static")

    if args.extra_repo:
        extra_dir = work / "idx-extra"
        wall_e, rss_e = peak_rss_of(["index", str(args.extra_repo), "--index-dir", str(extra_dir), "--no-vectors"], env)
        out = run_cli(["status", "--index-dir", str(extra_dir), "--json"], env)
        st = json.loads(out)
        results["extra_repo_lexical"] = {"repo": str(args.extra_repo), "wall_s": wall_e, "peak_rss_mb": rss_e,
                                         "files": st["files"], "chunks": st["chunks"]}

    (OUT / "index.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    print(f"\nreproduce: {sys.executable} -m bench.index_bench" + (f" --extra-repo {args.extra_repo}" if args.extra_repo else ""))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
