"""The model's copy of a report too long for the context (bridge/chat/condense.py)."""

from __future__ import annotations

from bridge.chat.condense import condense


def words_at_most(n: int):  # type: ignore[no-untyped-def]
    return lambda text: len(text.split()) <= n


def test_a_question_that_fits_is_not_touched() -> None:
    assert condense("title\nbody of the report", words_at_most(100)) is None


def test_a_question_of_one_line_is_never_cut() -> None:
    assert condense("why " * 500, words_at_most(10)) is None


def test_pasted_output_goes_first_and_the_rest_is_kept_in_order() -> None:
    report = "\n".join(["title line", "what I did", *(f"pkg{i}    2.{i}" for i in range(50)), "what I saw"])
    condensed = condense(report, words_at_most(20))
    assert condensed is not None
    assert condensed.text == "title line\nwhat I did\nwhat I saw"
    assert condensed.dropped == {"packages": 50} and condensed.cut_lines == 0


def test_when_focusing_is_not_enough_the_longest_fitting_head_is_kept_with_a_mark() -> None:
    report = "\n".join(["title", *(f"line {i}" for i in range(100))])
    condensed = condense(report, words_at_most(40))
    assert condensed is not None
    kept = condensed.text.splitlines()
    assert kept[0] == "title" and kept[1] == "line 0"
    assert len(condensed.text.split()) <= 40
    assert kept[-1] == f"[… {condensed.cut_lines} more lines of the report left out to fit the context]"
    mark = len(kept[-1].split())
    kept_lines = 100 - condensed.cut_lines
    assert 1 + 2 * (kept_lines + 1) + mark > 40  # one more line would not have fitted


def test_the_title_stays_even_when_nothing_else_fits() -> None:
    condensed = condense("a long title of many words here\nbody line one\nbody line two", words_at_most(3))
    assert condensed is not None and condensed.text.startswith("a long title of many words here\n")
    assert condensed.cut_lines == 2
