"""Approximate nearest neighbours for the dense half at scale: build cost, query cost, recall vs exact.

    python -m bench.ann_bench --vectors FILE.npy --questions FILE [--queries 60] [--k 1000]
                              [--configs flat,ivf:32,ivf:64,ivfflat:64,hnsw:16]

`--vectors` is an (n, dim) float32 array of normalised chunk vectors (e.g. the static vectors of
every chunk that `bench.scale_query_bench --dense-every 1` saves in its work folder). The
questions are embedded with the static embedder, as hybrid search embeds them (focused, index/focus.py),
cut to their first 40 words and whole. For each configuration:

- build: CPU seconds to build it from the vectors (single faiss thread, as `fill_vectors` does);
- MiB: its size as written to disk, which is what it holds in memory;
- query: CPU ms per search for the `--k` nearest (hybrid search asks for DENSE_CHUNKS = 1,000);
- recall@10 / @100 / @k: the share of the exact (flat) search's 10, 100, k nearest that it returns
  among its own 10, 100, k (ties at the boundary counted as found).

Configurations: `flat` (exact), `ivf:NPROBE` (the product's IVF, index/vector.py, lists by
`ivf_lists`, float16 vectors), `ivfflat:NPROBE` (the same lists with float32 vectors: the product's
IVF before it stored float16, kept as the reference), `hnsw:M` (faiss HNSW, efSearch = max(16, k)).
Writes bench/out/ann.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.paths import reproduce

__all__ = ["main", "recall"]

_OUT = Path(__file__).resolve().parents[1] / "bench" / "out"


def recall(found_scores: np.ndarray, exact_scores: np.ndarray, k: int) -> float:
    """Share of the exact k nearest that the first k found are worth: a found vector scored (exactly,
    by the caller) at least the exact k-th score is one of them, so a duplicate of a chunk (same
    vector, other id) counts as found, as it should."""
    bar = float(exact_scores[k - 1]) - 1e-6
    return float(np.count_nonzero(found_scores[:k] >= bar)) / k


def _build(config: str, vectors: np.ndarray, ef: int = 16) -> tuple[Any, float]:
    import faiss

    from index.vector import VectorIndex, ivf_lists

    faiss.omp_set_num_threads(1)
    ids = np.arange(len(vectors), dtype=np.int64)
    dim = vectors.shape[1]
    c0 = time.process_time()
    kind, _, param = config.partition(":")
    index: Any
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
        index.add(vectors)
    elif kind == "ivf":
        built = VectorIndex.build(ids, vectors, nprobe=int(param))
        index = built._index
        if built.exact:
            raise SystemExit(f"{len(vectors)} vectors are below ANN_THRESHOLD: IVF is not built for them")
        inner: Any = faiss.downcast_index(index.index)
        assert inner.nlist == ivf_lists(len(vectors))
    elif kind == "ivfflat":  # the reference: the product's IVF until it stored float16 vectors
        lists = ivf_lists(len(vectors))
        inner = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, lists, faiss.METRIC_INNER_PRODUCT)
        inner.train(np.ascontiguousarray(vectors[:: max(1, len(vectors) // (40 * lists))]))
        inner.nprobe = int(param)
        index = faiss.IndexIDMap2(inner)
        index.add_with_ids(vectors, ids)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, int(param), faiss.METRIC_INNER_PRODUCT)
        index.add(vectors)
        index.hnsw.efSearch = ef  # faiss's default (16) is not raised to k: recall@1000 was 0.13
    else:
        raise SystemExit(f"unknown configuration {config!r}: use flat, ivf:NPROBE, ivfflat:NPROBE or hnsw:M")
    return index, time.process_time() - c0


def _bytes(index: Any) -> int:
    """Size of the index as written to disk, which is what it holds in memory."""
    import faiss

    return int(faiss.serialize_index(index).size)


def _queries(questions: Path, n: int) -> np.ndarray:
    from index.embed import load_embedder
    from index.focus import focus
    from index.store import default_home

    rows = [json.loads(line) for line in questions.read_text(encoding="utf-8").splitlines() if line.strip()][:n]
    texts = [r["query"] for r in rows]
    texts += [" ".join(t.split()[:40]) for t in texts]
    embedder = load_embedder("static", cache_dir=default_home() / "models")
    return np.stack([embedder.encode_query(focus(t)) for t in texts]).astype(np.float32)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", type=Path, required=True, help="(n, dim) float32 .npy of normalised vectors")
    parser.add_argument("--questions", type=Path, required=True, help="SWE-bench-style questions (JSONL)")
    parser.add_argument("--queries", type=int, default=30, help="questions, each searched cut and whole")
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--configs", default="ivf:16,ivf:32,ivf:64")
    parser.add_argument("--out", type=Path, default=_OUT / "ann.json")
    args = parser.parse_args(argv)
    vectors = np.ascontiguousarray(np.load(args.vectors, mmap_mode="r"), dtype=np.float32)
    queries = _queries(args.questions, args.queries)
    flat, flat_build = _build("flat", vectors)
    exact: list[np.ndarray] = []  # scores of the exact k nearest, best first
    flat_ms = []
    for q in queries:
        c0 = time.process_time()
        scores, _ = flat.search(q.reshape(1, -1), args.k)
        flat_ms.append((time.process_time() - c0) * 1000)
        exact.append(scores[0])
    result: dict[str, Any] = {"vectors": len(vectors), "dim": int(vectors.shape[1]), "queries": len(queries),
                              "k": args.k, "configs": {"flat": {"build_cpu_s": round(flat_build, 1),
                                                                  "mib": round(_bytes(flat) / 2**20, 1),
                                                                  "query_cpu_p50_ms": round(statistics.median(flat_ms), 2),
                                                                  "recall_at_10": 1.0, "recall_at_100": 1.0,
                                                                  f"recall_at_{args.k}": 1.0}}}
    del flat
    built: dict[str, tuple[Any, float]] = {}
    for config in [c for c in args.configs.split(",") if c and c != "flat"]:
        kind = config.split(":")[0]
        ivf_kind = kind in ("ivf", "ivfflat")
        key = kind if ivf_kind else config
        if key not in built:
            built = {key: _build(f"{kind}:32" if ivf_kind else config, vectors, max(16, args.k))}  # one index in memory at a time
        index, build_s = built[key]
        if ivf_kind:
            import faiss

            ivf: Any = faiss.downcast_index(index.index)
            ivf.nprobe = int(config.split(":")[1])
        spent: list[float] = []
        recalls: dict[int, list[float]] = {10: [], 100: [], args.k: []}
        for q, scores in zip(queries, exact):
            c0 = time.process_time()
            _, ids = index.search(q.reshape(1, -1), args.k)
            spent.append((time.process_time() - c0) * 1000)
            ids = ids[0][ids[0] >= 0]
            found = np.sort(vectors[ids] @ q)[::-1]  # scored exactly: float16 storage scores approximately
            for k in recalls:
                recalls[k].append(recall(found, scores, k))
        result["configs"][config] = {"build_cpu_s": round(build_s, 1), "mib": round(_bytes(index) / 2**20, 1),
                                     "query_cpu_p50_ms": round(statistics.median(spent), 2),
                                     **{f"recall_at_{k}": round(statistics.fmean(v), 4) for k, v in recalls.items()}}
        print(f"{config}: {result['configs'][config]}", file=sys.stderr, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"{len(vectors)} vectors of {result['dim']} dimensions, {len(queries)} queries, k = {args.k}\n")
    print(f"| configuration | build CPU s | MiB | query CPU p50 ms | recall@10 | recall@100 | recall@{args.k} |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for config, row in result["configs"].items():
        print(f"| {config} | {row['build_cpu_s']} | {row['mib']} | {row['query_cpu_p50_ms']} | {row['recall_at_10']:.3f} "
              f"| {row['recall_at_100']:.3f} | {row[f'recall_at_{args.k}']:.3f} |")
    print(f"wrote {args.out}")
    print(reproduce("bench.ann_bench", argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
