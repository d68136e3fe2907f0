"""File scores as arrays (index/rank/filescores.py) give exactly what sorting every file in Python gave."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from index.rank.evidence import AGREED_TOP, AUXILIARY_FACTOR, ONE_LINE_RRF_K, SIGNALS, FileEvidence, QueryEvidence, fuse
from index.rank.filescores import FileScores, best_first, ordered
from index.rank.fusion import RRF_K
from index.rank.question import Question, title_of
from index.rank.ranker import RERANK, feature_matrix, load_ranker, relative_columns, subject_columns


def by_sorting(ids: np.ndarray, values: np.ndarray) -> list[int]:
    value = dict(zip(ids.tolist(), values.tolist()))
    return sorted(value, key=lambda i: (-value[i], i))


@pytest.mark.parametrize("seed", range(20))
def test_ordered_is_a_full_sort_best_first_with_ties_to_the_lower_id(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ids = np.flatnonzero(rng.random(3000) < 0.6)
    values = np.round(rng.random(len(ids)) * (3 if seed % 2 else 300), 1)  # many ties, or few
    assert ordered(ids, values).tolist() == by_sorting(ids, values)


@pytest.mark.parametrize("seed", range(20))
def test_the_n_best_are_the_head_of_the_full_sort(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ids = rng.permutation(5000)[: rng.integers(1, 5000)]  # in any order
    values = np.round(rng.random(len(ids)) * 5, 1)
    full = by_sorting(ids, values)
    for n in (1, 7, 300, len(ids) - 1, len(ids), len(ids) + 5):
        assert best_first(ids, values, n).tolist() == full[:n]


def test_file_scores_read_as_the_mapping_of_file_to_score_they_replace() -> None:
    scores = FileScores(np.array([2, 5, 9]), np.array([0.5, 1.5, 0.5]))
    assert dict(scores) == {2: 0.5, 5: 1.5, 9: 0.5}
    assert scores.ordered().tolist() == [5, 2, 9] and scores.best(2).tolist() == [5, 2]
    with pytest.raises(KeyError):
        scores[3]


def random_evidence(rng: np.random.Generator, n: int) -> FileEvidence:
    kinds = ["pkg/mod{}.py", "tests/test_mod{}.py", "docs/page{}.rst", "pkg/sub/m{}.py", "bench/b{}.py"]
    paths = [kinds[int(rng.integers(len(kinds)))].format(i) for i in range(n)]
    counts = rng.integers(0, 6, n)  # some files have no chunk
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    return FileEvidence(paths, first, counts, lambda: [])


def reference_rank(ev: FileEvidence, query: str, values: dict[str, np.ndarray], allowed: np.ndarray | None,
                   ranked: bool, clue_features: Callable[[np.ndarray], np.ndarray]) -> dict[int, float]:
    """The file ranking as it was computed before scores became arrays: full sorts and dicts.
    `clue_features` gives index/rank/clues.py's and the commit text's columns for the candidates (what this
    checks is the order)."""
    n = len(ev.paths)
    rankings: dict[str, list[int]] = {}
    for name, v in values.items():
        keep = np.isfinite(v) if name == "dense" else v > 0
        order = sorted(np.flatnonzero(keep).tolist(), key=lambda i: (-v[i], i))
        rankings[name] = [i for i in order if allowed is None or allowed[i]]
    agreed = {i for i in set(rankings["chunks"][:AGREED_TOP]) & set(rankings["dense"][:AGREED_TOP])
              if ev.paths[i].startswith("bench/")}
    demoted = ev.auxiliary() - frozenset(rankings["mentions"]) - agreed
    fused = fuse(rankings, SIGNALS, demoted, AUXILIARY_FACTOR, RRF_K if title_of(query) else ONE_LINE_RRF_K)
    order = sorted(fused, key=lambda i: (-fused[i], i))
    ranker = load_ranker()
    if not ranked or ranker is None or not fused or title_of(query) is None:
        return {i: fused[i] for i in order}
    rows = np.asarray(order[:RERANK], dtype=np.int64)
    score = np.zeros(n)
    score[order] = [fused[i] for i in order]
    named, demote = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    named[rankings["mentions"]] = True
    demote[list(demoted)] = True
    dense = values["dense"]
    features = feature_matrix(rows, rankings, {**values, "dense": np.where(np.isfinite(dense), np.maximum(dense, 0), 0)},
                              score, named, demote, values["history"], ev.path_facts())
    learned = ranker.scores(np.hstack([features, clue_features(rows)]))
    out = dict(zip(rows.tolist(), (np.exp(learned - learned.max()) + 1.0).tolist()))
    out.update((i, fused[i] / fused[order[0]]) for i in order[len(rows):])
    return out


@pytest.mark.parametrize("seed", range(12))
def test_the_file_ranking_is_exactly_that_of_full_sorts_scores_included(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ev = random_evidence(rng, 900)
    chunks = int(ev.n_chunks.sum())
    chunk_scores = np.round(rng.random(chunks) * 4, 1) * (rng.random(chunks) < 0.5)  # ties and zeros
    title_scores = np.round(rng.random(chunks) * 2, 1) * (rng.random(chunks) < 0.1)
    near_ids = rng.choice(chunks, 200, replace=False)
    dense = [(int(c), float(round(s, 2))) for c, s in zip(near_ids, rng.random(200) * 2 - 0.5)]
    history = np.round(rng.random(900) * 3, 0) * (rng.random(900) < 0.05)
    if seed % 2:  # a benchmark file that BM25 and the dense signal both rank first keeps its whole score
        bench = next(i for i, p in enumerate(ev.paths) if p.startswith("bench/") and ev.n_chunks[i])
        chunk = int(ev.first_chunk[bench])
        chunk_scores[chunk] = 5.0
        dense = [(chunk, 2.0)] + [(c, sim) for c, sim in dense if c != chunk]
    query = f"{'a title' if seed % 3 else 'one line'}\nsee {ev.paths[3]} and {ev.paths[40]} and `parse_it()`"
    if seed % 3 == 0:
        query = query.splitlines()[1]  # one line: the fused order, no second stage
    allowed = rng.random(900) < 0.7 if seed % 4 == 1 else None
    commit_text = np.round(rng.random(900) * 5, 1) * (rng.random(900) < 0.2)
    voters = np.round(rng.random(900) * 3, 0) * (rng.random(900) < 0.05)
    found = QueryEvidence(Question.of(query), chunk_scores, title_scores, dense, history, commit_text, commit_text[::-1].copy(),
                          voters * 0.7, voters)
    values = ev.values(found)
    def clues(rows: np.ndarray) -> np.ndarray:
        return np.hstack([ev.clue_features(found, rows), relative_columns(rows, found.commit_text, found.commit_title),
                          subject_columns(rows, found.subject_votes, found.subject_voters)])

    expected = reference_rank(ev, query, values, allowed, True, clues)
    got = ev.rank(found, allowed, SIGNALS, load_ranker())
    assert dict(got) == expected  # the same files with the same scores, to the last bit
    assert got.ordered().tolist() == sorted(expected, key=lambda i: (-expected[i], i))
    fused = ev.rank(found, allowed, SIGNALS)
    assert dict(fused) == reference_rank(ev, query, values, allowed, False, clues)


def test_hybrid_answers_skip_files_without_chunks_however_many_rank_first() -> None:

    from index.search.hits import files_first

    counts = np.array([0] * 12 + [2, 1, 3])  # the 12 best files have no chunk (named, but empty)
    ev = FileEvidence([f"pkg/m{i}.py" for i in range(15)], np.concatenate(([0], np.cumsum(counts)[:-1])), counts,
                      lambda: [])
    scores = FileScores(np.arange(15), np.linspace(2.0, 1.0, 15))
    chunk_scores = np.array([0.5, 0.9, 0.1, 0.2, 0.8, 0.3])
    order, chosen = files_first(ev, scores, chunk_scores, [], {}, k=3)
    assert order == [1, 2, 4]  # the best chunk of files 12, 13 and 14, in their files' order
    assert [chosen[c] for c in order] == [scores[12], scores[13], scores[14]]
