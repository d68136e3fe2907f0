"""Grounded answers (bridge.chat.grounding): a small model's code and citations are shown only when the
retrieved snippets hold them."""

from __future__ import annotations

from bridge.chat.answers import Span, finish_answer
from bridge.chat.grounding import (
    Grounder,
    KnownNames,
    code_lines,
    ground,
    grounds,
    ungrounded_code_lines,
    unknown_inline_names,
)

SNIPPET = (
    "def plan_prompt(n_ctx, snippets):\n"
    "    kept = []\n"
    "    for snippet in snippets:\n"
    "        if fits(snippet):\n"
    "            kept.append(snippet)\n"
    "    return kept\n"
)
SOURCES = [Span("bridge/chat/budget.py", 184, 190)]

INVENTED = (
    "The planner keeps the snippets that fit (see bridge/chat/budget.py:184-190).\n"
    "\n"
    "bridge/test.py:12-3\n"
    "```python\n"
    "def fetch_snippet(index):\n"
    "    return index.fetch()\n"
    "```\n"
    "It calls fetch_snippet for each one, as in bridge/test.py:12-3.\n"
)


def shown(text: str) -> str:
    return ground(text, SOURCES, [SNIPPET]).text


def test_an_invented_code_block_and_a_citation_of_an_unretrieved_file_are_withheld_with_one_line_saying_so() -> None:
    g = ground(INVENTED, SOURCES, [SNIPPET])
    assert "fetch_snippet(index)" not in g.text and "bridge/test.py" not in g.text
    assert g.text.startswith("The planner keeps the snippets that fit (see bridge/chat/budget.py:184-190).")
    assert "It calls fetch_snippet for each one, as in." in g.text
    assert (g.withheld_blocks, g.withheld_block_lines, g.withheld_citations) == (1, 2, 2)
    assert g.note == "[withheld: code not found in the retrieved sources (1 block); 2 citations of a source that was not retrieved]"


def test_a_code_block_copied_from_a_snippet_is_shown_as_written() -> None:
    text = "It loops over the snippets:\n```python\nfor snippet in snippets:\n    if fits(snippet):\n```\nDone here now."
    g = ground(text, SOURCES, [SNIPPET])
    assert g.text == text
    assert not g.withheld and g.note == ""


def test_a_block_is_shown_up_to_its_first_line_found_in_no_snippet() -> None:
    text = "Here:\n```\nkept = []\n\nkept.sort(key=len)\nreturn kept\n```\nThat was all of it."
    g = ground(text, SOURCES, [SNIPPET])
    assert g.text == "Here:\n```\nkept = []\n```\nThat was all of it."
    assert (g.withheld_blocks, g.withheld_lines) == (0, 2)
    assert g.note == "[withheld: code not found in the retrieved sources (2 lines)]"


def test_a_block_whose_first_line_is_in_no_snippet_is_withheld_whole() -> None:
    g = ground("Here:\n```\nkept.sort(key=len)\nkept = []\n```\n", SOURCES, [SNIPPET])
    assert g.text == "Here:"
    assert (g.withheld_blocks, g.withheld_block_lines) == (1, 2)


def test_code_lines_outside_fences_are_withheld_one_by_one_and_prose_is_kept() -> None:
    text = "The function plan_prompt keeps what fits.\n    return kept\nresult = plan_prompt(4096, hits)\nThat is all it does."
    g = ground(text, SOURCES, [SNIPPET])
    assert g.text == "The function plan_prompt keeps what fits.\n    return kept\nThat is all it does."
    assert g.withheld_lines == 1
    assert g.note == "[withheld: code not found in the retrieved sources (1 line)]"


def test_whitespace_does_not_decide_whether_a_line_is_in_a_snippet() -> None:
    text = "```\nfor   snippet in snippets:\n\tkept.append(snippet)\n```"
    assert not ground(text, SOURCES, [SNIPPET]).withheld


def test_streaming_shows_nothing_of_a_block_before_it_is_closed_and_checked() -> None:
    grounder = Grounder(SOURCES, [SNIPPET])
    seen = [grounder.feed(piece) for piece in ["The plan", "ner works.\n```py", "thon\ndef fetch", "_snippet(i):\n", "    pass\n"]]
    assert "".join(seen) == "The planner works.\n"
    assert grounder.feed("```\nNext line") == ""
    assert grounder.finish() == "Next line"
    assert grounder.result() == ground("The planner works.\n```python\ndef fetch_snippet(i):\n    pass\n```\nNext line",
                                       SOURCES, [SNIPPET])


def test_streamed_pieces_and_the_whole_text_give_the_same_answer() -> None:
    grounder = Grounder(SOURCES, [SNIPPET])
    streamed = "".join(grounder.feed(INVENTED[i : i + 3]) for i in range(0, len(INVENTED), 3)) + grounder.finish()
    assert streamed.strip() == shown(INVENTED)


def test_a_block_the_model_left_open_is_checked_and_closed() -> None:
    assert shown("Look:\n```\nkept = []") == "Look:\n```\nkept = []\n```"
    assert shown("Look at this:\n```\nimport os") == "Look at this:"


def test_a_line_left_with_nothing_but_a_label_by_a_withheld_citation_is_dropped() -> None:
    text = "It keeps what fits.\nSources: bridge/test.py:1-9\nSee (nowhere.py:3-4) too."
    assert shown(text) == "It keeps what fits.\nSee too."


def test_prose_punctuation_and_lists_are_not_code() -> None:
    text = "The planner:\n- keeps the best snippets\n    - and drops the rest\n}\n...\nIt returns them in rank order."
    assert code_lines(text) == []
    assert code_lines("```\n}\nx = 1\n```\nimport os\ndef f(a):") == ["x = 1", "import os", "def f(a):"]


def test_the_benchmark_counts_code_lines_found_in_no_snippet() -> None:
    assert ungrounded_code_lines(INVENTED, [SNIPPET]) == 2
    assert ungrounded_code_lines(shown(INVENTED), [SNIPPET]) == 0


def test_small_models_are_grounded_by_default_and_large_or_unknown_ones_answer_freely() -> None:
    assert grounds("auto", 134_515_008)
    assert not grounds("auto", 1_235_814_400)
    assert not grounds("auto", None)
    assert grounds("strict", None) and not grounds("free", 134_515_008)


def test_a_grounded_answer_shows_the_checked_text_then_what_was_withheld_then_its_sources() -> None:
    g = ground(INVENTED, SOURCES, [SNIPPET])
    answer = finish_answer(INVENTED, SOURCES, looped=False, best=None, grounded=g)
    assert answer.usable and answer.grounding is g
    assert answer.text == f"{g.text}\n\n{g.note}\n\nSources: bridge/chat/budget.py:184-190"
    assert answer.shown_model_text == g.text
    assert [c.text for c in answer.citations.unknown] == ["bridge/test.py:12-3", "bridge/test.py:12-3"]
    assert "Not among the retrieved sources" not in answer.text


def test_an_answer_that_was_all_invented_code_shows_the_best_snippet_instead() -> None:
    text = "```python\ndef fetch_snippet(index):\n    return index.fetch(all=True)\n```"
    answer = finish_answer(text, SOURCES, looped=False, best="[x.py:1-2]\nbest", grounded=ground(text, SOURCES, [SNIPPET]))
    assert not answer.usable
    assert answer.text.startswith("The model produced no usable answer (all it wrote was code or citations not found")
    assert answer.text.endswith("[x.py:1-2]\nbest")


def test_a_grounded_answer_of_nothing_but_a_sources_line_is_no_answer() -> None:
    text = "```python\ndef fetch_snippet(index):\n    return index.fetch(all=True)\n```\n\nSources: bridge/chat/budget.py:184-190"
    answer = finish_answer(text, SOURCES, looped=False, best="[x.py:1-2]\nbest", grounded=ground(text, SOURCES, [SNIPPET]))
    assert not answer.usable and answer.text.endswith("[x.py:1-2]\nbest")


def test_a_sentence_that_shows_an_invented_name_as_code_is_withheld_and_its_neighbours_stay() -> None:
    text = (
        "`plan_prompt` keeps what fits. It calls `fetch_snippet()` on each one. It appends to `kept`.\n"
        "The loop ends with `return kept`.\n"
    )
    g = ground(text, SOURCES, [SNIPPET])
    assert g.text == "`plan_prompt` keeps what fits. It appends to `kept`.\nThe loop ends with `return kept`."
    assert g.withheld_sentences == 1
    assert g.note == "[withheld: 1 sentence naming code not in the sources]"


def test_a_list_item_goes_whole_when_its_sentences_do_and_keeps_its_marker_otherwise() -> None:
    text = "1. `kept`: the snippets kept.\n2. `ctx`: the context.\n  - `ctx`: unknown. `kept` is known.\n"
    assert ground(text, SOURCES, [SNIPPET]).text == "1. `kept`: the snippets kept.\n  - `kept` is known."


def test_names_from_the_sources_paths_the_question_and_python_itself_are_known() -> None:
    known = KnownNames([SNIPPET, "bridge/chat/budget.py", "what does Planner do?", "Budget.fits"])
    for span in ("plan_prompt", "plan_prompt(n_ctx, snippets)", "snippet.append", "budget", "Planner", "len()",
                 "None", "self.kept", "kept.append(snippet)", "for snippet in snippets:", "~chat.Budget::fits"):
        assert known.knows(span), span
    for span in ("fetch_snippet", "kept.fetch", "*argspec=**kwargs", "budget.py 12", "retrieve_prompt()",
                 "len(kept) + fetch(kept)"):
        assert not known.knows(span), span


def test_a_name_must_be_a_whole_word_of_the_sources_not_a_piece_of_one() -> None:
    known = KnownNames(["def budget_plan(): pass"])
    assert not known.knows("get") and not known.knows("plan") and known.knows("budget_plan")


def test_a_line_whose_every_sentence_names_invented_code_is_dropped_and_fences_are_left_to_the_code_rules() -> None:
    g = ground("It uses `IndexStoreLogicModule`.\n```\nkept = []\n```\n", SOURCES, [SNIPPET])
    assert g.text == "```\nkept = []\n```"
    assert unknown_inline_names("`a` and `kept`\n```\n`b`\n```\n", KnownNames([SNIPPET])) == ["a"]


def test_streamed_pieces_withhold_the_same_sentences_as_the_whole_text() -> None:
    text = "It uses `kept`. Then `fetch_all` runs.\nDone with `snippets`.\n"
    grounder = Grounder(SOURCES, [SNIPPET])
    streamed = "".join(grounder.feed(text[i : i + 3]) for i in range(0, len(text), 3)) + grounder.finish()
    assert streamed.strip() == ground(text, SOURCES, [SNIPPET]).text == "It uses `kept`.\nDone with `snippets`."


def test_a_citation_in_backticks_is_judged_by_the_citation_rule_alone() -> None:
    g = ground("It is `kept` in `bridge/chat/budget.py:184-186`. See `bridge/test.py:1-3` too.\n", SOURCES, [SNIPPET])
    assert g.text == "It is `kept` in `bridge/chat/budget.py:184-186`. See too."
    assert (g.withheld_citations, g.withheld_sentences) == (1, 0)


def test_the_definition_a_snippet_lies_in_may_be_named() -> None:
    text = "`Budget.fits` keeps what fits.\n"
    assert ground(text, SOURCES, [SNIPPET]).text == ""
    assert ground(text, SOURCES, [SNIPPET], ["Budget.fits"]).text == "`Budget.fits` keeps what fits."


def test_without_the_name_rule_the_sentences_stay() -> None:
    assert ground("It calls `fetch_snippet`.\n", SOURCES, [SNIPPET], names=False).text == "It calls `fetch_snippet`."
