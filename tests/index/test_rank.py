"""File-level evidence of hybrid search (index/rank/evidence.py) and how search answers file first."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from index.build.pipeline import BuildOptions, build_index
from index.files.file_kinds import is_auxiliary, is_auxiliary_code
from index.rank.evidence import ONE_LINE_RRF_K, RRF_K, FileEvidence, QueryEvidence, fuse
from index.rank.question import Question, extract_clues, title_of
from index.search.probe import file_ranking
from index.search.searcher import Searcher

TRACEBACK = '''Crash when printing
Traceback (most recent call last):
  File "/home/me/venv/lib/python3.11/site-packages/pkg/printing/latex.py", line 10, in doprint
    return self._print(expr)
AttributeError: 'NoneType' object has no attribute 'args'
from pkg.core.numbers import Rational, Float
calling `simplify_power(x)` gives wrong results, see pkg.solvers.ode
'''


def evidence(paths: list[str], chunks_per_file: list[int], symbols: list[tuple[int, str]] = ()) -> FileEvidence:
    counts = np.array(chunks_per_file, dtype=np.int64)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return FileEvidence(paths, first, counts, lambda: list(symbols))


def test_clues_are_read_from_tracebacks_imports_backticks_and_code_shaped_words():
    clues = extract_clues(TRACEBACK)
    assert "/home/me/venv/lib/python3.11/site-packages/pkg/printing/latex.py" in clues.paths
    assert "pkg.core.numbers.Rational" in clues.modules and "pkg.solvers.ode" in clues.modules
    assert {"simplify_power", "doprint", "_print", "NoneType"} <= clues.identifiers
    assert "wrong" not in clues.identifiers and "results" not in clues.identifiers


def test_the_title_is_the_first_line_of_a_question_of_several_lines_only():
    assert title_of("\n  \nSummary line\nbody text\n") == "Summary line"
    assert title_of("parse a url") is None


@pytest.mark.parametrize(
    ("path", "auxiliary"),
    [
        ("pkg/tests/test_core.py", True),
        ("test_core.py", True),
        ("pkg/core_test.py", True),
        ("docs/usage.py", True),
        ("README.md", True),
        ("CHANGES", True),
        ("pkg/core.py", False),
        ("src/testing_utils.py", False),
        ("pkg/contest.py", False),
    ],
)
def test_tests_docs_and_prose_are_auxiliary_and_code_is_not(path: str, auxiliary: bool):
    assert is_auxiliary(path) is auxiliary


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("bench/load_bench.py", True),
        ("examples/demo.py", True),
        ("docs/conf.py", True),
        ("bench/test_speed.py", False),
        ("bench/tests/helpers.py", False),
        ("docs/usage.rst", False),
        ("examples/README.md", False),
        ("pkg/core.py", False),
    ],
)
def test_benchmarks_and_examples_are_auxiliary_code_and_tests_and_prose_are_not(path: str, code: bool):
    assert is_auxiliary_code(path) is code
    assert is_auxiliary(path) or not code


@pytest.mark.parametrize(
    ("agreed", "first"),
    [("bench/load_bench.py", True), ("tests/test_load.py", False), ("docs/load.rst", False)],
)
def test_an_auxiliary_file_that_bm25_and_the_dense_signal_both_rank_first_keeps_its_score_if_it_is_code(
    agreed: str, first: bool
):
    paths = ["pkg/server.py", "pkg/clients.py", agreed]
    ev = evidence(paths, [1, 1, 1])
    # BM25 and the dense signal both put the auxiliary file first; the two modules share the other places.
    found = QueryEvidence(Question.of("where is the load test of many clients"), np.array([0.9, 0.5, 1.0]),
                          dense=[(2, 0.8), (0, 0.7), (1, 0.1)])
    order = [paths[i] for i in ev.rank(found).ordered().tolist()]
    assert (order[0] == agreed) is first


@pytest.mark.parametrize(("query", "k"), [("where is the server", ONE_LINE_RRF_K), ("server crash\nit fails", RRF_K)])
def test_a_question_of_one_line_is_fused_with_its_own_constant_and_a_report_with_the_learned_stages(
    query: str, k: int
):
    ev = evidence(["pkg/server.py", "pkg/clients.py"], [1, 1])
    found = QueryEvidence(Question.of(query), np.array([0.9, 0.5]), dense=[(0, 0.8), (1, 0.1)])
    # the server is first by its chunks' BM25, by the files' BM25 and by the vectors: three reciprocal ranks
    assert ev.rank(found)[0] == pytest.approx(3 / (k + 1))


def test_fusion_adds_weighted_reciprocal_ranks_and_scales_demoted_files():
    score = fuse({"a": [7, 8], "b": [8]}, {"a": 1.0, "b": 2.0}, demoted=frozenset({8}), factor=0.5)
    assert score[7] == pytest.approx(1 / (RRF_K + 1))
    assert score[8] == pytest.approx(0.5 * (1 / (RRF_K + 2) + 2 / (RRF_K + 1)))


def test_a_traceback_path_and_a_dotted_module_name_their_files():
    ev = evidence(["pkg/printing/latex.py", "pkg/core/numbers.py", "pkg/solvers/ode/__init__.py", "pkg/other.py"],
                  [1, 1, 1, 1])
    named = ev.mentioned(extract_clues(TRACEBACK))
    assert set(named) == {0, 1, 2}
    assert named[0] == 1  # pkg.core.numbers is named twice (Rational, Float)


def test_a_mention_that_matches_many_files_is_too_vague_to_count():
    ev = evidence([f"pkg/m{i}/utils.py" for i in range(5)], [1] * 5)
    assert ev.mentioned(extract_clues("the bug is in utils.py")) == []


def test_definitions_rank_files_by_the_rarity_of_the_names_they_define():
    paths = ["a.py", "b.py", "c.py", "d.py"]
    symbols = [(0, "Parser.parse_header"), (1, "parse_header"), (2, "Lexer.tokenize_rare"), (3, "helper")]
    ev = evidence(paths, [1, 1, 1, 1], symbols)
    order = ev.defining(extract_clues("calling `tokenize_rare()` after `parse_header()` fails"))
    assert order[0] == 2 and set(order) == {0, 1, 2}


def make_repo(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "config.py").write_text(
        "def load_settings(path):\n    '''Read settings from a TOML file.'''\n    return parse_toml(path)\n\n\n"
        "def parse_toml(path):\n    return {}\n"
    )
    (root / "pkg" / "server.py").write_text("def serve(port):\n    '''Serve HTTP on a port.'''\n    return port\n")
    (root / "pkg" / "cache.py").write_text("def cached(fn):\n    '''Memoise fn.'''\n    return fn\n")
    # The test repeats the report's words more often than the implementation does.
    (root / "tests" / "test_config.py").write_text(
        "def test_load_settings_reads_settings():\n"
        "    # settings settings settings: load_settings must read settings from a settings file\n"
        "    assert load_settings('settings.toml') == {}\n"
    )
    return root


@pytest.fixture(scope="module")
def searcher(tmp_path_factory: pytest.TempPathFactory) -> Searcher:
    root = make_repo(tmp_path_factory.mktemp("repo"))
    index_dir = root.parent / "index"
    build_index(root, index_dir, BuildOptions(embedder=None))
    return Searcher(index_dir)


def test_hybrid_search_answers_with_the_best_chunk_of_each_best_file(searcher: Searcher):
    query = "load_settings reads the wrong settings\nsettings from settings.toml are ignored"
    with_evidence = len(file_ranking(searcher, query))
    result = searcher.search(query, k=with_evidence)
    paths = [h.path for h in result.hits]
    assert len(set(paths)) == len(paths) == with_evidence
    assert paths[0] == "pkg/config.py"  # the implementation, not the test that repeats its words
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)


def test_lexical_mode_stays_a_plain_chunk_ranking(searcher: Searcher):
    result = searcher.search("settings settings settings load_settings", k=2, mode="lexical")
    assert result.hits[0].path == "tests/test_config.py"


def test_rank_files_orders_files_as_hybrid_search_does_and_honours_the_glob(searcher: Searcher):
    query = "serve HTTP on a port\nthe server ignores the port"
    files = [path for path, _ in file_ranking(searcher, query)]
    hits = [h.path for h in searcher.search(query, k=len(files)).hits]
    assert hits == files[: len(hits)] and files[0] == "pkg/server.py"
    only_tests = [path for path, _ in file_ranking(searcher, query + " settings", path_glob="tests/**")]
    assert only_tests == ["tests/test_config.py"]


def test_a_file_named_by_the_question_is_found_even_without_shared_words(searcher: Searcher):
    files = [path for path, _ in file_ranking(searcher, "crash in pkg/cache.py\nsee the traceback above")]
    assert files[0] == "pkg/cache.py"
