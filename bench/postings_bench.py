"""BM25 build at a million chunks, memory and time: streaming writer against the in-memory build.

    python -m bench.postings_bench [--chunks 1000000] [--terms-per-chunk 150] [--vocab 2000000]

The term ids of `--chunks` synthetic documents (lengths and term frequencies drawn from Zipf
laws, like code: a few very common terms, a long tail) are fed to `index.postings.LexicalWriter`
and, in a second child process, to `LexicalIndex.build` through a `TermCorpus`. Each child reports
its wall time and its own peak RSS (VmHWM). This isolates the part of indexing that grows with the
repository (chunking and tokenising are per file); bench/scale_bench.py measures whole builds.
Writes bench/out/postings.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from bench.paths import reproduce

__all__ = ["main", "synthetic"]

_OUT = Path(__file__).resolve().parent / "out"
_BATCH = 10_000


def synthetic(chunks: int, per_chunk: int, vocab: int, seed: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(term ids, lengths) of `_BATCH` documents at a time."""
    rng = np.random.default_rng(seed)
    for start in range(0, chunks, _BATCH):
        n = min(_BATCH, chunks - start)
        lengths = np.clip(rng.normal(per_chunk, per_chunk / 3, n), 1, 4 * per_chunk).astype(np.int32)
        ids = (rng.zipf(1.3, int(lengths.sum())) - 1) % vocab
        yield ids.astype(np.int32), lengths


def _streaming(args: argparse.Namespace, folder: Path) -> None:
    from index.postings import LexicalWriter

    writer = LexicalWriter(folder, [f"t{i}" for i in range(args.vocab)])
    for ids, lengths in synthetic(args.chunks, args.terms_per_chunk, args.vocab):
        writer.add_ids(ids, lengths)
    writer.finish()


def _in_memory(args: argparse.Namespace, folder: Path) -> None:
    from index.lexical import CorpusBuilder, LexicalIndex

    builder = CorpusBuilder([f"t{i}" for i in range(args.vocab)])
    for ids, lengths in synthetic(args.chunks, args.terms_per_chunk, args.vocab):
        for doc in np.split(ids, np.cumsum(lengths)[:-1]):
            builder.add_ids(doc)
    corpus = builder.build()
    LexicalIndex.build(corpus).save(folder)
    corpus.save(folder)


def _child(args: argparse.Namespace, engine: str) -> dict[str, float]:
    argv = [sys.executable, "-m", "bench.postings_bench", "--child", engine, "--chunks", str(args.chunks),
            "--terms-per-chunk", str(args.terms_per_chunk), "--vocab", str(args.vocab)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=Path(__file__).resolve().parents[1])
    if proc.returncode:
        return {"error": proc.returncode, "stderr": proc.stderr.strip()[-300:]}  # type: ignore[dict-item]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--terms-per-chunk", type=int, default=150)
    parser.add_argument("--vocab", type=int, default=2_000_000)
    parser.add_argument("--engines", default="streaming,in-memory")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=_OUT / "postings.json")
    args = parser.parse_args(argv)
    if args.child:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            (_streaming if args.child == "streaming" else _in_memory)(args, Path(tmp))
            seconds = time.perf_counter() - t0
            size = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
        status = Path("/proc/self/status").read_text().splitlines()
        hwm = next(line for line in status if line.startswith("VmHWM")).split()[1]
        print(json.dumps({"seconds": round(seconds, 1), "peak_rss_mb": round(int(hwm) / 1024), "files_mb": round(size)}))
        return 0
    result = {"chunks": args.chunks, "terms_per_chunk": args.terms_per_chunk, "vocab": args.vocab,
              **{engine: _child(args, engine) for engine in args.engines.split(",")}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(reproduce("bench.postings_bench", argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
