"""A delta re-index against a full rebuild on shared/bench: are the answers the same?

    python -m bench.delta_bench --corpora DIR --questions FILE [--repos requests flask ...] [--work DIR]

For each repository, its first NAME@COMMIT tree under `--corpora` is hard-linked into `--work`,
indexed (lexical only), then changed as a working session would change it: one function appended
to a gold file of the repository's first question, one new file, one file removed. The change is
indexed twice, as a delta over the first index (index/delta.py) and as a full rebuild, and every
question of that repository is asked of both: the top-10 file lists of hybrid file ranking
(without vectors) and the top-10 lexical chunk hits (path and lines) are compared. Writes
bench/out/delta_bench.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.paths import reproduce

_ROOT = Path(__file__).resolve().parents[1]
_OUT = _ROOT / "bench" / "out"


def _change(tree: Path, gold: str) -> None:
    """Edit, add and remove a file; files are replaced, never written through the hard links."""
    target = tree / gold
    text = target.read_bytes()
    target.unlink()
    target.write_bytes(text + b"\n\ndef delta_bench_helper(value):\n    \"\"\"Normalise a value.\"\"\"\n    return value\n")
    (tree / "delta_bench_added.py").write_text("def parse_delta_bench_options(argv):\n    return dict(a.split('=') for a in argv)\n")
    victims = sorted(p for p in tree.rglob("*.py") if p.name != "__init__.py" and "test" not in p.name and p != target)
    victims[len(victims) // 2].unlink()


def _answers(index_dir: Path, queries: list[str]) -> tuple[list[list[str]], list[list[tuple[str, int, int]]]]:
    from index.search import Searcher

    searcher = Searcher(index_dir)
    files = [[p for p, _ in searcher.rank_files(q)[:10]] for q in queries]
    hits = [[(h.path, h.start_line, h.end_line) for h in searcher.search(q, k=10, mode="lexical").hits] for q in queries]
    return files, hits


def _repo(corpora: Path, work: Path, repo: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    from index.build import BuildOptions, build_index
    from index.segments import load_segments
    from index.store import IndexDir

    name = repo.split("/")[-1]
    source = sorted(p for p in corpora.iterdir() if p.name.split("@")[0] == name)[0]
    tree = work / name / "tree"
    shutil.rmtree(work / name, ignore_errors=True)
    tree.parent.mkdir(parents=True)
    subprocess.run(["cp", "-al", str(source), str(tree)], check=True)
    delta_dir, full_dir = work / name / "delta", work / name / "full"
    lexical = BuildOptions(embedder=None, history=False)
    first = build_index(tree, delta_dir, lexical)
    gold = next(g for r in rows for g in r["gold_files"] if (tree / g).is_file())
    _change(tree, gold)
    t = time.process_time()
    delta = build_index(tree, delta_dir, lexical)
    delta_cpu = time.process_time() - t
    info = load_segments(IndexDir(delta_dir).current())
    t = time.process_time()
    build_index(tree, full_dir, BuildOptions(embedder=None, history=False, rebuild=True))
    full_cpu = time.process_time() - t
    queries = [r["query"] for r in rows]
    (files_d, hits_d), (files_f, hits_f) = _answers(delta_dir, queries), _answers(full_dir, queries)
    return {
        "repo": repo, "tree": source.name, "chunks": first.chunks, "questions": len(queries),
        "delta": info is not None, "delta_chunks": info.n_delta if info else 0,
        "deleted_chunks": len(info.deleted) if info else 0,
        "same_top10_files": sum(a == b for a, b in zip(files_d, files_f)),
        "same_top10_file_sets": sum(set(a) == set(b) for a, b in zip(files_d, files_f)),
        "same_top10_lexical_hits": sum(a == b for a, b in zip(hits_d, hits_f)),
        "delta_reindex_cpu_s": round(delta_cpu, 2), "full_rebuild_cpu_s": round(full_cpu, 2),
        "delta_new_chunks": delta.new_chunks,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", type=Path, required=True, help="folder of NAME@COMMIT source trees")
    parser.add_argument("--questions", type=Path, required=True, help="SWE-bench-style questions (JSONL)")
    parser.add_argument("--repos", nargs="+", default=["requests", "flask", "seaborn", "pylint", "pytest"])
    parser.add_argument("--work", type=Path, default=_OUT / "delta_bench")
    parser.add_argument("--out", type=Path, default=_OUT / "delta_bench.json")
    args = parser.parse_args(argv)
    rows = [json.loads(line) for line in args.questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    results = []
    for name in args.repos:
        mine = [r for r in rows if r["repo"].split("/")[-1] == name]
        if mine:
            results.append(_repo(args.corpora, args.work, mine[0]["repo"], mine))
            print(json.dumps(results[-1]), flush=True)
    total = {k: sum(r[k] for r in results) for k in ("questions", "same_top10_files", "same_top10_file_sets",
                                                      "same_top10_lexical_hits")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"repos": results, "total": total}, indent=2) + "\n")
    print("| repository | chunks | delta / deleted chunks | questions | same top-10 files (order) | same sets "
          "| same top-10 lexical hits | delta re-index CPU s | full rebuild CPU s |\n|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['repo']} | {r['chunks']} | {r['delta_chunks']} / {r['deleted_chunks']} | {r['questions']} "
              f"| {r['same_top10_files']} | {r['same_top10_file_sets']} | {r['same_top10_lexical_hits']} "
              f"| {r['delta_reindex_cpu_s']} | {r['full_rebuild_cpu_s']} |")
    print(f"total: {total}")
    print(f"wrote {args.out}")
    print(reproduce("bench.delta_bench", argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
