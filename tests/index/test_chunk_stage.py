"""The question is read once per search, and a report is shown the chunk the chunk stage picks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.small_index import small_index

import index.rank.question as question_module
from index.rank.chunks import CHUNK_FEATURES, ChunkStage, chunk_features, load_chunk_stage, quoted_lines
from index.rank.question import Question
from index.search.hits import Pointers, focus_lines
from index.search.probe import chunk_rows
from index.types import Chunk, Hit

CONVERT = "\n".join(
    ["def parse_header(text):", '    """Read the header line."""', *[f"    step_{i} = text[{i}]" for i in range(12)],
     "    return text", "", "",
     "def convert_units(value, unit):", '    """Convert a value to the given unit."""',
     *[f"    factor_{i} = {i} * value" for i in range(12)], "    return value * unit", ""]
)
REPORT = "convert_units returns the wrong factor\nCalling parse_header on a header, then text and text and text, gives text."


def chunk(start: int, symbol: str | None, text: str) -> Chunk:
    return Chunk("pkg/units.py", start, start + text.count("\n"), "python", symbol, text, "h", 10)


def only(feature: str) -> ChunkStage:
    weights = np.zeros(len(CHUNK_FEATURES))
    weights[CHUNK_FEATURES.index(feature)] = 1.0
    return ChunkStage(weights, "test")


def test_a_question_is_read_once_however_many_stages_ask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    searcher = small_index(tmp_path, {"pkg/units.py": CONVERT}, 60)
    calls: list[str] = []
    real = question_module.extract_clues
    monkeypatch.setattr(question_module, "extract_clues", lambda text: calls.append(text) or real(text))
    searcher.search(REPORT, k=3, mode="hybrid")
    assert sorted(calls) == sorted([REPORT, REPORT.splitlines()[0]])  # the report, and its title


def test_the_chunk_features_say_which_chunk_defines_the_name_the_title_uses() -> None:
    chunks = [chunk(1, None, "import os"), chunk(3, "parse_header", "def parse_header(text):\n    return convert_units"),
              chunk(6, "convert_units", "def convert_units(value, unit):\n    return value")]
    rows = chunk_features(Question.of(REPORT), [0, 1, 2], chunks, np.array([0.0, 3.0, 1.0]), None, {2: 0.5}, 1)
    column = {name: rows[:, i].tolist() for i, name in enumerate(CHUNK_FEATURES)}
    assert column["title_named"] == [0.0, 0.0, 1.0]
    assert column["title_identifiers"] == [0.0, 1.0, 1.0]  # the name is used in one and defined in the other
    assert column["bm25"] == [0.0, 1.0, pytest.approx(1 / 3)] and column["bm25_top"] == [0.0, 1.0, 0.0]
    assert column["fused_first"] == [0.0, 1.0, 0.0] and column["dense_top"] == [0.0, 0.0, 1.0]
    assert column["first"] == [1.0, 0.0, 0.0] and column["module_level"] == [1.0, 0.0, 0.0]


def test_a_chunk_whose_lines_the_report_pastes_is_marked_case_and_spacing_aside() -> None:
    report = Question.of("Wrong factor\nThe line\n    FACTOR_3 =   3 * value\nlooks wrong; so does `return value * unit`.")
    chunks = [chunk(1, "parse_header", CONVERT.split("\n\n\n")[0]), chunk(17, "convert_units", CONVERT.split("\n\n\n")[1])]
    assert [quoted_lines(report, c.text) for c in chunks] == [0, 2]
    rows = chunk_features(report, [0, 1], chunks, np.zeros(2), None, {}, None)
    assert rows[:, CHUNK_FEATURES.index("quoted")].tolist() == [0.0, 1.0]


def test_short_lines_and_comments_are_not_taken_for_quotes() -> None:
    report = Question.of("Title\nreturn x\n# the unit we convert to, in metres\n")
    assert quoted_lines(report, "    return x\n    # the unit we convert to, in metres\n") == 0


def test_a_hit_cut_to_fit_keeps_the_line_the_report_quotes_before_the_one_its_title_names() -> None:
    text = CONVERT.split("\n\n\n")[1]
    hit = Hit("pkg/units.py", 17, 17 + text.count("\n"), 1.0, 1, None, "convert_units", "python", text, 200)
    quoting = Question.of("convert_units returns the wrong factor\nIt computes\n    factor_7 = 7 * value\n")
    naming = Question.of("convert_units returns the wrong factor\nIt computes something odd.")
    assert focus_lines([hit], quoting, Pointers(), [hit.path]) == {hit.path: 26}  # the quoted factor_7 line
    assert focus_lines([hit], naming, Pointers(), [hit.path]) == {hit.path: 17}  # the def naming convert_units


def test_a_report_is_shown_the_chunk_the_stage_picks_and_a_one_line_question_is_not(tmp_path: Path) -> None:
    searcher = small_index(tmp_path, {"pkg/units.py": CONVERT}, 60)
    searcher.chunk_stage = only("bm25_top")
    by_words = searcher.search(REPORT, k=1, mode="hybrid").hits[0]
    assert by_words.symbol == "parse_header"  # its words are all over parse_header
    searcher.chunk_stage = only("title_named")
    assert searcher.search(REPORT, k=1, mode="hybrid").hits[0].symbol == "convert_units"
    one_line = "text and text and text convert_units"
    searcher.chunk_stage = only("title_named")
    shown = searcher.search(one_line, k=1, mode="hybrid").hits[0].symbol
    searcher.chunk_stage = None
    assert shown == searcher.search(one_line, k=1, mode="hybrid").hits[0].symbol


def test_the_probe_gives_the_rows_a_search_reads(tmp_path: Path) -> None:
    searcher = small_index(tmp_path, {"pkg/units.py": CONVERT}, 60)
    chunks, rows = chunk_rows(searcher, REPORT, ["pkg/units.py", "not/indexed.py"])["pkg/units.py"]
    assert [c.start_line for c in chunks] == sorted(c.start_line for c in chunks)
    assert rows.shape == (len(chunks), len(CHUNK_FEATURES))
    named = rows[:, CHUNK_FEATURES.index("title_named")].tolist()
    assert named == [float(c.symbol == "convert_units") for c in chunks] and 1.0 in named


def test_a_missing_chunk_model_is_no_stage_and_the_shipped_one_loads() -> None:
    assert load_chunk_stage("no-such-file.json") is None
    shipped = load_chunk_stage()
    assert shipped is not None and shipped.weights.shape == (len(CHUNK_FEATURES),)
