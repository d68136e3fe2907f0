"""Embedding throughput and quality on CPython's own standard library.

    python -m bench.embed_bench [--chunks 1000] [--minilm-chunks 300] [--queries 200] [--repeats 2]

Corpus: the standard library's .py files (test folders excluded) cut into 40-line pieces, of
which a fixed random sample is used. In one run it measures

1. raw `SentenceTransformer.encode` on the MiniLM sample (chunks/s),
2. `embed_with_cache` with an empty cache on the same texts (must keep >= 0.9x of raw),
3. the static (model2vec, distilled from MiniLM) backend on all chunks, raw and through the cache,
4. `embed_with_cache` again with the cache warm (no encoding at all),
5. side by side on the same MiniLM sample, the two MiniLM paths an index can get: `minilm`
   (OpenVINO, in bf16 where the CPU has it in hardware, else float32) and `minilm-int8` (ONNX
   Runtime, dynamic int8), and which of them `bridge index` would choose here,
6. the query latency of both paths (one `encode_query` at a time, taking turns): the derived
   queries below, and whole chunks (256 word pieces, as much as a pasted bug report is read).

The CPU is recorded as the kernel lists it and as torch and OpenVINO see it. To measure an
AVX2-only CPU on a machine with more, run the bench under bench/avx2_only/run.sh, which hides
AVX-512, AVX-VNNI, bf16 and AMX from CPUID (the record says so).

Timings of 1, 2 and 5 run in `--repeats` rounds in which the reference and each candidate take
turns, since other processes share the CPU; best, median and the per-round ratio are kept.

Quality: for each of `--queries` chunks of the MiniLM sample a query is derived from the chunk
itself: its first docstring line, else its first comment, else its first def/class name with
underscores turned into spaces. Every query is searched (cosine, exhaustive) against the whole
MiniLM sample, and recall@1 / recall@10 count how often the chunk it came from ranks first / in
the top ten (each path encodes its queries its own way). A second
check asks 20 natural-language questions (bench/data/nl_stdlib_questions.jsonl) over 40-line pieces of
six stdlib packages and counts how often the nearest piece is in the right file (dense only). The
query text stays inside its chunk, so this measures how well an embedder keeps a short description
close to the code around it; the hash embedder is the lexical floor.
Writes bench/out/embed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.paths import reproduce
from index.embed import INT8_SPEC, EmbeddingCache, HashEmbedder, describe_path, embed_with_cache, load_embedder, resolve_spec

__all__ = ["collect_chunks", "derive_query", "main", "recall_at", "run"]

_LINES = 40
_OUT = Path(__file__).resolve().parent / "out"
_NL_QUESTIONS = Path(__file__).resolve().parent / "data" / "nl_stdlib_questions.jsonl"
_NL_PACKAGES = ("json", "urllib", "logging", "http", "concurrent", "tomllib")
_DOCSTRING = re.compile(r'^\s*[rbuRBU]{0,2}(?P<quote>"""|\'\'\')\s*(?P<q>\S.*?)\s*(?P=quote)?\s*$')
_COMMENT = re.compile(r"^\s*#\s*(?P<q>[A-Za-z].{8,})$")
_FEATURES = {"avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8"}
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


def recall_at(queries: np.ndarray, corpus: np.ndarray, targets: Sequence[int], ks: Sequence[int]) -> dict[str, float]:
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


def _interleaved(rounds: int, works: dict[str, Callable[[], Any]]) -> dict[str, list[float]]:
    """Seconds of each work in each of `rounds` rounds; within a round the works take turns."""
    seconds: dict[str, list[float]] = {name: [] for name in works}
    for _ in range(rounds):
        for name, work in works.items():
            t0 = time.perf_counter()
            work()
            seconds[name].append(time.perf_counter() - t0)
    return seconds


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


def cpu_features() -> dict[str, Any]:
    """The CPU as the kernel lists it and as the model libraries see it (they differ when
    bench/avx2_only/run.sh hides features from CPUID), and what the bench was told it runs on."""
    flags: set[str] = set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    import torch

    from index.embed.bulk import _openvino

    return {
        "model": platform.processor() or platform.machine(),
        "cores": len(os.sched_getaffinity(0)),
        "kernel_flags": sorted(flags & _FEATURES),
        "openvino_sees": _openvino().Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"),
        "torch_sees": torch.backends.cpu.get_cpu_capability(),
        "run_as": os.environ.get("BRIDGE_BENCH_CPU", "this CPU as it is"),
    }


def _nl_corpus() -> tuple[list[str], list[str]]:
    """40-line pieces of the six stdlib packages the natural-language questions are about."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts: list[str] = []
    files: list[str] = []
    for package in _NL_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            for start in range(0, len(lines), _LINES):
                piece = "\n".join(lines[start : start + _LINES])
                if piece.strip():
                    texts.append(f"{path.relative_to(root).as_posix()}\n{piece}")
                    files.append(path.relative_to(root).as_posix())
    return texts, files


def _nl_recall(embedder: Any, texts: list[str], files: list[str], questions: list[dict[str, Any]]) -> float:
    """File-level recall@1 of dense retrieval alone: is the top chunk's file a gold file?"""
    corpus = embedder.encode(texts)
    hits = 0
    for q in questions:
        best = int(np.argmax(corpus @ embedder.encode_query(q["query"])))
        hits += files[best] in q["gold_files"]
    return round(hits / len(questions), 3)


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
    reference = load_embedder("minilm-torch")
    result["minilm_load_s"] = round(time.perf_counter() - t0, 2)
    reference.encode(sample[:8])  # first call pays one-off allocations; keep it out of every timing
    model = reference.model  # type: ignore[attr-defined]

    result["cpu"] = cpu_features()
    chosen = resolve_spec("minilm")
    result["chosen"] = {"spec": chosen, "path": describe_path(chosen)}
    default = load_embedder("minilm", cache_dir=cache_dir)
    t0 = time.perf_counter()
    default.export_query_graph()  # type: ignore[attr-defined]  # exports the graph once per cache folder
    result["onnx_export_s"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    default.encode(sample[:8])  # compiles the OpenVINO model on first use (once per cache folder)
    result["default_first_load_s"] = round(time.perf_counter() - t0, 2)
    int8 = load_embedder(INT8_SPEC, cache_dir=cache_dir)
    t0 = time.perf_counter()
    int8.encode(sample[:8])  # quantizes the graph on first use (once per cache folder)
    result["int8_first_load_s"] = round(time.perf_counter() - t0, 2)
    candidates: dict[str, Any] = {
        f"minilm ({describe_path('minilm').split(';')[0]})": default,
        f"minilm-int8 ({describe_path(INT8_SPEC).split(';')[0]})": int8,
    }
    for emb in candidates.values():
        emb.encode(sample[:8])
    # The reference and every candidate take turns in each round, so a burst of load from other
    # processes hits all of them; ratios are reported both best-to-best and as the median of the
    # ratios within each round.
    works: dict[str, Callable[[], Any]] = {
        "raw": lambda: model.encode(sample, batch_size=64, normalize_embeddings=True),
        "cached": _through_cache(reference, sample, _fresh_files(tmp / "minilm")),
        **{name: _through_cache(emb, sample, _fresh_files(tmp / f"c{i}")) for i, (name, emb) in enumerate(candidates.items())},
    }
    result["load_average_before"] = [round(x, 1) for x in os.getloadavg()]
    rounds = _interleaved(repeats, works)
    result["load_average_after"] = [round(x, 1) for x in os.getloadavg()]
    result["rounds_s"] = {name: [round(x, 2) for x in seconds] for name, seconds in rounds.items()}
    raw_s, ours_s = min(rounds["raw"]), min(rounds["cached"])
    warm_path = tmp / "minilm" / "cold0.sqlite"  # filled completely by the first cold run
    warm_s = _best_of(repeats, _through_cache(reference, sample, lambda: warm_path))
    result["minilm"] = {
        "id": reference.id, "dim": reference.dim,
        "raw_chunks_per_s": round(len(sample) / raw_s, 1),
        "raw_chunks_per_s_median": round(len(sample) / float(np.median(rounds["raw"])), 1),
        "cached_cold_chunks_per_s": round(len(sample) / ours_s, 1),
        "cold_vs_raw": round(raw_s / ours_s, 3),
        "cached_warm_chunks_per_s": round(len(sample) / warm_s, 1),
    }
    backends: dict[str, dict[str, Any]] = {}
    for name in candidates:
        seconds = rounds[name]
        paired = [r / c for r, c in zip(rounds["raw"], seconds)]
        backends[name] = {"chunks_per_s": round(len(sample) / min(seconds), 1),
                          "chunks_per_s_median": round(len(sample) / float(np.median(seconds)), 1),
                          "speedup_vs_torch_raw": round(raw_s / min(seconds), 2),
                          "speedup_paired_median": round(float(np.median(paired)), 2),
                          "speedup_paired_min": round(min(paired), 2)}

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

    derived = [(i, q) for i, chunk in enumerate(sample) if (q := derive_query(chunk))]
    derived = derived[:queries]
    targets = [i for i, _ in derived]
    query_texts = [q for _, (_, q) in derived]
    kinds = [kind for _, (kind, _) in derived]
    everyone: dict[str, Any] = {"minilm": reference, **candidates, "static": static, "hash": HashEmbedder()}
    ref_vectors = reference.encode(sample)
    nl_texts, nl_files = _nl_corpus()
    questions = [json.loads(line) for line in _NL_QUESTIONS.read_text().splitlines() if line.strip()]
    quality: dict[str, Any] = {}
    for name, emb in everyone.items():
        vectors = emb.encode(sample)
        query_vectors = np.stack([emb.encode_query(q) for q in query_texts])
        row: dict[str, Any] = recall_at(query_vectors, vectors, targets, (1, 10))
        if name in candidates:
            row["min_cosine_to_torch"] = round(float((vectors * ref_vectors).sum(axis=1).min()), 5)
        row["nl_recall@1"] = _nl_recall(emb, nl_texts, nl_files, questions)
        quality[name] = row
    base = quality["minilm"]
    for name in candidates:
        quality[name]["recall@10_vs_torch"] = round(quality[name]["recall@10"] / base["recall@10"], 3)
        backends[name].update(quality[name])
    for name, latency in _query_latency(candidates, query_texts, sample[:_LONG_QUERIES]).items():
        backends[name].update(latency)
    result["backends"] = backends
    result["quality"] = {
        "queries": len(derived), "query_kinds": {k: kinds.count(k) for k in sorted(set(kinds))},
        "corpus_chunks": len(sample), "nl_questions": len(questions), "nl_corpus_chunks": len(nl_texts),
        **quality,
    }
    return result


_LONG_QUERIES = 40  # whole chunks as queries: 256 word pieces, as long as a pasted bug report is read


def _query_latency(candidates: dict[str, Any], short: Sequence[str], long: Sequence[str]) -> dict[str, dict[str, float]]:
    """Median ms of one `encode_query`, a query at a time as search makes them, the candidates taking
    turns on each text: the derived self-retrieval queries (a few words to a line) and whole chunks."""
    out: dict[str, dict[str, float]] = {name: {} for name in candidates}
    for kind, texts in (("short", short), ("long", long)):
        times: dict[str, list[float]] = {name: [] for name in candidates}
        for text in texts:
            for name, emb in candidates.items():
                t0 = time.perf_counter()
                emb.encode_query(text)
                times[name].append((time.perf_counter() - t0) * 1000)
        for name, ms in times.items():
            out[name][f"query_ms_{kind}_p50"] = round(statistics.median(ms), 2)
    return out


def _table(result: dict[str, Any]) -> str:
    m, s, q, cpu = result["minilm"], result["static"], result["quality"], result["cpu"]
    rows = [
        ("CPU", (f"{cpu['model']}, {cpu['cores']} cores; kernel flags {' '.join(cpu['kernel_flags'])}; "
                 f"run as {cpu['run_as']}; torch sees {cpu['torch_sees']}, OpenVINO {' '.join(cpu['openvino_sees'])}")),
        ("chosen by `bridge index` here", f"{result['chosen']['spec']}: {result['chosen']['path']}"),
        ("MiniLM raw SentenceTransformer.encode (fp32)",
         f"{m['raw_chunks_per_s']:.1f} chunks/s (median {m['raw_chunks_per_s_median']:.1f})"),
        ("MiniLM embed_with_cache, empty cache", (f"{m['cached_cold_chunks_per_s']:.1f} chunks/s "
         f"({m['cold_vs_raw']:.2f}x raw: {'ok' if m['cold_vs_raw'] >= 0.9 else 'BELOW 0.9x'})")),
        ("MiniLM embed_with_cache, warm cache", f"{m['cached_warm_chunks_per_s']:.0f} chunks/s"),
    ]
    for name, b in result["backends"].items():
        rows.append((f"{name}, empty cache", (
            f"{b['chunks_per_s']:.1f} chunks/s (median {b['chunks_per_s_median']:.1f}; {b['speedup_vs_torch_raw']:.2f}x "
            f"torch best/best, per round median {b['speedup_paired_median']:.2f}x, min {b['speedup_paired_min']:.2f}x)")))
        rows.append((f"{name}, one query p50", (
            f"{b['query_ms_short_p50']:.1f} ms a line, {b['query_ms_long_p50']:.1f} ms 256 word pieces")))
    rows += [
        ("static raw StaticModel.encode", f"{s['raw_chunks_per_s']:.0f} chunks/s"),
        ("static embed_with_cache, empty cache", (f"{s['cached_cold_chunks_per_s']:.0f} chunks/s "
         f"({s['speedup_vs_minilm_raw']:.0f}x MiniLM raw)")),
        ("load: MiniLM / static (incl. distil) / ONNX export",
         f"{result['minilm_load_s']} s / {result['static_load_s']} s / {result['onnx_export_s']} s"),
    ]
    for name in ("minilm", *result["backends"], "static", "hash"):
        r = q[name]
        cosine = f"; min cos to torch {r['min_cosine_to_torch']:.4f}" if "min_cosine_to_torch" in r else ""
        rows.append((f"quality {name}", (f"self r@1 {r['recall@1']:.3f} r@10 {r['recall@10']:.3f}; "
                     f"NL r@1 {r['nl_recall@1']:.2f}{cosine}")))
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=1000, help="stdlib chunks for the static backend")
    parser.add_argument("--minilm-chunks", type=int, default=300, help="first N of them for MiniLM")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3, help="rounds of timings (best and median are kept)")
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
          f"{result['seconds']} s in all; torch threads {result['torch_threads']}; load average "
          f"{result['load_average_before']} before the timings, {result['load_average_after']} after; wrote {args.out}")
    print(reproduce("bench.embed_bench", argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
