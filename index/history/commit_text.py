"""What the repository's past commits said about each file, as one searchable text per file.

The history votes (index/history/commits.py) ask which few commits read most like a question. This asks
the other way round: every file's "commit text" is the messages (subject and body) of all the
stored commits that touched it, and BM25 ranks files by how well their commit text matches the
question. Over the years a file collects the words its maintainers use for it ("blueprint",
"autosummary", "dot in name"), words a bug report uses too, though the code may not.

Measured on shared/bench (bench/archive/RESULTS-journal.md, issue 11, fourth pass): alone, the title's match
puts the gold file in the top 5 of the fused candidates for 0.51 of the reports; as two
features of the learned second stage it lifts leave-one-repository-out recall@1 by three
questions and recall@5 by two. It is built from the stored commit terms on first use (0.075 s
for 20,000 commits; a query then costs 0.4 ms) and never written: the history folder stays as
it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from index.store import LexicalIndex, TermCorpus

__all__ = ["CommitText"]


class CommitText:
    """BM25 over one document per file: the concatenated terms of the commits that touched it."""

    def __init__(self, paths: Sequence[str], lexical: LexicalIndex) -> None:
        self.paths = tuple(paths)
        self.lexical = lexical
        self._targets: tuple[Mapping[str, int], int, np.ndarray] | None = None

    @staticmethod
    def build(commit_files: Sequence[Sequence[str]], corpus: TermCorpus) -> CommitText:
        """From each commit's files and the term ids of its message (`corpus.doc(i)` for commit i)."""
        number: dict[str, int] = {}
        pairs: list[tuple[int, int]] = []  # (file number, commit number)
        for commit, files in enumerate(commit_files):
            for path in files:
                pairs.append((number.setdefault(path, len(number)), commit))
        pairs.sort()
        docs = [corpus.doc(commit) for _, commit in pairs]
        lengths = np.bincount(np.fromiter((f for f, _ in pairs), dtype=np.int64, count=len(pairs)),
                              weights=np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs)),
                              minlength=len(number)).astype(np.int64)
        offsets = np.zeros(len(number) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.concatenate(docs).astype(np.int32) if docs else np.zeros(0, dtype=np.int32)
        return CommitText(list(number), LexicalIndex.build(TermCorpus(corpus.vocab, ids, offsets)))

    def scores(self, query_terms: Sequence[str], numbers: Mapping[str, int], n_files: int) -> np.ndarray:
        """BM25 of the query against each file's commit text, per file number of `numbers` (the
        index's path -> number; 0 for files no stored commit touched)."""
        out = np.zeros(n_files)
        if not self.paths or not query_terms:
            return out
        mine, theirs = self._mapping(numbers, n_files)
        out[theirs] = self.lexical.scores(query_terms)[mine]
        return out

    def _mapping(self, numbers: Mapping[str, int], n_files: int) -> tuple[np.ndarray, np.ndarray]:
        """(own document numbers, the index's file numbers) of the files both know; cached for one
        `numbers` table, the one a generation keeps for all its queries."""
        cached = self._targets
        if cached is None or cached[0] is not numbers or cached[1] != n_files:
            found = [(i, numbers[p]) for i, p in enumerate(self.paths) if p in numbers and numbers[p] < n_files]
            cached = self._targets = (numbers, n_files, np.asarray(found, dtype=np.int64).reshape(-1, 2))
        pairs = cached[2]
        return pairs[:, 0], pairs[:, 1]
