"""The read path: lexical and dense rankings fused by reciprocal rank, merged, filtered, packed.

Fusion (index/rank/fusion.py): score = Σ 1 / (RRF_K + rank) over the rankings a chunk appears in.

Hybrid mode also ranks files (index/rank/evidence.py: the chunk rankings seen per file, the summary line,
files and modules the query names, definitions of the identifiers it uses, tests and docs
demoted) and answers file first: one chunk of each of the k best files, scored by its file's
score (a report's chunk picked by the chunk stage, index/rank/chunks.py); further chunks follow only
when fewer than k files have any evidence. Under a token budget a report's lead file gets most of it, in
several of its chunks, and each other hit a few lines (index/search/lead.py).
`lexical` and `vector` are the two single retrievers, ranked chunk by chunk. Every mode searches a
report longer than 4 KB by its focused text (index/rank/focus.py: its pasted output left out).
An index whose vectors this install cannot read (no dense extra) is searched as one without vectors,
and the result's `note` says so (index/search/dense.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from index.errors import BadQuery, CorruptIndex, NoIndex
from index.history import History, LiveHistory, SubjectVectors
from index.rank import (
    DENSE_CHUNKS,
    SIGNALS,
    ChunkStage,
    FileScores,
    QueryEvidence,
    Question,
    Ranker,
    as_text,
    glob_mask,
    load_chunk_stage,
    load_ranker,
    rrf,
    top_k,
)
from index.search.chooser import chunk_chooser
from index.search.dense import QueryModel
from index.search.hits import files_first, focus_lines, marked_stale, merge_hits, pack_for, pointers
from index.search.lead import docstring_lines, lead_candidates, pack_lead
from index.search.source import Generation, LocalStore, Store
from index.search.stale import StaleCount
from index.search.votes import NO_VOTES, Votes, gather_votes, with_evidence
from index.store import Manifest
from index.types import MODES, Chunk, Hit, IndexInfo, Mode, SearchResult

if TYPE_CHECKING:
    from index.embed import Embedder

__all__ = ["DEFAULT_MAX_TOKENS", "MAX_K", "MAX_QUERY_BYTES", "Searcher", "too_long"]

MAX_K = 50
MAX_QUERY_BYTES = 64 * 1024  # a whole bug report with its traceback; one limit for CLI, MCP and chat
# Token budget of a search's hits when a caller names none (MCP `search_code`, the chat loop):
# a few hundred tokens is what a 4K-8K context can spare for code each turn.
DEFAULT_MAX_TOKENS = 600
_CANDIDATES = 100  # per retriever, before fusion and merging


class Searcher:
    """Answers queries from the live generation of one index; reloads when a writer publishes.

    Safe to share between threads. The embedder is loaded on the first query that needs it, so
    a lexical-only process never imports it, and the default MiniLM answers queries without torch
    (index/embed/minilm.py). That one-off load is reported as `load_ms`, apart from `took_ms`.
    """

    def __init__(
        self,
        index_dir: Path | None = None,
        embedder_loader: Callable[[str], Embedder] | None = None,
        max_query_bytes: int = MAX_QUERY_BYTES,
        store: Store | None = None,
        learned: bool = True,
    ) -> None:
        if store is None:
            if index_dir is None:
                raise TypeError("Searcher needs an index_dir or a store")
            store = LocalStore(index_dir)
        self.store = store
        self.max_query_bytes = max_query_bytes
        self._lock = threading.RLock()
        self._dense = QueryModel(embedder_loader)
        self._gen: Generation | None = None
        self._stale = StaleCount()
        folder = getattr(store, "path", None)  # only a local index folder keeps history; Milvus has none
        self._history = LiveHistory(folder) if isinstance(folder, Path) else None
        self._numbers: dict[str, int] = {}
        self.ranker: Ranker | None = load_ranker() if learned else None
        self.chunk_stage: ChunkStage | None = load_chunk_stage() if learned else None
        self.refresh()

    def refresh(self) -> None:
        """Open the live generation if it is not the one loaded (cheap when nothing changed).

        The new generation is loaded outside the lock, so searches keep answering from the old
        one meanwhile; two threads that race here load it twice and one copy wins, harmlessly.
        """
        current = self.store.live()
        if self._gen is not None and self._gen.name == current:
            return
        gen = self.store.open(current)
        with self._lock:
            if self._gen is not None and self._gen.name == current:
                gen.close()
                return
            self._gen = gen
            self._numbers = {path: i for i, path in enumerate(gen.files.paths)}

    @property
    def manifest(self) -> Manifest:
        assert self._gen is not None
        return self._gen.manifest

    @property
    def dense_missing(self) -> str | None:
        """Why this process searches without the index's vectors; None while it can read them (or has none)."""
        return self._dense.missing

    @property
    def root(self) -> Path:
        return Path(self.manifest.root)

    def history(self) -> History | None:
        """The index's past commits (index/history/commits.py), reloaded when a re-index rewrites them;
        None without any (outside git, `--no-history`, a Milvus store)."""
        return self._history.get() if self._history is not None else None

    def _votes(self, gen: Generation, question: Question, subjects: bool = True) -> Votes:
        """`subjects`: also ask the subject vectors (only the learned second stage reads them)."""
        return gather_votes(self.history(), question, self._numbers, len(gen.files.paths),
                            (lambda vectors, title: self._read_title(gen, vectors, title)) if subjects else None)

    def _read_title(self, gen: Generation, vectors: SubjectVectors, title: str) -> np.ndarray | None:
        return self._dense.read_title(gen, vectors, title)

    def warm(self) -> None:
        """Load the live generation and everything a hybrid search reads from it (vectors, file
        tables, the history's commit text), so that the first search after a re-index does not pay
        for loading them."""
        self.refresh()
        gen = self._gen
        assert gen is not None
        self._dense.vectors(gen)
        gen.files.prepare()
        history = self.history()
        if history is not None:
            history.commit_text()
            if history.subjects is not None:
                self._dense.warm_subjects(gen, history.subjects.spec)

    def embedded_chunks(self) -> int:
        assert self._gen is not None
        vectors = self._dense.vectors(self._gen)
        return vectors.count if vectors else 0

    def verify(self) -> None:
        """Read a little of every file a search opens, so damage shows now and not in a later search."""
        gen = self._gen
        assert gen is not None
        files = gen.files
        sliced = files.n_chunks > 0  # a delta generation's ids have holes: its first and last live ids
        firsts, ends = files.first_chunk[sliced], files.first_chunk[sliced] + files.n_chunks[sliced]
        ids = sorted({int(firsts.min()), int(ends.max()) - 1}) if len(firsts) else []
        if len(gen.chunks(ids)) != len(ids):
            raise CorruptIndex(f"index at {self.store.location} lost chunk rows: run `bridge index --rebuild`")
        if self._dense.vectors(gen) is not None:
            gen.vector_meta()

    def info(self, fresh: bool = False) -> IndexInfo:
        gen = self._gen
        assert gen is not None
        m = gen.manifest
        return IndexInfo(m.root, len(m.files), m.chunks, self.embedded_chunks(), m.built_at, self.stale_files(fresh))

    def stale_files(self, fresh: bool = False) -> int:
        """Indexed files changed or gone on disk since the build; a count up to a few seconds old
        unless `fresh` (index/search/stale.py)."""
        gen = self._gen
        assert gen is not None
        return self._stale.get(gen.name, Path(gen.manifest.root), gen.manifest.files, fresh)

    def search(
        self,
        query: str,
        k: int = 5,
        mode: str = "hybrid",
        max_tokens: int | None = None,
        path_glob: str | None = None,
    ) -> SearchResult:
        """`mode` is checked here (BadQuery), so callers may pass what a user typed."""
        t0 = time.perf_counter()
        query = as_text(query)
        mode = _check(query, k, mode, max_tokens, self.max_query_bytes)
        self.refresh()
        gen = self._gen
        assert gen is not None
        allowed = glob_mask(gen.paths, path_glob)
        load_ms = self._dense.load(gen) if mode != "lexical" and self._dense.has_vectors(gen) else 0.0
        question = Question.of(query)  # read once; a long report is searched without its pasted output
        scores, near = self._retrieve(gen, question, mode, allowed)
        note = self.dense_missing if mode == "hybrid" and gen.manifest.embedder else None
        lexical, dense, fused, order = _fused_order(scores, near)
        votes, pointed, choose = NO_VOTES, None, None
        if mode == "hybrid":
            votes = self._votes(gen, question)
            evidence = _evidence(gen, question, scores, near, allowed, votes)
            file_score = _file_scores(gen, evidence, allowed, SIGNALS, self.ranker)
            pointed = pointers(gen.files, question)
            choose = chunk_chooser(self.chunk_stage, evidence) if question.title is not None else None
            order, fused = files_first(gen.files, file_score, scores, order, fused, k, pointed, gen.chunks, choose)
        hits = with_evidence(self._hits(gen, order, fused, lexical, dense, k), votes)
        root = Path(gen.manifest.root)
        hits = marked_stale(hits, root, gen.manifest.files)
        ranked = choose.ranked.get(hits[0].path) if choose is not None and hits and max_tokens is not None else None
        if ranked is not None and max_tokens is not None:  # a report: most of the budget for its lead file (lead.py)
            score = hits[0].score
            more = lead_candidates(ranked, hits, lambda ids: self._as_hits(gen, ids, score, lexical, dense))
            focus = focus_lines(hits, question, pointed, gen.files.paths)
            docs = docstring_lines(choose.chunks[hits[0].path]) if choose is not None else frozenset()
            hits, truncated = pack_lead(hits, marked_stale(more, root, gen.manifest.files), max_tokens, focus, docs)
        else:
            hits, truncated = pack_for(hits, max_tokens, question, pointed, gen.files.paths)
        took = (time.perf_counter() - t0) * 1000 - load_ms
        return SearchResult(query, mode, took, tuple(hits), truncated, self.info(), load_ms, note)

    def _open(self, query: str) -> tuple[Generation, Question]:
        """The live generation and the question read once, after the checks a hybrid search makes."""
        query = as_text(query)
        _check(query, 1, "hybrid", None, self.max_query_bytes)
        self.refresh()
        assert self._gen is not None
        return self._gen, Question.of(query)

    def _retrieve(
        self, gen: Generation, question: Question, mode: str, allowed: np.ndarray | None
    ) -> tuple[np.ndarray, list[tuple[int, float]]]:
        """BM25 score of every chunk (empty in vector mode) and the nearest chunks (empty without vectors)."""
        scores = np.zeros(0)
        near: list[tuple[int, float]] = []
        if mode in ("hybrid", "lexical"):
            scores = _masked(gen.bm25(question.terms, allowed), allowed)
        if mode in ("hybrid", "vector"):
            vectors = self._dense.vectors(gen)
            query_vector = self._dense.encode(gen, question.text) if vectors is not None and vectors.count else None
            if vectors is not None and query_vector is not None:
                wanted = DENSE_CHUNKS if mode == "hybrid" else _CANDIDATES
                near = vectors.top(query_vector, wanted, allowed)
            elif mode == "vector" and self._dense.missing is not None:
                raise NoIndex(f"mode vector cannot run here: {self._dense.missing.removeprefix('lexical only: ')}; "
                              "use mode hybrid or lexical")
            elif mode == "vector":
                raise NoIndex(
                    "this index has no vectors yet: run `bridge index REPO` without --no-vectors, "
                    "or use --mode lexical"
                )
        return scores, near

    def _hits(
        self, gen: Generation, order: list[int], fused: dict[int, float], lexical: list[int], dense: list[int], k: int
    ) -> list[Hit]:
        lex_rank = {c: r for r, c in enumerate(lexical, 1)}
        vec_rank = {c: r for r, c in enumerate(dense, 1)}
        hits: list[Hit] = []
        pos = 0
        while len(hits) < k and pos < len(order):
            # merging may fold several chunks into one hit, so fetch more until k hits remain
            batch = order[pos : pos + 2 * k]
            pos += len(batch)
            rows = gen.chunks(batch)
            if len(rows) != len(batch):
                raise CorruptIndex(f"index at {self.store.location} lost chunk rows: run `bridge index --rebuild`")
            for cid in batch:
                hits.append(_hit(rows[cid], fused[cid], lex_rank.get(cid), vec_rank.get(cid)))
            hits = merge_hits(hits)
        return hits[:k]

    def _as_hits(self, gen: Generation, ids: list[int], score: float, lexical: list[int], dense: list[int]) -> dict[int, Hit]:
        """Chunks by id as hits scored `score` (the lead file's other chunks take its hit's score)."""
        rows = gen.chunks(ids)
        return {cid: _hit(c, score, _rank(lexical, cid), _rank(dense, cid)) for cid, c in rows.items()}

    def read_chunks(self, ids: list[int]) -> dict[int, Chunk]:
        assert self._gen is not None
        return self._gen.chunks(ids)


def _rank(ranking: list[int], cid: int) -> int | None:
    return ranking.index(cid) + 1 if cid in ranking else None


def _masked(scores: np.ndarray, allowed: np.ndarray | None) -> np.ndarray:
    return scores if allowed is None else np.where(allowed, scores, 0.0)


def _evidence(gen: Generation, question: Question, scores: np.ndarray, near: list[tuple[int, float]],
              allowed: np.ndarray | None, votes: Votes) -> QueryEvidence:
    title_scores = _masked(gen.bm25(question.title_terms, allowed), allowed) if question.title else None
    return QueryEvidence(question, scores, title_scores, near, votes.scores, votes.text, votes.title_text,
                         votes.subject_votes, votes.subject_voters)


def _fused_order(
    scores: np.ndarray, near: list[tuple[int, float]]
) -> tuple[list[int], list[int], dict[int, float], list[int]]:
    """The best chunks by BM25 and by vector, their fused scores and the fused order (best first)."""
    lexical = top_k(scores, _CANDIDATES) if len(scores) else []
    dense = [cid for cid, _ in near[:_CANDIDATES]]
    fused = rrf([r for r in (lexical, dense) if r])
    return lexical, dense, fused, sorted(fused, key=lambda c: (-fused[c], c))


def _file_scores(
    gen: Generation, evidence: QueryEvidence, allowed: np.ndarray | None, weights: Mapping[str, float],
    ranker: Ranker | None = None,
) -> FileScores:
    files = gen.files
    file_allowed = None
    if allowed is not None:
        has_chunks = files.n_chunks > 0
        file_allowed = np.zeros(len(files.paths), dtype=bool)
        file_allowed[has_chunks] = allowed[files.first_chunk[has_chunks]]
    return files.rank(evidence, file_allowed, weights, ranker)


def _hit(c: Chunk, score: float, lexical_rank: int | None, vector_rank: int | None) -> Hit:
    return Hit(c.path, c.start_line, c.end_line, score, lexical_rank, vector_rank, c.symbol, c.language, c.text, c.tokens)


def too_long(size: int, max_bytes: int = MAX_QUERY_BYTES) -> str:
    """What a refusal of a query of `size` bytes says after its subject (CLI, MCP and chat alike)."""
    return f"is {size} bytes, over the {max_bytes}-byte ({max_bytes // 1024} KB) limit: shorten it"


def _check(query: str, k: int, mode: str, max_tokens: int | None, max_bytes: int) -> Mode:
    if not query or not query.strip():
        raise BadQuery("query is empty: say what to look for, e.g. 'where is the config parsed'")
    if not any(ch.isalnum() for ch in query):
        raise BadQuery(f"query {query.strip()[:40]!r} has no letters or digits: say what to look for in words or names")
    size = len(query.encode("utf-8"))
    if size > max_bytes:
        raise BadQuery(f"query {too_long(size, max_bytes)}")
    if not 1 <= k <= MAX_K:
        raise BadQuery(f"k={k} is out of range: use 1 to {MAX_K}")
    if mode not in MODES:
        raise BadQuery(f"mode={mode!r} is unknown: use hybrid, lexical or vector")
    if max_tokens is not None and max_tokens < 1:
        raise BadQuery(f"max_tokens={max_tokens} is out of range: use a positive number")
    return mode
