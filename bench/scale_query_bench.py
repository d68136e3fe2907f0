"""Warm query latency on a large index: lexical, and hybrid with static vectors, next to a reference engine.

    python -m bench.scale_query_bench --index DIR --questions FILE [--reference REF]
                                      [--queries 30] [--dense-every 12]

`--index` is a lexical-only index (`bridge index --no-vectors`, e.g. the one `bench.scale_bench`
leaves in bench/out/scale/this); `--reference` is a checkout of the engine to compare with (e.g.
`git archive REV | tar -x -C DIR`). Both engines answer the same questions from the same index
files, in child processes run one after the other, each from its own source:

1. warm `--mode lexical`: took_ms p50 / p95 (wall) and the CPU time of each `search` call (what
   an idle core would need; it also counts the staleness check that `took_ms` leaves out) over `--queries` SWE-bench questions, cut to their
   first 40 words (as bench.scale_bench does) and whole (a bug report with its traceback);
2. warm hybrid with static vectors: the index's files are hard-linked into a second index whose
   manifest names the static embedder (model2vec distilled from MiniLM) and whose vector file
   holds the static vectors of every `--dense-every`-th chunk, written by this engine's
   `fill_vectors` step (index/store/vector.py: exact up to ANN_THRESHOLD vectors, IVF above). With
   `--dense-every 1` every chunk has its vector, as after `bridge index` with the static
   embedder (about 4-5 min of CPU to embed 1.15M chunks; the vectors are kept in `--work` as
   static-every-N.npy and reused, e.g. by other vector benchmarks). Both engines read that same vector
   file. Everything else in hybrid search (BM25 over every chunk, the title query, the
   file-level ranking over every file, the learned second stage, the query embedding) runs at
   full size.

Also checks that both engines return the same hits (path, lines, score), lexical and hybrid.
Writes bench/out/scale_query.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.paths import reproduce

__all__ = ["main", "static_copy"]

_ROOT = Path(__file__).resolve().parents[1]
_READ_BATCH = 10_000  # chunk rows read (and embedded) at a time
_OUT = _ROOT / "bench" / "out"
_WARM = """
import json, sys, time
from pathlib import Path
from index.search import Searcher
plan = json.load(sys.stdin)
out = {}
for name, index, mode, queries in plan:
    s = Searcher(Path(index), max_query_bytes=64 * 1024)  # the reference cut queries at 4 KB
    t0 = time.perf_counter()
    s.search(queries[0], k=10, mode=mode)  # loads the generation (and the query embedder)
    first_s = time.perf_counter() - t0
    took, cpu, hits = [], [], []
    for q in queries:
        c0 = time.process_time()
        r = s.search(q, k=10, mode=mode)
        cpu.append((time.process_time() - c0) * 1000)
        took.append(r.took_ms)
        hits.append([[h.path, h.start_line, h.end_line, h.score] for h in r.hits])
    out[name] = {"took_ms": took, "cpu_ms": cpu, "hits": hits, "first_s": first_s}
print(json.dumps(out))
"""


def static_copy(index: Path, target: Path, every: int) -> dict[str, Any]:
    """A second index at `target` sharing `index`'s live generation files (hard links) whose
    manifest names the static embedder and whose vectors are those of every `every`-th chunk."""
    from index.build import write_vectors
    from index.embed import load_embedder
    from index.store import IndexDir, VectorIndex, open_table

    store = IndexDir(index)
    gen = store.current()
    dest = target / gen.name
    if not dest.is_dir():
        subprocess.run(["cp", "-al", str(gen), str(dest)], check=True)
    manifest = json.loads((gen / "manifest.json").read_text(encoding="utf-8"))
    manifest["embedder"] = "static"
    (dest / "manifest.json").unlink()  # a hard link: replace it, never write through it
    (dest / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (target / "CURRENT").write_text(gen.name + "\n", encoding="utf-8")
    emb = load_embedder("static")
    sampled = list(range(0, int(manifest["chunks"]), every))
    saved = target / f"static-every-{every}.npy"  # a later run on the same copy reuses them
    reuse = saved.is_file()
    embed_cpu = 0.0
    ids: list[int] = []
    parts = []
    table = open_table(dest)  # a delta generation: its two segments, no deleted chunk
    try:
        for start in range(0, len(sampled), _READ_BATCH):  # SQLite binds at most 32k values per query
            rows = table.get(sampled[start : start + _READ_BATCH])
            batch = sorted(rows)
            ids += batch
            if not reuse:
                t0 = time.process_time()
                parts.append(np.asarray(emb.encode([rows[i].text for i in batch], batch_size=256), dtype=np.float32))
                embed_cpu += time.process_time() - t0
    finally:
        table.close()
    if reuse:
        vectors = np.load(saved)
        if vectors.shape[0] != len(ids):
            raise SystemExit(f"{saved} holds {vectors.shape[0]} vectors for {len(ids)} sampled chunks: delete it")
    else:
        vectors = np.concatenate(parts) if parts else np.zeros((0, emb.dim), dtype=np.float32)
        np.save(saved, vectors)
    hashes = [""] * (max(ids, default=0) + 1)
    have: dict[str, np.ndarray] = {}
    for i, v in zip(ids, vectors):
        hashes[i] = f"sample-{i}"
        have[hashes[i]] = v
    (dest / "vectors.faiss").unlink(missing_ok=True)
    c0 = time.process_time()
    count = write_vectors(dest, emb, hashes, have)
    write_cpu = time.process_time() - c0
    exact = VectorIndex.load(dest / "vectors.faiss").exact
    return {"vectors": count, "dim": emb.dim, "embed_cpu_s": round(embed_cpu, 1),
            "index": "flat (every vector scanned)" if exact else "IVF", "write_cpu_s": round(write_cpu, 1)}


def _run(source: Path, plan: list[tuple[str, str, str, list[str]]]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(source)}
    proc = subprocess.run(["nice", "-n", "10", sys.executable, "-c", _WARM], env=env, input=json.dumps(plan),
                          capture_output=True, text=True, check=False, cwd=source)
    if proc.returncode:
        raise RuntimeError(f"warm queries failed in {source}: {proc.stderr.strip()[-800:]}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _same_hits(a: list[list[Any]], b: list[list[Any]]) -> bool:
    return len(a) == len(b) and all(x[:3] == y[:3] and abs(x[3] - y[3]) <= 1e-4 * max(abs(y[3]), 1e-9)
                                    for x, y in zip(a, b))


def _stats(took: list[float], cpu: list[float]) -> dict[str, float]:
    ordered, spent = sorted(took), sorted(cpu)
    return {
        "p50_ms": round(statistics.median(ordered), 1), "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 1),
        "cpu_p50_ms": round(statistics.median(spent), 1), "cpu_p95_ms": round(spent[int(0.95 * (len(spent) - 1))], 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, required=True, help="a lexical-only index folder")
    parser.add_argument("--questions", type=Path, required=True, help="SWE-bench-style questions (JSONL)")
    parser.add_argument("--reference", type=Path, help="checkout of the engine to compare with")
    parser.add_argument("--reference-index", type=Path,
                        help="the index the reference answers from (default: --index), e.g. a single-segment build "
                             "of the same tree next to this engine's delta generation")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--dense-every", type=int, default=12, help="embed every n-th chunk for the hybrid runs")
    parser.add_argument("--work", type=Path, default=_OUT / "scale_query", help="where the static copy is made")
    parser.add_argument("--out", type=Path, default=_OUT / "scale_query.json")
    args = parser.parse_args(argv)
    rows = [json.loads(line) for line in args.questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    whole = [r["query"] for r in rows[: args.queries]]
    short = [" ".join(q.split()[:40]) for q in whole]
    args.work.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"index": str(args.index), "load_at_start": os.getloadavg()[0]}
    engines = [("this", _ROOT)] + ([("reference", args.reference.resolve())] if args.reference else [])
    indexes = {"this": args.index, "reference": args.reference_index or args.index}
    statics = {name: args.work / name for name, _ in engines}
    for folder in statics.values():
        folder.mkdir(parents=True, exist_ok=True)
    result["static"] = {name: static_copy(indexes[name], statics[name], args.dense_every) for name, _ in engines}
    result["indexes"] = {name: str(indexes[name]) for name, _ in engines}

    def plan(name: str) -> list[tuple[str, str, str, list[str]]]:
        return [
            ("lexical_40_words", str(indexes[name]), "lexical", short),
            ("lexical_whole", str(indexes[name]), "lexical", whole),
            ("hybrid_static_40_words", str(statics[name]), "hybrid", short),
            ("hybrid_static_whole", str(statics[name]), "hybrid", whole),
        ]

    raw = {name: _run(source, plan(name)) for name, source in engines}
    result["engines"] = {
        name: {run: {**_stats(r["took_ms"], r["cpu_ms"]), "first_s": round(r["first_s"], 2)} for run, r in runs.items()}
        for name, runs in raw.items()
    }
    if "reference" in raw:  # paths and lines alike; scores within 1e-4 (a delta's idf ratios round differently)
        result["same_lexical_hits_1e-4"] = {
            run: sum(_same_hits(a, b) for a, b in zip(raw["this"][run]["hits"], raw["reference"][run]["hits"]))
            for run in ("lexical_40_words", "lexical_whole")
        }
    if "reference" in raw:
        result["same_hits"] = {
            run: sum(a == b for a, b in zip(raw["this"][run]["hits"], raw["reference"][run]["hits"]))
            for run, *_ in plan("this")
        }
    result["load_at_end"] = os.getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"static vectors: {result['static']}")
    for measure in ("p50_ms", "p95_ms", "cpu_p50_ms", "cpu_p95_ms"):
        print(f"{'warm ' + measure:<26}" + "".join(f"{e:>14}" for e in result["engines"]))
        for run, *_ in plan("this"):
            print(f"  {run:<24}" + "".join(f"{r[run][measure]!s:>14}" for r in result["engines"].values()))
    if "same_hits" in result:
        print(f"same hits as the reference (of {len(whole)}): {result['same_hits']}; "
              f"lexical scores within 1e-4: {result['same_lexical_hits_1e-4']}")
    print(f"wrote {args.out}")
    print(reproduce("bench.scale_query_bench", argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
