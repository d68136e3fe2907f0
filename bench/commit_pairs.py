"""Extra training pairs for the learned second stage: commit messages of other public repositories.

    python -m bench.commit_pairs MIRROR... --work DIR --out FILE.pkl [--back 300] [--pairs 150]

Each MIRROR is a bare git repository (OWNER+NAME/repo, as the `fetch` of shared/bench mirrors)
that is none of shared/bench's nine repositories and none of any SWE-bench split's (their later
commits are the fixes the benchmarks ask about). For each one:

1. a snapshot S: the commit `--back` first-parent commits before the mirror's HEAD;
2. the tree at S, indexed as bench.swebench indexes a base commit (lexical + static vectors),
   with the history of S's ancestors only (index/history/commits.py);
3. pairs from the non-merge commits after S, oldest first: the question is the commit message (a
   subject and a body, as a report has a title and a body), the gold files the implementation
   files (not tests, docs or non-code: index/rank.is_auxiliary) it changed that exist at S, at
   most MAX_GOLD of them;
4. per pair, the second stage's candidates and feature rows (`index.search.file_features`), kept as
   bench.train_ranker Samples with repo `extra:NAME`.

`python -m bench.train_ranker ... --extra FILE.pkl` adds them to every fit; recall is still measured
on shared/bench alone, in-sample and leave-one-repository-out. A commit message is not a bug report
(shorter, written by someone who knows the code), so the report says whether they help.
"""

from __future__ import annotations

import argparse
import pickle
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.train_ranker import Sample
from index.build import BuildOptions, build_index, fill_vectors
from index.embed import load_embedder, resolve_spec
from index.files import is_auxiliary
from index.history import read_commits, update_from_git
from index.rank import title_of
from index.search import Searcher, file_features
from index.store import default_home

__all__ = ["collect_pairs", "main"]

MAX_GOLD = 3  # a commit changing more implementation files is a refactoring, not a located fix
MIN_WORDS = 4  # shorter messages ("fix typo") say nothing about where
MAX_QUERY_BYTES = 1 << 20


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, check=True).stdout.decode()


def _snapshot(git_dir: Path, back: int) -> str:
    shas = _git(git_dir, "rev-list", "--first-parent", f"--max-count={back + 1}", "HEAD").split()
    return shas[-1]


def _tree(git_dir: Path, sha: str, target: Path) -> Path:
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", sha], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def collect_pairs(git_dir: Path, name: str, work: Path, back: int, pairs: int, log: Any,
                  embedder_spec: str | None = "static") -> list[Sample]:
    """Samples from the commits after the snapshot of one mirror (see the module doc);
    `embedder_spec` None: a lexical index (the dense features are then empty)."""
    snapshot = _snapshot(git_dir, back)
    tree = _tree(git_dir, snapshot, work / "trees" / name)
    index_dir = work / "indexes" / name
    embedder_spec = resolve_spec(embedder_spec)  # the MiniLM the index gets here, loaded once below
    build = build_index(tree, index_dir, BuildOptions(embedder=embedder_spec, history=False, rebuild=True))
    embedder = load_embedder(embedder_spec, cache_dir=default_home() / "models") if embedder_spec else None
    if embedder is not None:
        fill_vectors(index_dir, embedder=embedder)
    history = update_from_git(git_dir, snapshot, index_dir)
    log(f"{name}@{snapshot[:12]}: {build.chunks} chunks, history of {history.commits} commits")
    searcher = Searcher(index_dir, embedder_loader=(lambda _spec: embedder) if embedder else None,
                        max_query_bytes=MAX_QUERY_BYTES, learned=False)
    present = set(searcher.manifest.files)
    # oldest first; paths as at HEAD, so a file renamed after the snapshot is not a gold file of it
    later = read_commits(git_dir, "HEAD", 100_000, since=snapshot)[0][::-1]
    samples: list[Sample] = []
    for read in later:
        gold = [f for f in read.commit.files if f in present and not is_auxiliary(f)]
        message = read.message.strip()
        # a subject alone is a one-line question, which the product answers without the second stage
        if not 0 < len(gold) <= MAX_GOLD or len(message.split()) < MIN_WORDS or title_of(message) is None:
            continue
        paths, features = file_features(searcher, message)
        mask = np.fromiter((p in gold for p in paths), dtype=bool, count=len(paths))
        samples.append(Sample(f"{name}@{read.commit.sha[:12]}", f"extra:{name}", features, mask,
                              len(read.message.encode())))
        if len(samples) == pairs:
            break
    found = sum(bool(s.gold.any()) for s in samples)
    log(f"{name}: {len(samples)} pairs ({found} with a gold file among the candidates)")
    return samples


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mirrors", nargs="+", type=Path, help="bare git repositories, OWNER+NAME/repo")
    parser.add_argument("--work", type=Path, required=True, help="trees and indexes (large; never committed)")
    parser.add_argument("--out", type=Path, required=True, help="the pickled Samples")
    parser.add_argument("--back", type=int, default=300, help="first-parent commits between snapshot and HEAD")
    parser.add_argument("--pairs", type=int, default=150, help="pairs per repository at most")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"{time.perf_counter() - started:7.1f}s {message}", file=sys.stderr, flush=True)

    samples: list[Sample] = []
    for mirror in args.mirrors:
        name = mirror.parent.name if mirror.name == "repo" else mirror.name
        samples.extend(collect_pairs(mirror, name, args.work, args.back, args.pairs, log))
    args.out.write_bytes(pickle.dumps(samples))
    log(f"{len(samples)} pairs written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
