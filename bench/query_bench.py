"""Query latency of one kept index, in one process, model load excluded.

    python -m bench.query_bench INDEX_DIR [--questions FILE] [--queries N] [--out-dir DIR] [--minilm]
                                [--onnxruntime]

INDEX_DIR is an index folder with vectors (e.g. one that `python -m bench.swebench` keeps under
WORK/indexes: an astropy tree is about 60k chunks). The embedder the index was built with is
loaded and warmed by one search before anything is timed. Three kinds of query, each `--queries`
long (taken in order, repeated if the file is short):

- phrases: short questions of a few words;
- titles: the first line of each question in FILE (a bug report's summary);
- reports: the whole question text (bug reports up to 25 KB).

For each kind it times `Searcher.search(k=5)` in hybrid mode (the product: fusion, history and the
learned second stage), hybrid without the second stage (`file_ranking(learned=False)`, the
reference) and lexical mode, taking turns per query so that load from other processes falls on
all three alike. `--minilm` also times the bundled MiniLM's query embedding alone on the same
queries (what hybrid search adds on an index built with the default embedder instead of the static
one the benchmark indexes use). `--onnxruntime`, on a MiniLM index: also hybrid with the query
embedded by ONNX Runtime (the reference query runtime, index/embed/minilm.py), in the same turns.
Writes OUT_DIR/query_bench.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from itertools import cycle, islice
from pathlib import Path
from typing import Any
from unittest.mock import patch

from bench import paths
from bridge.measure.evaluate import load_questions
from index.embed import Embedder, load_embedder
from index.embed.choice import QUERY_ENV
from index.search import Searcher, file_ranking
from index.store import default_home

__all__ = ["main", "percentile"]

PHRASES = ("how are http cookies parsed", "retry a failed socket connection", "decode json with object hook",
           "walk a directory tree recursively", "format a date in iso 8601", "compress data with zlib",
           "where is the config file read", "units conversion of a quantity")
MAX_QUERY_BYTES = 1 << 20


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _ms(way: Callable[[str], Any], query: str) -> float:
    started = time.perf_counter()
    way(query)
    return (time.perf_counter() - started) * 1000


def measure(searcher: Searcher, queries: Sequence[str], reference: Searcher | None = None) -> dict[str, dict[str, float]]:
    """p50 / p95 / mean milliseconds of each way of searching, over the same queries in turn."""
    ways: dict[str, Callable[[str], Any]] = {
        "hybrid": lambda q: searcher.search(q, k=5, mode="hybrid"),
        "hybrid-fused": lambda q: file_ranking(searcher, q, learned=False),
        "lexical": lambda q: searcher.search(q, k=5, mode="lexical"),
    }
    if reference is not None:
        ways["hybrid-onnxruntime"] = lambda q: reference.search(q, k=5, mode="hybrid")
    times: dict[str, list[float]] = {name: [] for name in ways}
    for query in queries:
        for name, way in ways.items():
            times[name].append(_ms(way, query))
    return {name: {"p50_ms": round(statistics.median(t), 2), "p95_ms": round(percentile(t, 0.95), 2),
                   "mean_ms": round(statistics.fmean(t), 2)} for name, t in times.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index_dir", type=Path)
    parser.add_argument("--questions", type=Path, default=paths.questions())
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--out-dir", type=Path, default=paths.OUT)
    parser.add_argument("--minilm", action="store_true", help="also time MiniLM query embedding alone")
    parser.add_argument("--onnxruntime", action="store_true",
                        help="also time hybrid with MiniLM queries on ONNX Runtime (MiniLM indexes)")
    args = parser.parse_args(argv)
    probe = Searcher(args.index_dir, max_query_bytes=MAX_QUERY_BYTES)
    spec = probe.manifest.embedder
    if spec is None:
        raise SystemExit(f"{args.index_dir} has no vectors: index it without --no-vectors")
    started = time.perf_counter()
    searcher = _warm_searcher(args.index_dir, load_embedder(spec, cache_dir=default_home() / "models"))
    load_s = time.perf_counter() - started
    texts = [q.query for q in load_questions(args.questions)]
    kinds = {
        "phrases": list(islice(cycle(PHRASES), args.queries)),
        "titles": list(islice(cycle(t.strip().splitlines()[0] for t in texts), args.queries)),
        "reports": list(islice(cycle(texts), args.queries)),
    }
    info = searcher.info()
    result: dict[str, Any] = {"index": str(args.index_dir), "embedder": spec, "chunks": info.chunks,
                              "embedded": info.embedded_chunks, "files": info.files,
                              "history": searcher.history() is not None, "load_s": round(load_s, 2),
                              "queries": args.queries, "kinds": {}}
    minilm = load_embedder("minilm", cache_dir=default_home() / "models") if args.minilm else None
    if minilm is not None:
        minilm.encode_query(PHRASES[0])  # loads the model: not timed
    reference = _onnxruntime_searcher(args.index_dir, spec) if args.onnxruntime else None
    for kind, queries in kinds.items():
        result["kinds"][kind] = measure(searcher, queries, reference)
        if minilm is not None:
            encode = [_ms(minilm.encode_query, q) for q in queries]
            result["kinds"][kind]["minilm_encode"] = {"p50_ms": round(statistics.median(encode), 2)}
        print(f"{kind}: {result['kinds'][kind]}", file=sys.stderr, flush=True)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "query_bench.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"{info.chunks} chunks ({info.embedded_chunks} embedded, {spec}), history {result['history']}, "
          f"{args.queries} queries per kind; load and warm-up {load_s:.1f} s (not timed)\n")
    print("| queries | hybrid p50 | hybrid p95 | hybrid-fused p50 | lexical p50 | MiniLM query embedding p50 "
          "| hybrid, queries on onnxruntime p50 / p95 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind, row in result["kinds"].items():
        encoded = f"{row['minilm_encode']['p50_ms']:.1f}" if "minilm_encode" in row else "—"
        ort = row.get("hybrid-onnxruntime")
        on_ort = f"{ort['p50_ms']:.1f} / {ort['p95_ms']:.1f}" if ort else "—"
        print(f"| {kind} | {row['hybrid']['p50_ms']:.1f} | {row['hybrid']['p95_ms']:.1f} "
              f"| {row['hybrid-fused']['p50_ms']:.1f} | {row['lexical']['p50_ms']:.1f} | {encoded} | {on_ort} |")
    return 0


def _onnxruntime_searcher(index_dir: Path, spec: str) -> Searcher:
    """A second searcher on the same index whose MiniLM embeds queries on ONNX Runtime, warmed."""
    embedder = load_embedder(spec, cache_dir=default_home() / "models")
    if not hasattr(embedder, "query_model"):
        raise SystemExit(f"--onnxruntime needs a MiniLM index; {index_dir} was built with {spec}")
    with patch.dict(os.environ, {QUERY_ENV: "onnxruntime"}):  # read once, when the query side loads
        embedder.query_model()
    return _warm_searcher(index_dir, embedder)


def _warm_searcher(index_dir: Path, embedder: Embedder) -> Searcher:
    """A searcher with the index, its history and the query embedder loaded by one untimed search."""
    searcher = Searcher(index_dir, embedder_loader=lambda _spec: embedder, max_query_bytes=MAX_QUERY_BYTES)
    searcher.warm()
    searcher.search(PHRASES[0], k=5)
    return searcher


if __name__ == "__main__":
    raise SystemExit(main())
