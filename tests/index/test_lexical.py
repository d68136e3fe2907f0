"""BM25 scores agree with the rank-bm25 reference, and the term corpus round-trips."""

from __future__ import annotations

import json

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from index.store.lexical import CorpusBuilder, LexicalIndex, TermCorpus

DOCS = [
    ["def", "parse_config", "path", "open", "read", "yaml", "loader"],
    ["class", "HttpServer", "listen", "port", "socket", "bind", "accept"],
    ["def", "read_file", "path", "open", "bytes", "decode", "utf8"],
    ["raise", "ValueError", "invalid", "port", "number", "given"],
    ["socket", "timeout", "retry", "backoff", "connect"],
    ["yaml", "dump", "config", "write", "file", "atomic", "rename"],
    ["def", "tokenize", "text", "split", "camel", "case", "snake", "case"],
    ["json", "loads", "config", "schema", "validate", "error"],
]
QUERIES = [["config"], ["port", "socket"], ["open", "path", "yaml"], ["camel", "snake"], ["missing"], ["file", "file"]]


def _index(docs: list[list[str]], variant: str = "okapi") -> LexicalIndex:
    builder = CorpusBuilder()
    for d in docs:
        builder.add_terms(d)
    return LexicalIndex.build(builder.build(), variant=variant)


@pytest.mark.parametrize("query", QUERIES)
def test_okapi_scores_equal_rank_bm25_for_terms_in_fewer_than_half_the_documents(query: list[str]) -> None:
    reference = BM25Okapi(DOCS, k1=1.2, b=0.75)
    ours = _index(DOCS).scores(query)
    np.testing.assert_allclose(ours, reference.get_scores(query), rtol=1e-5, atol=1e-6)


def test_lucene_variant_ranks_like_rank_bm25_on_the_same_corpus() -> None:
    reference = BM25Okapi(DOCS, k1=1.2, b=0.75)
    ours = _index(DOCS, "lucene")
    for q in QUERIES[:4]:
        ref = reference.get_scores(q)
        assert [i for i, _ in ours.top(q, 3)] == list(np.argsort(-ref, kind="stable")[: len(ours.top(q, 3))])


def test_top_returns_only_documents_that_match_best_first() -> None:
    top = _index(DOCS).top(["socket"], 10)
    assert [i for i, _ in top] in ([1, 4], [4, 1])
    assert top[0][1] >= top[1][1] > 0


def test_an_allowed_mask_filters_documents_out() -> None:
    mask = np.zeros(len(DOCS), dtype=bool)
    mask[4] = True
    assert [i for i, _ in _index(DOCS).top(["socket"], 10, mask)] == [4]


def test_unknown_terms_score_nothing() -> None:
    assert _index(DOCS).top(["nowhere"], 5) == []


def test_saved_index_and_terms_load_back_identically(tmp_path) -> None:
    builder = CorpusBuilder()
    for d in DOCS:
        builder.add_terms(d)
    corpus = builder.build()
    index = LexicalIndex.build(corpus)
    index.save(tmp_path)
    corpus.save(tmp_path)
    loaded = LexicalIndex.load(tmp_path)
    np.testing.assert_allclose(loaded.scores(["config", "port"]), index.scores(["config", "port"]))
    again = TermCorpus.load(tmp_path)
    assert again.vocab == corpus.vocab and np.array_equal(again.ids, corpus.ids)


def test_reused_documents_keep_their_terms_and_unused_vocabulary_is_dropped() -> None:
    first = CorpusBuilder()
    for d in DOCS:
        first.add_terms(d)
    old = first.build()
    second = CorpusBuilder(old.vocab)
    second.add_ids(old.doc(1))
    second.add_terms(["brand", "new"])
    new = second.build()
    assert [new.vocab[i] for i in new.doc(0)] == DOCS[1]
    assert set(new.vocab) == set(DOCS[1]) | {"brand", "new"}


def _term_by_term(index: LexicalIndex, query: list[str]) -> np.ndarray:
    """The definition: every occurrence of a known query term adds its column's weights, in query order."""
    total = np.zeros(index.n_docs, dtype=np.float64)
    for term in query:
        if term in index._vocab:
            i = index._vocab[term]
            lo, hi = int(index._indptr[i]), int(index._indptr[i + 1])
            np.add.at(total, index._rows[lo:hi], index._data[lo:hi].astype(np.float64))
    return total.astype(np.float32)


def test_a_long_query_with_repeated_terms_scores_exactly_the_term_by_term_sum() -> None:
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(300)]
    docs = [list(rng.choice(words, size=int(rng.integers(5, 60)))) for _ in range(400)]
    index = _index(docs, "lucene")
    query = [*rng.choice(words, size=2000), "missing", "w3", "w3"]
    assert np.array_equal(index.scores(list(query)), _term_by_term(index, list(query)))


def test_a_loaded_index_scores_like_the_built_one(tmp_path) -> None:
    built = _index(DOCS, "lucene")
    built.save(tmp_path)
    (tmp_path / "vocab.json").write_text(json.dumps(sorted(built._vocab, key=built._vocab.get)))
    loaded = LexicalIndex.load(tmp_path)
    for query in QUERIES:
        assert np.array_equal(loaded.scores(query), built.scores(query))
