"""Local store vs Milvus (a real `milvus-lite server` on 127.0.0.1) on SWE-bench Lite trees.

Per tree: build both stores (same embedder), then
- hybrid file recall@5 of the tree's questions, local and Milvus;
- lexical top-1 file agreement on queries made from chunk first lines (deterministic sample);
- build seconds and query p50/p99 for both.

    python bench/milvus_bench.py QUESTIONS.jsonl CORPORA --repos flask,requests --embedder hash --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.milvus import MilvusLiteServer

from index.build import BuildOptions, build_index, fill_vectors
from index.milvus import MilvusStore, build_milvus
from index.search import Searcher


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("questions", type=Path)
    ap.add_argument("corpora", type=Path)
    ap.add_argument("--repos", default="flask,requests")
    ap.add_argument("--embedder", default="hash")
    ap.add_argument("--lexical-queries", type=int, default=200)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    wanted = set(args.repos.split(","))
    questions = [json.loads(line) for line in args.questions.read_text().splitlines() if line.strip()]
    questions = [q for q in questions if q["repo"].split("/")[-1] in wanted]
    work = Path(tempfile.mkdtemp(prefix="milvus-bench-"))
    os.environ.setdefault("BRIDGE_HOME", str(work / "home"))
    server = MilvusLiteServer(work / "milvus").start()
    rows, agree, lex_total = [], 0, 0
    times: dict[str, list[float]] = {"local": [], "milvus": []}
    build: dict[str, float] = {"local": 0.0, "milvus": 0.0}
    chunks_total = 0
    try:
        trees: dict[str, list[dict]] = {}
        for q in questions:
            tree = f"{q['repo'].split('/')[-1]}@{q['base_commit'][:12]}"
            trees.setdefault(tree, []).append(q)
        per_tree_lex = max(1, args.lexical_queries // max(len(trees), 1))
        for tree, qs in sorted(trees.items()):
            root = args.corpora / tree
            t = time.perf_counter()
            build_index(root, work / tree, BuildOptions(embedder=args.embedder))
            fill_vectors(work / tree)
            build["local"] += time.perf_counter() - t
            store = MilvusStore(server.uri, root)
            t = time.perf_counter()
            build_milvus(root, store, embedder=args.embedder, rebuild=True)
            build["milvus"] += time.perf_counter() - t
            local, remote = Searcher(work / tree), Searcher(store=store)
            chunks_total += local.manifest.chunks
            for q in qs:
                found = {}
                for name, s in (("local", local), ("milvus", remote)):
                    t = time.perf_counter()
                    hits = s.search(q["query"][:4000], k=5, mode="hybrid").hits
                    times[name].append((time.perf_counter() - t) * 1000)
                    found[name] = any(h.path in q["gold_files"] for h in hits)
                rows.append({"id": q["id"], "tree": tree, **found})
            rng = random.Random(13)
            ids = rng.sample(range(local.manifest.chunks), min(per_tree_lex, local.manifest.chunks))
            for cid in ids:
                line = next((x.strip() for x in local.read_chunks([cid])[cid].text.splitlines() if x.strip()), "")
                if not line:
                    continue
                a = local.search(line[:400], k=1, mode="lexical").hits
                b = remote.search(line[:400], k=1, mode="lexical").hits
                lex_total += 1
                agree += (a[0].path if a else None) == (b[0].path if b else None)
    finally:
        server.stop()
    n = len(rows)
    result = {
        "repos": sorted(wanted), "trees": len({r["tree"] for r in rows}), "questions": n, "chunks": chunks_total,
        "embedder": args.embedder,
        "recall_at_5": {k: round(sum(r[k] for r in rows) / n, 3) if n else None for k in ("local", "milvus")},
        "lexical_top1_agreement": round(agree / lex_total, 3) if lex_total else None, "lexical_queries": lex_total,
        "build_s": {k: round(v, 1) for k, v in build.items()},
        "hybrid_query_ms": {k: {"p50": round(statistics.median(v), 1), "p99": round(_pct(v, 0.99), 1)}
                            for k, v in times.items() if v},
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"result": result, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
