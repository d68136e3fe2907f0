"""File-level evidence for hybrid search: which files a question is about.

A question such as a bug report asks "which file?" as much as "which lines?". Hybrid search
therefore ranks files too, with six signals fused by weighted reciprocal rank (the fusion the
chunks use: score = Σ weight / (RRF_K + rank); ONE_LINE_RRF_K for a question of one line):

- chunks: a file's best chunk BM25 score for the whole question;
- files: its chunks' summed BM25 over the square root of its chunk count, which rewards a file
  whose vocabulary covers the whole question without simply favouring long files;
- title: a file's best chunk BM25 for the first line alone, when the question has several lines
  (a report's summary line says what is wrong; its body adds logs, versions and package lists);
- mentions: files the question names, as a path (tracebacks: `File ".../pkg/mod.py"`) or as a
  dotted module (`from pkg.mod import f`), most-named first;
- definitions: files whose chunks define identifiers the question uses in code (backticks, code
  blocks, tracebacks, or names shaped like code), by the summed idf of those names;
- dense: a file's best chunk cosine among the DENSE_CHUNKS nearest chunks.

Auxiliary files (tests, docs, examples, files in no programming language) have their fused score
multiplied by AUXILIARY_FACTOR unless the question names them: a report of wrong behaviour is
answered by the implementation, and tests and docs repeat its vocabulary. Weights are all 1 and
the constants round numbers; bench/swebench.py measures each signal's share (bench/archive/RESULTS-journal.md).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from index.files import is_auxiliary, is_auxiliary_code, path_kinds
from index.rank.clues import aggregate_matrix, clue_matrix
from index.rank.filescores import FileScores, mask, ranking
from index.rank.fusion import RRF_K
from index.rank.question import QueryClues, Question
from index.rank.ranker import RERANK, Ranker, feature_matrix, path_fact_row, relative_columns, subject_columns

__all__ = [
    "AGREED_TOP",
    "AUXILIARY_FACTOR",
    "DENSE_CHUNKS",
    "ONE_LINE_RRF_K",
    "SIGNALS",
    "FileEvidence",
    "QueryEvidence",
    "fuse",
]

AUXILIARY_FACTOR = 0.5
# An auxiliary code file that BM25 and the dense signal both rank this high is what the question is
# about; it keeps its whole score (`FileEvidence.agreed`).
AGREED_TOP = 2
# The fused order is the answer for a question of one line (the learned stage reads reports), and
# its constant was chosen on shared/bench's titles asked alone: R@1 0.450 at 60, 0.471 at 30 with
# R@5 unchanged, 0.479 at 20 with R@5 lower (bench/DECISIONS.md). Reports keep RRF_K: the learned
# stage was trained on features fused with it.
ONE_LINE_RRF_K = 30
DENSE_CHUNKS = 1000  # nearest chunks looked at for the dense file ranking
MAX_MATCHES = 3  # a mention matching more files than this is too vague to count
# "history" (index/history/commits.py) has no hand-set weight: it reaches the order only through the
# learned second stage (index/rank/ranker.py), which measured what it is worth.
SIGNALS: Mapping[str, float] = {"chunks": 1.0, "files": 1.0, "title": 1.0, "mentions": 1.0, "definitions": 1.0,
                                "dense": 1.0, "history": 0.0}

def fuse(rankings: Mapping[str, Sequence[int]], weights: Mapping[str, float],
         demoted: frozenset[int] = frozenset(), factor: float = 1.0, k: int = RRF_K) -> dict[int, float]:
    """Weighted reciprocal-rank fusion of file rankings (constant k); files in `demoted` have their
    score × factor."""
    score: dict[int, float] = {}
    for name, weight in weights.items():
        for rank, i in enumerate(rankings.get(name, ()), start=1):
            score[i] = score.get(i, 0.0) + weight / (k + rank)
    for i in demoted & score.keys():
        score[i] *= factor
    return score


def _fuse_arrays(
    rankings: Mapping[str, np.ndarray], weights: Mapping[str, float], demoted: np.ndarray, factor: float, n: int,
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """`fuse` over n files as arrays: (score of every file, whether it is in some ranking).

    The same float operations in the same order per file as `fuse` (0.0 plus each signal's
    weight / (k + rank), signal after signal, then × factor), so the scores are identical;
    a file appears at most once in a ranking, so the fancy `+=` adds each term once. In Python,
    `fuse` cost 9 ms per question at 2k files and grew with the files that have any evidence."""
    score = np.zeros(n)
    seen = np.zeros(n, dtype=bool)
    for name, weight in weights.items():
        order = rankings.get(name, _NONE)
        score[order] += weight / (k + np.arange(1, len(order) + 1, dtype=np.float64))
        seen[order] = True
    score[demoted & seen] *= factor
    return score, seen


_NONE = np.zeros(0, dtype=np.int64)


def _order(values: np.ndarray, keep: np.ndarray | None = None) -> list[int]:
    """Indices where `keep` (default: a positive value), best value first; ties by index."""
    order: list[int] = ranking(values, values > 0 if keep is None else keep).tolist()
    return order


@dataclass(frozen=True)
class QueryEvidence:
    """What one question found chunk by chunk: everything the file ranking is computed from."""

    question: Question
    chunk_scores: np.ndarray  # BM25 of the whole question, per chunk id
    title_scores: np.ndarray | None = None  # BM25 of its first line, when it has several
    dense: Sequence[tuple[int, float]] = ()  # the nearest chunks and their cosine
    history: np.ndarray | None = None  # summed votes of similar past commits, per file
    commit_text: np.ndarray | None = None  # BM25 of the question against each file's commit text
    commit_title: np.ndarray | None = None  # the same for its first line, when it has several
    subject_votes: np.ndarray | None = None  # cosines of the commits whose subjects mean what the title means
    subject_voters: np.ndarray | None = None  # how many of those commits touched each file


class FileEvidence:
    """The file-level view of one index generation; the lookup tables are built on first use."""

    def __init__(
        self, paths: Sequence[str], first_chunk: np.ndarray, n_chunks: np.ndarray,
        symbols: Callable[[], list[tuple[int, str]]], n_ids: int | None = None,
    ) -> None:
        self.paths = tuple(paths)
        self.first_chunk, self.n_chunks = first_chunk, n_chunks
        # File number of every chunk id. A delta generation (index/store/segments.py) has `n_ids` ids,
        # its deleted chunks holes that no ranking holds, so the 0 they map to is never read.
        size = int(n_chunks.sum()) if n_ids is None else n_ids
        self.chunk_file = np.zeros(size, dtype=np.int64)
        for i, (first, n) in enumerate(zip(first_chunk.tolist(), n_chunks.tolist())):
            self.chunk_file[first : first + n] = i
        # Chunk ids run file after file, so a file's chunks are one slice: per-file maxima and sums
        # are one reduceat over the files that have chunks, in chunk order.
        self._sliced = np.flatnonzero(n_chunks > 0)
        self._sliced = self._sliced[np.argsort(first_chunk[self._sliced], kind="stable")]
        self._sqrt_counts = np.sqrt(np.maximum(n_chunks, 1))
        self._symbols = symbols
        self._lock = threading.Lock()
        self._suffixes: dict[str, list[int]] | None = None
        self._definitions: dict[str, frozenset[int]] | None = None
        self._auxiliary: frozenset[int] | None = None
        self._auxiliary_mask: np.ndarray | None = None
        self._auxiliary_code: np.ndarray | None = None
        self._facts: np.ndarray | None = None

    def rank(
        self,
        found: QueryEvidence,
        allowed: np.ndarray | None = None,
        weights: Mapping[str, float] = SIGNALS,
        ranker: Ranker | None = None,
    ) -> FileScores:
        """Score of every file with some evidence (`allowed`: a mask over files). With a `ranker`,
        the RERANK best files by fused score are
        re-ordered by it and scored above the rest (scores in (1, 2]); the rest keep the fused
        order (scores in (0, 1]). A question of one line keeps the fused order: the ranker was
        trained on bug reports, every one a title and a body, and its title features are empty
        for a single line."""
        fused, rows, features = self.candidates(found, allowed, weights)
        if ranker is None or not len(fused) or found.question.title is None:
            return fused
        learned = ranker.scores(features)
        # `rows` are the best of `fused`; the rest scale by the largest fused score, rows[0]'s.
        scores = fused.scores / fused.scores[np.searchsorted(fused.files, rows[0])]
        scores[np.searchsorted(fused.files, rows)] = np.exp(learned - learned.max()) + 1.0
        return FileScores(fused.files, scores)

    def candidates(
        self, found: QueryEvidence, allowed: np.ndarray | None = None, weights: Mapping[str, float] = SIGNALS
    ) -> tuple[FileScores, np.ndarray, np.ndarray]:
        """(fused score of every file with evidence, the RERANK best of them, their FEATURES rows).

        Every signal's ranking is an array, ordered once; the fused scores stay an array of which
        only the RERANK best are sorted (index/rank/filescores.py): exactly the order and the scores
        that sorting every file gave, at a fraction of the cost at 50k files."""
        values = self.values(found)
        rankings = {}
        for name, v in values.items():
            keep = np.isfinite(v) if name == "dense" else v > 0
            rankings[name] = ranking(v, keep if allowed is None else keep & allowed)
        n = len(self.paths)
        named = mask(rankings["mentions"], n)
        demoted = self.auxiliary_mask() & ~named & ~self.agreed(rankings)
        k = RRF_K if found.question.title is not None else ONE_LINE_RRF_K
        score, seen = _fuse_arrays(rankings, weights, demoted, AUXILIARY_FACTOR, n, k)
        files = np.flatnonzero(seen)
        fused = FileScores(files, score[files])  # as `fuse` computes it
        rows = fused.best(RERANK)
        dense_values = values["dense"]
        features = feature_matrix(
            rows, rankings, {**values, "dense": np.where(np.isfinite(dense_values), np.maximum(dense_values, 0.0), 0.0)},
            score, named, demoted, values["history"], self.path_facts(),
        )
        commit_text = relative_columns(rows, found.commit_text, found.commit_title)
        return fused, rows, np.hstack([features, self.clue_features(found, rows), commit_text,
                                       subject_columns(rows, found.subject_votes, found.subject_voters)])

    def clue_features(self, found: QueryEvidence, rows: np.ndarray) -> np.ndarray:
        """CLUE_FEATURES and AGGREGATE_FEATURES of index/rank/clues.py for the candidate files `rows`."""
        question, title_scores, dense = found.question, found.title_scores, found.dense
        named = frozenset(self.mentioned(question.title_clues)) if question.title_clues else frozenset()
        last = frozenset(self.last_mentioned(question.clues))
        clues = clue_matrix(self.paths, rows, question.text, question.title, named, last, self._definition_table())
        title_per_file = self._per_file(title_scores, np.add) / self._sqrt_counts if title_scores is not None else None
        dense_ids = np.fromiter((cid for cid, _ in dense), dtype=np.int64, count=len(dense))
        return np.hstack([clues, aggregate_matrix(rows, self.chunk_file, title_per_file, found.chunk_scores, dense_ids)])

    def values(self, found: QueryEvidence) -> dict[str, np.ndarray]:
        """Each signal's value per file (0, or -inf for dense, where it has no evidence)."""
        chunk_scores, title_scores, dense, history = found.chunk_scores, found.title_scores, found.dense, found.history
        n = len(self.paths)
        best, total = self._per_file(chunk_scores, np.maximum), self._per_file(chunk_scores, np.add)
        title = self._per_file(title_scores, np.maximum) if title_scores is not None else np.zeros(n)
        near = np.full(n, -np.inf)
        if dense:
            ids = np.fromiter((cid for cid, _ in dense), dtype=np.int64, count=len(dense))
            similarity = np.fromiter((sim for _, sim in dense), dtype=np.float64, count=len(dense))
            np.maximum.at(near, self.chunk_file[ids], similarity)
        clues = found.question.clues
        return {
            "chunks": best,
            "files": total / self._sqrt_counts,
            "title": title,
            "mentions": _spread(self.mentioned(clues), n),
            "definitions": self._defining_scores(clues),
            "dense": near,  # cosines may be negative
            "history": history if history is not None else np.zeros(n),
        }

    def path_facts(self) -> np.ndarray:
        """PATH_FACTS of index/rank/ranker.py for every file (built once)."""
        with self._lock:
            if self._facts is None:
                self._facts = self._path_fact_matrix()
            return self._facts

    def _path_fact_matrix(self) -> np.ndarray:
        rows = []
        for path, count in zip(self.paths, self.n_chunks.tolist()):
            rows.append(path_fact_row(path, *path_kinds(path), int(count)))
        return np.asarray(rows, dtype=np.float64).reshape(len(self.paths), -1)

    def _per_file(self, chunk_values: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
        out = np.zeros(len(self.paths))
        if len(self._sliced) and len(chunk_values):
            out[self._sliced] = ufunc.reduceat(chunk_values.astype(np.float64, copy=False), self.first_chunk[self._sliced])
        return out

    def mentioned(self, clues: QueryClues) -> list[int]:
        """Files the question names, most-named first (ties: first named first)."""
        table = self._suffix_table()
        counts: dict[int, int] = {}
        for mention in clues.paths:
            for i in _suffix_matches(mention, table):
                counts[i] = counts.get(i, 0) + 1
        for dotted in clues.modules:
            parts = dotted.split(".")
            for end in range(len(parts), 1, -1):  # the longest prefix that is a module wins
                module = "/".join(parts[:end])
                found = [*table.get(module + ".py", ()), *table.get(module + "/__init__.py", ())]
                if found:
                    if len(found) <= MAX_MATCHES:
                        for i in found:
                            counts[i] = counts.get(i, 0) + 1
                    break
        return sorted(counts, key=lambda i: -counts[i])  # sorted() is stable: first named stays first

    def last_mentioned(self, clues: QueryClues) -> Sequence[int]:
        """The files the last path the question names matches (a traceback's deepest frame)."""
        table = self._suffix_table()
        for mention in reversed(clues.paths):
            found = _suffix_matches(mention, table)
            if found:
                return found
        return ()

    def files_defining(self, name: str) -> frozenset[int]:
        """Files with a chunk whose symbol (`Class.method`) has `name` as one of its parts."""
        return self._definition_table().get(name, frozenset())

    def defining(self, clues: QueryClues) -> list[int]:
        """Files defining the question's identifiers, by the summed idf of the names they define."""
        return _order(self._defining_scores(clues))

    def _defining_scores(self, clues: QueryClues) -> np.ndarray:
        out = np.zeros(len(self.paths))
        if not clues.identifiers:
            return out
        definitions = self._definition_table()
        score: dict[int, float] = {}
        for name in clues.identifiers:
            where = definitions.get(name)
            if not where or name.startswith("__"):
                continue
            idf = math.log(len(self.paths) / len(where))
            for i in where:
                score[i] = score.get(i, 0.0) + idf
        for i, value in score.items():
            out[i] = value
        return out

    def prepare(self) -> None:
        """Build every lookup table now rather than on first use."""
        self.auxiliary_mask()
        self.auxiliary_code_mask()
        self._suffix_table()
        self._definition_table()

    def auxiliary(self) -> frozenset[int]:
        with self._lock:
            if self._auxiliary is None:
                self._auxiliary = frozenset(i for i, p in enumerate(self.paths) if is_auxiliary(p))
            return self._auxiliary

    def auxiliary_mask(self) -> np.ndarray:
        """`auxiliary()` as a mask over the files (built once)."""
        aux = self.auxiliary()
        with self._lock:
            if self._auxiliary_mask is None:
                self._auxiliary_mask = mask(aux, len(self.paths))
            return self._auxiliary_mask

    def agreed(self, rankings: Mapping[str, np.ndarray]) -> np.ndarray:
        """Auxiliary code (a benchmark, an example script) that both BM25's chunk ranking and the dense
        one hold among their AGREED_TOP best, as a mask over the files. Demoting it sent the three
        benchmark questions of the natural-language set out of hybrid's top 10 while lexical and vector
        each ranked them 1-2. Tests and prose stay demoted even then: they repeat the words of the code
        they describe. Exempting prose as well cost shared/bench's titles, asked as one-line questions,
        five of their 63 first places, and tests too ten (bench/archive/RESULTS-journal.md)."""
        n = len(self.paths)
        agreed: np.ndarray = mask(rankings["chunks"][:AGREED_TOP], n) & mask(rankings["dense"][:AGREED_TOP], n)
        agreed &= self.auxiliary_code_mask()
        return agreed

    def auxiliary_code_mask(self) -> np.ndarray:
        """`is_auxiliary_code` as a mask over the files (built once)."""
        with self._lock:
            if self._auxiliary_code is None:
                self._auxiliary_code = np.fromiter(map(is_auxiliary_code, self.paths), dtype=bool, count=len(self.paths))
            return self._auxiliary_code

    def file_named(self, path: str) -> int | None:
        """The one file a path mentioned in a question (a traceback's) stands for, if exactly one."""
        found = _suffix_matches(path, self._suffix_table())
        return found[0] if len(found) == 1 else None

    def _suffix_table(self) -> dict[str, list[int]]:
        with self._lock:
            if self._suffixes is None:
                table: dict[str, list[int]] = {}
                for i, path in enumerate(self.paths):
                    parts = path.split("/")
                    for start in range(len(parts)):
                        table.setdefault("/".join(parts[start:]), []).append(i)
                self._suffixes = table
            return self._suffixes

    def _definition_table(self) -> dict[str, frozenset[int]]:
        """identifier -> files with a chunk whose symbol (`Class.method`) names it."""
        with self._lock:
            if self._definitions is None:
                found: dict[str, set[int]] = {}
                for cid, symbol in self._symbols():
                    for name in symbol.split("."):
                        found.setdefault(name, set()).add(int(self.chunk_file[cid]))
                self._definitions = {name: frozenset(files) for name, files in found.items()}
            return self._definitions


def _suffix_matches(mention: str, by_suffix: Mapping[str, Sequence[int]]) -> Sequence[int]:
    # The longest tail of the mention that is the tail of some file path decides.
    parts = mention.strip("/").split("/")
    for start in range(len(parts)):
        found = by_suffix.get("/".join(parts[start:]))
        if found:
            return found if len(found) <= MAX_MATCHES else ()
    return ()


def _spread(order: Sequence[int], n: int) -> np.ndarray:
    """Values that reproduce `order` under _order: n, n-1, ... for the files in it, 0 elsewhere."""
    out = np.zeros(n)
    out[np.asarray(order, dtype=np.int64)] = np.arange(n, n - len(order), -1, dtype=np.float64)
    return out
