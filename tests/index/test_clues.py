"""Clue and aggregate features of the second stage (index/rank/clues.py) say what they promise."""

from __future__ import annotations

import numpy as np

from index.rank.clues import AGGREGATE_FEATURES, CLUE_FEATURES, aggregate_matrix, clue_matrix, file_stem
from index.rank.evidence import FileEvidence

PATHS = ["pkg/printing/ccode.py", "pkg/functions/trig.py", "pkg/printing/__init__.py", "pkg/core/blueprints.py"]


def clue(rows: np.ndarray, feature: str) -> list[float]:
    return rows[:, CLUE_FEATURES.index(feature)].tolist()


def matrix(query: str, title: str | None, named: frozenset[int] = frozenset(), last: frozenset[int] = frozenset(),
           definitions: dict[str, frozenset[int]] | None = None) -> np.ndarray:
    rows = np.arange(len(PATHS), dtype=np.int64)
    return clue_matrix(PATHS, rows, query, title, named, last, definitions or {})


def test_a_package_is_known_by_its_folder_and_a_module_by_its_stem() -> None:
    assert file_stem("pkg/printing/__init__.py") == "printing"
    assert file_stem("pkg/printing/ccode.py") == "ccode"


def test_a_title_that_names_a_module_marks_that_file_and_not_its_neighbours() -> None:
    rows = matrix("ccode(sinc(x)) fails\nsee the traceback", "ccode(sinc(x)) fails")
    assert clue(rows, "stem_title") == [1.0, 0.0, 0.0, 0.0]
    assert clue(rows, "folder_title") == [0.0, 0.0, 0.0, 0.0]


def test_a_title_word_that_starts_a_stem_is_a_prefix_match_not_an_exact_one() -> None:
    rows = matrix("blueprint names with a dot\nbody", "blueprint names with a dot")
    assert clue(rows, "stem_title") == [0.0, 0.0, 0.0, 0.0]
    assert clue(rows, "stem_title_prefix") == [0.0, 0.0, 0.0, 1.0]


def test_the_body_and_the_title_are_told_apart() -> None:
    rows = matrix("printing is wrong\nthe trig output", "printing is wrong")
    assert clue(rows, "stem_body") == [0.0, 1.0, 0.0, 0.0]
    assert clue(rows, "stem_title") == [0.0, 0.0, 1.0, 0.0]
    assert clue(rows, "folder_title") == [1.0, 0.0, 1.0, 0.0]  # below the top folder only


def test_a_question_of_one_line_has_no_title_and_is_all_body() -> None:
    rows = matrix("where is ccode", None)
    assert clue(rows, "stem_title") == [0.0] * 4
    assert clue(rows, "stem_body") == [1.0, 0.0, 0.0, 0.0]


def test_named_files_last_frames_and_title_definitions_are_carried_through() -> None:
    definitions = {"Sinc": frozenset({1}), "Printer": frozenset({0, 2})}
    rows = matrix("Sinc breaks the Printer\nbody", "Sinc breaks the Printer", frozenset({2}), frozenset({3}), definitions)
    assert clue(rows, "named_title") == [0.0, 0.0, 1.0, 0.0]
    assert clue(rows, "last_frame") == [0.0, 0.0, 0.0, 1.0]
    defines = clue(rows, "title_defines")
    assert defines[1] == 1.0 and 0.0 < defines[0] < 1.0 and defines[3] == 0.0  # rarer names weigh more


def test_folder_share_counts_the_best_candidates_in_the_same_folder() -> None:
    rows = matrix("x\ny", "x")
    assert clue(rows, "folder_share") == [0.5, 0.25, 0.5, 0.25]


def test_aggregates_count_a_files_chunks_among_the_best_and_the_nearest() -> None:
    chunk_file = np.array([0, 0, 0, 1, 2], dtype=np.int64)
    rows = np.array([0, 1, 2], dtype=np.int64)
    title = np.array([2.0, 1.0, 0.0])
    out = aggregate_matrix(rows, chunk_file, title, np.array([1.0, 1.0, 0.0, 2.0, 0.0]), np.array([4], dtype=np.int64))
    assert out[:, AGGREGATE_FEATURES.index("title_files")].tolist() == [1.0, 0.5, 0.0]
    lexical = out[:, AGGREGATE_FEATURES.index("lexical_hits")]
    assert lexical[0] > lexical[1] > lexical[2] == 0.0  # two best chunks beat one
    assert out[:, AGGREGATE_FEATURES.index("dense_hits")].tolist() == [0.0, 0.0, 1.0]
    assert not aggregate_matrix(rows, chunk_file, None, np.zeros(5), np.zeros(0, dtype=np.int64)).any()


def test_the_deepest_traceback_frame_is_the_last_path_named() -> None:
    paths = ["pkg/a.py", "pkg/b.py", "pkg/c.py"]
    files = FileEvidence(paths, np.arange(3, dtype=np.int64), np.ones(3, dtype=np.int64), lambda: [])
    from index.rank.question import extract_clues

    report = 'File "/site/pkg/a.py", line 3\nFile "/site/pkg/c.py", line 9\nValueError'
    assert list(files.last_mentioned(extract_clues(report))) == [2]
    assert list(files.last_mentioned(extract_clues("no paths here"))) == []
