"""Loops and citations in answer text (bridge.chat.answers)."""

from __future__ import annotations

from bridge.chat.answers import (
    LoopGuard,
    Span,
    check_citations,
    find_citations,
    finish_answer,
    first_loop,
    has_loop,
)

LOOPING = 'It returns {"type": "Question", "response_to_question": question.render(n_ctx=n_ctx), ' * 3


def test_a_word_six_gram_seen_three_times_is_a_loop_and_twice_is_not() -> None:
    assert has_loop(LOOPING)
    twice = 'It returns {"type": "Question", "response_to_question": question.render(n_ctx=n_ctx), ' * 2
    assert not has_loop(twice)
    assert not has_loop("The planner packs snippets greedily in rank order and skips those that do not fit.")


def test_the_cut_keeps_one_copy_of_the_repetition_and_what_came_before() -> None:
    text = "Intro words here. " + "alpha beta gamma delta epsilon zeta " * 3
    cut = first_loop(text)
    assert cut is not None
    assert text[:cut] == "Intro words here. alpha beta gamma delta epsilon zeta "


def test_the_guard_stops_on_the_piece_that_completes_the_third_copy() -> None:
    guard = LoopGuard()
    pieces = ("one two three four five six " * 3).split(" ")
    stopped_at = None
    for i, word in enumerate(pieces):
        if guard.feed(word + " "):
            stopped_at = i
            break
    assert stopped_at == 17
    assert guard.kept() == "one two three four five six"


def test_the_guard_keeps_everything_when_nothing_repeats() -> None:
    guard = LoopGuard()
    for piece in ["See ", "index/store/layout.py:10-20", " for ", "details."]:
        assert not guard.feed(piece)
    assert guard.kept() == "See index/store/layout.py:10-20 for details."


def test_citations_are_path_colon_start_dash_end_in_any_wrapping() -> None:
    text = "See [bridge/budget.py:12-40], `index/store/layout.py:5-9` and ./setup.py:1 - 3; not 10:30-11 or v1:2-3."
    cited = [c.span.citation for c in find_citations(text)]
    assert cited == ["bridge/budget.py:12-40", "index/store/layout.py:5-9", "setup.py:1-3"]


def test_a_citation_is_valid_only_when_it_overlaps_a_retrieved_source() -> None:
    sources = [Span("logging/handlers.py", 124, 190), Span("json/encoder.py", 1, 50)]
    text = "RotatingFileHandler (logging/handlers.py:130-140) and handlers.py:124-190, not json/decoder.py:1-9 nor json/encoder.py:60-70."
    check = check_citations(text, sources)
    assert [c.text for c in check.valid] == ["logging/handlers.py:130-140", "handlers.py:124-190"]
    assert [c.text for c in check.unknown] == ["json/decoder.py:1-9", "json/encoder.py:60-70"]
    assert check.cited_sources
    assert not check_citations("no citations here", sources).cited_sources


SOURCES = [Span("logging/handlers.py", 119, 190), Span("logging/__init__.py", 1100, 1180)]


def test_an_answer_ends_with_the_retrieved_sources_it_cites() -> None:
    answer = finish_answer(
        "RotatingFileHandler rolls the file over in doRollover (logging/handlers.py:150-170).",
        SOURCES, looped=False, best=None,
    )
    assert answer.usable and not answer.looped
    assert answer.text.endswith("Sources: logging/handlers.py:119-190")


def test_a_citation_of_something_not_retrieved_is_flagged() -> None:
    answer = finish_answer("It is in logs.py:1-20, the FileHandler class.", SOURCES, looped=False, best=None)
    assert "Not among the retrieved sources: logs.py:1-20" in answer.text
    assert answer.text.endswith(
        "Sources (retrieved; the answer cites none): logging/handlers.py:119-190, logging/__init__.py:1100-1180"
    )


def test_a_backwards_line_range_is_flagged_even_inside_a_retrieved_file() -> None:
    answer = finish_answer("[logging/handlers.py:150-12] rotates the file.", SOURCES, looped=False, best=None)
    assert not answer.citations.valid
    assert "Not among the retrieved sources: logging/handlers.py:150-12" in answer.text


def test_a_stopped_loop_is_said_and_what_came_before_is_kept() -> None:
    answer = finish_answer("The handler rotates files when they grow.", SOURCES, looped=True, best=None)
    assert answer.usable and answer.looped
    assert answer.text.startswith("The handler rotates files when they grow.\n\n[stopped: the model began repeating")


def test_nothing_usable_says_so_and_shows_the_best_snippet_instead() -> None:
    best = "[logging/handlers.py:119-190]\n```python\nclass RotatingFileHandler(BaseRotatingHandler):\n```\n"
    answer = finish_answer("{ {", SOURCES, looped=True, best=best)
    assert not answer.usable
    assert answer.text.startswith("The model produced no usable answer (it began repeating itself at once).")
    assert answer.text.endswith(best.strip())
