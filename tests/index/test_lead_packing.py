"""A report's answer spends most of its token budget on its lead file and keeps a few lines of every other hit."""

from __future__ import annotations

from pathlib import Path

from support.small_index import small_index

from index.search.lead import code_parts, docstring_lines, lead_candidates, pack_lead
from index.types import Chunk, Hit


def count(text: str) -> int:
    return 2 * len(text.split("\n"))


def hit(path: str, start: int, end: int) -> Hit:
    text = "\n".join(f"line {i}" for i in range(start, end + 1))
    return Hit(path, start, end, 1.0, 1, None, None, "python", text, count(text))


def spans(hits: list[Hit]) -> list[tuple[str, int, int]]:
    return [(h.path, h.start_line, h.end_line) for h in hits]


def test_the_lead_file_adds_its_best_ranked_chunks_and_each_other_hit_keeps_lines_around_its_focus() -> None:
    hits = [hit("a.py", 11, 20), hit("b.py", 1, 10), hit("c.py", 1, 10)]  # 20 tokens each
    more = [hit("a.py", 41, 50), hit("a.py", 21, 30), hit("a.py", 61, 70)]  # best first
    packed, truncated = pack_lead(hits, more, 200, {"b.py": 5}, count=count)
    # 200 less 10 (1/20 of the budget) for each other hit: the lead and all its three chunks fit (80 tokens)
    assert spans(packed)[:2] == [("a.py", 11, 30), ("a.py", 41, 50)]  # a chunk next to the lead joins it
    assert ("a.py", 61, 70) in spans(packed)
    assert [h.path for h in packed][-2:] == ["b.py", "c.py"] and not truncated  # 120 tokens left: both whole
    small, truncated = pack_lead(hits, more, 60, {"b.py": 5}, count=count)
    # 60 less 3 + 3: the lead (20) and its best chunk (20) fit, the next does not; the others share the 20 left
    assert spans(small)[:2] == [("a.py", 11, 20), ("a.py", 41, 50)] and truncated
    assert spans(small)[2:] == [("b.py", 3, 7), ("c.py", 1, 5)]  # around b.py's focus line; c.py's first lines
    assert sum(h.tokens for h in small) <= 60


def test_a_lead_chunk_too_big_for_what_is_left_is_passed_over_for_a_smaller_one() -> None:
    hits = [hit("a.py", 1, 10), hit("b.py", 1, 10)]
    packed, _ = pack_lead(hits, [hit("a.py", 100, 130), hit("a.py", 40, 44)], 60, {}, count=count)
    assert spans(packed)[:2] == [("a.py", 1, 10), ("a.py", 40, 44)]


def test_a_lead_hit_bigger_than_its_share_is_cut_around_its_focus_and_the_answer_says_truncated() -> None:
    hits = [hit("a.py", 1, 40), hit("b.py", 1, 10)]
    packed, truncated = pack_lead(hits, [hit("a.py", 50, 52)], 40, {"a.py": 30}, count=count)
    assert truncated and packed[0].start_line <= 30 <= packed[0].end_line
    assert packed[0].text == "\n".join(f"line {i}" for i in range(packed[0].start_line, packed[0].end_line + 1))
    assert [h.path for h in packed] == ["a.py", "b.py"] and sum(h.tokens for h in packed) <= 40


def test_the_lead_candidates_leave_out_the_lines_a_hit_already_shows() -> None:
    hits = [hit("a.py", 11, 20), hit("b.py", 1, 10)]
    rows = {1: hit("a.py", 15, 25), 2: hit("a.py", 30, 40), 3: hit("a.py", 1, 10)}
    found = lead_candidates([3, 1, 2], hits, lambda ids: {i: rows[i] for i in ids})
    assert spans(found) == [("a.py", 1, 10), ("a.py", 30, 40)]  # in the stage's order


CONVERT = "\n".join(
    ["def parse_header(text):", '    """Read the header line."""', *[f"    step_{i} = text[{i}]" for i in range(12)],
     "    return text", "", "",
     "def convert_units(value, unit):", '    """Convert a value to the given unit."""',
     *[f"    factor_{i} = {i} * value" for i in range(12)], "    return value * unit", "", "",
     "def scale(value):", '    """Scale a value."""', *[f"    scaled_{i} = {i} * value" for i in range(12)], "    return value", ""]
)
OTHER = "\n".join(["def unit_names():", '    """The names of every unit."""', *[f"    name_{i} = 'u{i}'" for i in range(12)], ""])
REPORT = "convert_units returns the wrong factor for a unit\nCalling convert_units(value, unit) with a unit gives a value."


def test_a_report_is_shown_several_chunks_of_its_lead_file_and_still_names_the_other_files(tmp_path: Path) -> None:
    searcher = small_index(tmp_path, {"pkg/units.py": CONVERT, "pkg/names.py": OTHER}, 60)
    chosen = searcher.search(REPORT, k=2, mode="hybrid").hits[0]  # no budget: one chunk of each file
    result = searcher.search(REPORT, k=2, mode="hybrid", max_tokens=300)
    lead = [h for h in result.hits if h.path == chosen.path]
    assert result.hits[0].start_line <= chosen.start_line and chosen.end_line <= result.hits[0].end_line
    assert len(lead) > 1 and sum(h.end_line - h.start_line + 1 for h in lead) > 2 * (chosen.end_line - chosen.start_line + 1)
    assert {h.path for h in result.hits} == {"pkg/units.py", "pkg/names.py"}
    assert sum(h.tokens for h in result.hits) <= 300
    for h in result.hits:  # exact lines of the file, as path:start-end says
        lines = (tmp_path / "repo" / h.path).read_text().split("\n")
        assert h.text == "\n".join(lines[h.start_line - 1 : h.end_line])


def test_a_one_line_question_and_a_search_without_a_chunk_stage_are_packed_hit_by_hit(tmp_path: Path) -> None:
    searcher = small_index(tmp_path, {"pkg/units.py": CONVERT, "pkg/names.py": OTHER}, 60)
    one_line = searcher.search("convert_units factor", k=2, mode="hybrid", max_tokens=300)
    assert len(one_line.hits) <= 2
    searcher.chunk_stage = None
    report = searcher.search(REPORT, k=2, mode="hybrid", max_tokens=300)
    assert len(report.hits) <= 2 and report.hits[0].path == "pkg/units.py"



SOURCE = [
    '"""The module."""',  # 1
    "import os",
    "",
    "def f(a,",
    "      b) -> int:",  # 5
    '    """Doc.',
    "",
    "    More.",
    '    """',
    '    x = """a string, not a docstring"""',  # 10
    "    return a",
    "",
    "",
    "class C:",
    "    '''One line.'''",  # 15
    "    def g(self):",
    '        """A long docstring,',
    "        split over two chunks.",
    '        """',
    "        return 1",  # 20
]


def chunk(start: int, end: int, language: str = "python") -> Chunk:
    text = "\n".join(SOURCE[start - 1 : end])
    return Chunk("a.py", start, end, language, None, text, "h", count(text))


def as_hit(c: Chunk) -> Hit:
    return Hit(c.path, c.start_line, c.end_line, 1.0, 1, None, c.symbol, c.language, c.text, c.tokens)


def test_the_docstrings_of_a_python_file_are_read_from_all_its_chunks() -> None:
    docs = docstring_lines([chunk(1, 12), chunk(10, 18), chunk(18, 20)])
    assert sorted(docs) == [1, 6, 7, 8, 9, 15, 17, 18, 19]  # not line 10's string; chunk 18-20 begins inside one
    assert docstring_lines([chunk(1, 20, "javascript")]) == frozenset()


def test_code_parts_leave_out_docstring_lines_and_keep_exact_line_ranges() -> None:
    docs = docstring_lines([chunk(1, 20)])
    parts = code_parts(as_hit(chunk(4, 20)), docs, count)
    assert spans(parts) == [("a.py", 4, 5), ("a.py", 10, 14), ("a.py", 16, 16), ("a.py", 20, 20)]
    for part in parts:
        assert part.text == "\n".join(SOURCE[part.start_line - 1 : part.end_line]) and part.tokens == count(part.text)
    tail = as_hit(chunk(18, 20))  # begins inside a docstring: only its code is left
    assert spans(code_parts(tail, docs, count)) == [("a.py", 20, 20)]
    assert code_parts(as_hit(chunk(2, 3)), docs, count) == [as_hit(chunk(2, 3))]


def test_the_lead_file_shows_a_further_chunk_without_its_docstrings() -> None:
    hits = [hit("a.py", 1, 3), hit("b.py", 1, 10)]
    documented = python_hit("a.py", 50, ["def g():", *(['    """'] + ["    words"] * 20 + ['    """']), "    return 2"])
    docs = frozenset(range(51, 73))
    packed, _ = pack_lead(hits, [documented], 50, {}, docs, count)
    assert spans(packed)[:3] == [("a.py", 1, 3), ("a.py", 50, 50), ("a.py", 73, 73)]
    whole, _ = pack_lead(hits, [documented], 50, {}, frozenset(), count)  # 48 tokens: too big whole
    assert spans(whole)[:1] == [("a.py", 1, 3)] and ("a.py", 50, 73) not in spans(whole)


def test_a_first_hit_too_big_is_shown_without_its_docstring_before_it_is_cut() -> None:
    first = python_hit("a.py", 1, ["def f():", *(['    """'] + ["    words"] * 30 + ['    """']), "    x = 1", "    return x"])
    packed, truncated = pack_lead([first, hit("b.py", 1, 10)], [], 40, {}, frozenset(range(2, 34)), count)
    assert spans(packed)[:2] == [("a.py", 1, 1), ("a.py", 34, 35)] and truncated


def python_hit(path: str, start: int, lines: list[str]) -> Hit:
    text = "\n".join(lines)
    return Hit(path, start, start + len(lines) - 1, 1.0, 1, None, None, "python", text, count(text))
