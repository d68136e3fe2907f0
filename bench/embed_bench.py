"""Embedding throughput and quality on CPython's own standard library.

    python -m bench.embed_bench [--chunks 1000] [--minilm-chunks 300] [--queries 200] [--repeats 2]

Corpus: the standard library's .py files (test folders excluded) cut into 40-line pieces, of
which a fixed random sample is used. In one run it measures

1. raw `SentenceTransformer.encode` on the MiniLM sample (chunks/s),
2. `embed_with_cache` with an empty cache on the same texts (must keep >= 0.9x of raw),
3. the static (model2vec, distilled from MiniLM) backend on all chunks, raw and through the cache,
4. `embed_with_cache` again with the cache warm (no encoding at all).

Throughput is the best of `--repeats` runs, since other processes share the CPU.

Quality: for each of `--queries` chunks of the MiniLM sample a query is derived from the chunk
itself: its first docstring line, else its first comment, else its first def/class name with
underscores turned into spaces. Every query is searched (cosine, exhaustive) against the whole
MiniLM sample, and recall@1 / recall@10 count how often the chunk it came from ranks first / in
the top ten. The query text stays inside its chunk, so this measures how well an embedder keeps a
short description close to the code around it; the hash embedder is the lexical floor.
Writes bench/out/embed.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from index.embed import EmbeddingCache, HashEmbedder, embed_with_cache, load_embedder

__all__ = ["collect_chunks", "derive_query", "main", "recall_at", "run"]

_LINES = 40
_OUT = Path(__file__).resolve().parent / "out"
_DOCSTRING = re.compile(r'^\s*[rbuRBU]{0,2}(?P<quote>"""|\'\'\')\s*(?P<q>\S.*?)\s*(?P=quote)?\s*$')
_COMMENT = re.compile(r"^\s*#\s*(?P<q>[A-Za-z].{8,})$")
_DEFINITION = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")


def collect_chunks(count: int, seed: int = 0) -> list[str]:
    """A fixed random sample of 40-line pieces of the stdlib with at least 10 non-blank lines."""
    root = Path(sysconfig.get_paths()["stdlib"])
    pieces: list[str] = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if parts[0] == "site-packages" or any(p in ("test", "tests", "idle_test") for p in parts):
            continue
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for start in range(0, len(lines), _LINES):
            piece = lines[start : start + _LINES]
            if sum(bool(line.strip()) for line in piece) >= 10:
                pieces.append("\n".join(piece))
    return random.Random(seed).sample(pieces, min(count, len(pieces)))


def derive_query(chunk: str) -> tuple[str, str] | None:
    """(kind, query) taken from the chunk's own description of itself, or None."""
    lines = chunk.splitlines()
    for kind, pattern in (("docstring", _DOCSTRING), ("comment", _COMMENT)):
        for line in lines:
            match = pattern.match(line)
            if match and len(match["q"].split()) >= 3:
                return kind, match["q"]
    for line in lines:
        if match := _DEFINITION.match(line):
            words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", match.group(1)).replace("_", " ").strip()
            if len(words) >= 4:
                return "name", words.lower()
    return None


def recall_at(
    queries: np.ndarray, corpus: np.ndarray, targets: Sequence[int], ks: Sequence[int]
) -> dict[str, float]:
    scores = queries @ corpus.T
    own = scores[np.arange(len(targets)), targets]
    # Rank = number of chunks scoring strictly higher than the right one (ties favour it).
    ranks = (scores > own[:, None]).sum(axis=1)
    return {f"recall@{k}": round(float((ranks < k).mean()), 3) for k in ks}


def _best_of(repeats: int, work: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - t0)
    return best


def _through_cache(embedder: Any, texts: Sequence[str], cache_path: Callable[[], Path]) -> Callable[[], Any]:
    """Work that embeds `texts` through the cache file `cache_path()` names at each call."""
    items = [(f"c{i}", t) for i, t in enumerate(texts)]

    def work() -> dict[str, np.ndarray]:
        with EmbeddingCache(cache_path()) as cache:
            return embed_with_cache(embedder, cache, items)

    return work


def _fresh_files(folder: Path) -> Callable[[], Path]:
    """A new, empty cache file at every call, so each repeat starts cold."""
    count = iter(range(1_000_000))
    return lambda: folder / f"cold{next(count)}.sqlite"


def run(chunks: int, minilm_chunks: int, queries: int, repeats: int, cache_dir: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        return _run(chunks, minilm_chunks, queries, repeats, cache_dir, Path(tmp))


def _run(
    chunks: int, minilm_chunks: int, queries: int, repeats: int, cache_dir: Path, tmp: Path
) -> dict[str, Any]:
    import torch

    texts = collect_chunks(chunks)
    sample = texts[:minilm_chunks]
    result: dict[str, Any] = {
        "corpus": {"chunks": len(texts), "minilm_chunks": len(sample), "lines_per_chunk": _LINES,
                   "python": platform.python_version()},
        "torch_threads": torch.get_num_threads(),
        "repeats": repeats,
    }

    t0 = time.perf_counter()
    minilm = load_embedder("minilm")
    result["minilm_load_s"] = round(time.perf_counter() - t0, 2)
    minilm.encode(sample[:8])  # first call pays one-off allocations; keep it out of both timings
    model = minilm.model  # type: ignore[attr-defined]
    raw_s = _best_of(repeats, lambda: model.encode(sample, batch_size=64, normalize_embeddings=True))
    ours_s = _best_of(repeats, _through_cache(minilm, sample, _fresh_files(tmp / "minilm")))
    warm_path = tmp / "minilm" / "cold0.sqlite"  # filled completely by the first cold run
    warm_s = _best_of(repeats, _through_cache(minilm, sample, lambda: warm_path))
    with EmbeddingCache(warm_path) as cache:
        minilm_vectors = cache.get_many(minilm.id, [f"c{i}" for i in range(len(sample))])
    result["minilm"] = {
        "id": minilm.id, "dim": minilm.dim,
        "raw_chunks_per_s": round(len(sample) / raw_s, 1),
        "cached_cold_chunks_per_s": round(len(sample) / ours_s, 1),
        "cold_vs_raw": round(raw_s / ours_s, 3),
        "cached_warm_chunks_per_s": round(len(sample) / warm_s, 1),
    }

    t0 = time.perf_counter()
    static = load_embedder("static", cache_dir=cache_dir)
    result["static_load_s"] = round(time.perf_counter() - t0, 2)
    static_model = static.model  # type: ignore[attr-defined]
    static_raw_s = _best_of(repeats, lambda: static_model.encode(texts, show_progress_bar=False))
    static_ours_s = _best_of(repeats, _through_cache(static, texts, _fresh_files(tmp / "static")))
    result["static"] = {
        "id": static.id, "dim": static.dim,
        "raw_chunks_per_s": round(len(texts) / static_raw_s, 1),
        "cached_cold_chunks_per_s": round(len(texts) / static_ours_s, 1),
        "speedup_vs_minilm_raw": round((len(texts) / static_ours_s) / (len(sample) / raw_s), 1),
    }

    hashing = HashEmbedder()
    derived = [(i, q) for i, chunk in enumerate(sample) if (q := derive_query(chunk))]
    derived = derived[:queries]
    targets = [i for i, _ in derived]
    query_texts = [q for _, (_, q) in derived]
    kinds = [kind for _, (kind, _) in derived]
    corpora = {
        "minilm": (minilm, np.stack([minilm_vectors[f"c{i}"] for i in range(len(sample))])),
        "static": (static, static.encode(sample)),
        "hash": (hashing, hashing.encode(sample)),
    }
    result["quality"] = {
        "queries": len(derived),
        "query_kinds": {k: kinds.count(k) for k in sorted(set(kinds))},
        "corpus_chunks": len(sample),
        **{name: recall_at(emb.encode(query_texts), vecs, targets, (1, 10))
           for name, (emb, vecs) in corpora.items()},
    }
    return result


def _table(result: dict[str, Any]) -> str:
    m, s, q = result["minilm"], result["static"], result["quality"]
    rows = [
        ("MiniLM raw SentenceTransformer.encode", f"{m['raw_chunks_per_s']:.1f} chunks/s"),
        ("MiniLM embed_with_cache, empty cache", f"{m['cached_cold_chunks_per_s']:.1f} chunks/s "
         f"({m['cold_vs_raw']:.2f}x raw: {'ok' if m['cold_vs_raw'] >= 0.9 else 'BELOW 0.9x'})"),
        ("MiniLM embed_with_cache, warm cache", f"{m['cached_warm_chunks_per_s']:.0f} chunks/s"),
        ("static raw StaticModel.encode", f"{s['raw_chunks_per_s']:.0f} chunks/s"),
        ("static embed_with_cache, empty cache", f"{s['cached_cold_chunks_per_s']:.0f} chunks/s "
         f"({s['speedup_vs_minilm_raw']:.0f}x MiniLM raw)"),
        ("load: MiniLM / static (incl. distil)", f"{result['minilm_load_s']} s / {result['static_load_s']} s"),
    ]
    for name in ("minilm", "static", "hash"):
        rows.append((f"quality {name}: recall@1 / @10", f"{q[name]['recall@1']:.3f} / {q[name]['recall@10']:.3f}"))
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=1000, help="stdlib chunks for the static backend")
    parser.add_argument("--minilm-chunks", type=int, default=300, help="first N of them for MiniLM")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=2, help="timings keep the best of N runs")
    parser.add_argument("--cache-dir", type=Path, default=_OUT / "models", help="where the static model is kept")
    parser.add_argument("--out", type=Path, default=_OUT / "embed.json")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    result = run(args.chunks, args.minilm_chunks, args.queries, args.repeats, args.cache_dir)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    q = result["quality"]
    print(_table(result))
    print(f"\n{q['queries']} queries {q['query_kinds']} over {q['corpus_chunks']} chunks; "
          f"{result['seconds']} s in all; torch threads {result['torch_threads']}; wrote {args.out}")
    command = " ".join(["python -m bench.embed_bench", *(argv if argv is not None else sys.argv[1:])])
    print(f"reproduce (from the repository root): {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
