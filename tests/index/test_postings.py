"""The streaming BM25 writer gives exactly the matrix the in-memory build gives, in any batch size."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from index.build.pipeline import BuildOptions, build_index
from index.store.layout import ChunkTable
from index.store.lexical import CorpusBuilder, LexicalIndex, TermCorpus
from index.store.postings import LexicalWriter


def _documents(count: int, seed: int = 1) -> list[list[str]]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(400)]
    return [[rng.choice(words[: rng.randint(3, 400)]) for _ in range(rng.randint(0, 50))] for _ in range(count)]


def _arrays(index: LexicalIndex) -> list[np.ndarray]:
    return [np.asarray(a) for a in (index._data, index._rows, index._indptr)]


@pytest.mark.parametrize(("run", "block"), [(50, 40), (1000, 100_000), (10**9, 10**9)])
def test_streamed_bm25_and_terms_equal_the_in_memory_build(tmp_path: Path, run: int, block: int) -> None:
    docs = _documents(800)
    builder = CorpusBuilder(["gone", "also_gone"])  # vocabulary no document uses any more is dropped
    for d in docs:
        builder.add_terms(d)
    corpus = builder.build()
    writer = LexicalWriter(tmp_path, ["gone", "also_gone"], run_postings=run, block_postings=block)
    for d in docs:
        writer.add_terms(d)
    assert writer.finish() == (len(docs), len(corpus.vocab))
    streamed = TermCorpus.load(tmp_path)
    assert streamed.vocab == corpus.vocab
    np.testing.assert_array_equal(streamed.ids, corpus.ids)
    np.testing.assert_array_equal(streamed.offsets, corpus.offsets)
    for ours, theirs in zip(_arrays(LexicalIndex.load(tmp_path)), _arrays(LexicalIndex.build(corpus))):
        np.testing.assert_array_equal(ours, theirs)
    assert not list(tmp_path.glob("run*")), "sorted runs are removed once merged"


def test_documents_given_as_term_ids_count_like_documents_given_as_terms(tmp_path: Path) -> None:
    docs = _documents(50)
    first = LexicalWriter(tmp_path / "a")
    for d in docs:
        first.add_terms(d)
    first.finish()
    corpus = TermCorpus.load(tmp_path / "a")
    second = LexicalWriter(tmp_path / "b", corpus.vocab, run_postings=64)
    second.add_ids(corpus.ids[: corpus.offsets[20]], np.diff(corpus.offsets[:21]))
    for d in docs[20:]:
        second.add_terms(d)
    second.finish()
    for ours, theirs in zip(_arrays(LexicalIndex.load(tmp_path / "b")), _arrays(LexicalIndex.load(tmp_path / "a"))):
        np.testing.assert_array_equal(ours, theirs)


def test_an_empty_corpus_gives_an_index_that_scores_nothing(tmp_path: Path) -> None:
    writer = LexicalWriter(tmp_path)
    writer.add_terms([])
    assert writer.finish() == (1, 0)
    assert LexicalIndex.load(tmp_path).scores(["anything"]).tolist() == [0.0]


def test_an_incremental_build_equals_a_build_from_scratch(repo: Path, tmp_path: Path) -> None:
    options = BuildOptions(embedder=None)
    build_index(repo, tmp_path / "inc", options)
    (repo / "src/config.py").write_text("def load_settings(path):\n    return open(path).read()\n")
    (repo / "src/new_module.py").write_text("def brand_new_function():\n    return 42\n")
    (repo / "aaa_first.py").write_text("def sorts_before_every_other_file():\n    return 0\n")
    removed = sorted(p for p in repo.rglob("*.py") if p.name not in ("config.py", "new_module.py", "aaa_first.py"))[-1]
    removed.unlink()
    build_index(repo, tmp_path / "inc", options)
    build_index(repo, tmp_path / "scratch", BuildOptions(embedder=None, rebuild=True))
    gens = [(tmp_path / name / (tmp_path / name / "CURRENT").read_text().strip()) for name in ("inc", "scratch")]
    inc, scratch = (LexicalIndex.load(g / "lexical") for g in gens)
    assert set(inc._vocab) == set(scratch._vocab)
    query = ["load_settings", "brand_new_function", "retry", "port", "config"]
    np.testing.assert_allclose(inc.scores(query), scratch.scores(query), rtol=1e-6)
    tables = [ChunkTable(g) for g in gens]
    try:
        assert tables[0].all() == tables[1].all()  # copied rows renumbered in place of re-chunked ones
    finally:
        for table in tables:
            table.close()
