from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.chat.budget import Plan, Snippet, plan_prompt
from bridge.errors import BudgetError
from bridge.llm.runtime import Message, TemplateOverhead

OVERHEAD = TemplateOverhead(per_message=4, fixed=6, per_join=1)


def words(text: str) -> int:
    """A fake tokenizer: one token per whitespace-separated word."""
    return len(text.split())


def text_of(n: int, word: str = "w") -> str:
    return " ".join([word] * n)


def snippet(n: int, name: str = "a.py") -> Snippet:
    return Snippet(path=name, start_line=1, end_line=n, text=text_of(n) + "\n")


def rendered_tokens(plan: Plan) -> int:
    """What a chat template adding exactly OVERHEAD would produce for the planned prompt."""
    user = "".join(s.text for s in plan.snippets) + plan.question
    messages = [plan.system, *(m.content for m in plan.history), user]
    return OVERHEAD.fixed + sum(words(m) + OVERHEAD.per_message for m in messages)


def plan(**overrides: object) -> Plan:
    args: dict[str, object] = {
        "n_ctx": 200,
        "answer_reserve": 50,
        "kv_bytes_per_token": 100,
        "system": text_of(10),
        "question": text_of(5),
        "count": words,
        "overhead": OVERHEAD,
    }
    args.update(overrides)
    return plan_prompt(**args)  # type: ignore[arg-type]


# --- properties -----------------------------------------------------------------------------

turns = st.lists(
    st.tuples(st.sampled_from(["user", "assistant"]), st.integers(0, 60)).map(
        lambda t: Message(t[0], text_of(t[1]))  # type: ignore[arg-type]
    ),
    max_size=8,
)
snippets = st.lists(st.integers(0, 200).map(snippet), max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    n_ctx=st.integers(1, 2000),
    reserve=st.integers(0, 600),
    system=st.integers(0, 80),
    question=st.integers(0, 300),
    history=turns,
    ranked=snippets,
    snippet_budget=st.integers(0, 800),
    kv_budget=st.one_of(st.none(), st.integers(0, 300_000)),
)
def test_no_plan_exceeds_the_context_and_the_answer_reserve_is_kept(
    n_ctx: int,
    reserve: int,
    system: int,
    question: int,
    history: Sequence[Message],
    ranked: Sequence[Snippet],
    snippet_budget: int,
    kv_budget: int | None,
) -> None:
    limit = n_ctx if kv_budget is None else min(n_ctx, kv_budget // 100)
    fixed = system + question + 2 * OVERHEAD.per_message + OVERHEAD.fixed
    try:
        p = plan(
            n_ctx=n_ctx,
            answer_reserve=reserve,
            system=text_of(system),
            question=text_of(question),
            history=history,
            snippets=ranked,
            snippet_budget=snippet_budget,
            kv_budget_bytes=kv_budget,
        )
    except BudgetError:
        assert fixed + reserve > limit
        return
    assert fixed + reserve <= limit
    assert p.limit == limit
    assert p.prompt_tokens + p.answer_reserve <= p.limit <= n_ctx
    assert rendered_tokens(p) <= p.prompt_tokens
    s = p.sections
    assert p.prompt_tokens == s.system + s.history + s.snippets + s.question + p.template_tokens
    assert s.snippets <= snippet_budget
    if kv_budget is not None:
        assert p.kv_bytes <= kv_budget
    # history is trimmed oldest first, and the kept part starts with a user turn
    assert p.dropped_turns == tuple(range(len(p.dropped_turns)))
    assert p.history == tuple(history[len(p.dropped_turns) :])
    assert not p.history or p.history[0].role == "user"
    # snippets keep their rank order; every snippet is either included or cut
    assert list(p.included) == sorted(p.included)
    assert sorted(p.included + p.cut) == list(range(len(ranked)))
    assert (p.notice is None) == (not p.dropped_turns and not p.cut)


@settings(max_examples=100, deadline=None)
@given(question=st.integers(0, 400), reserve=st.integers(0, 400))
def test_a_question_too_long_for_the_context_raises(question: int, reserve: int) -> None:
    fixed = 10 + question + 2 * OVERHEAD.per_message + OVERHEAD.fixed
    if fixed + reserve <= 200:
        assert plan(question=text_of(question), answer_reserve=reserve).prompt_tokens + reserve <= 200
    else:
        with pytest.raises(BudgetError, match="do not fit n_ctx 200"):
            plan(question=text_of(question), answer_reserve=reserve)


# --- examples -------------------------------------------------------------------------------


def test_sections_count_exactly_what_goes_into_the_prompt() -> None:
    p = plan(history=[Message("user", text_of(3)), Message("assistant", text_of(4))], snippets=[snippet(7)])
    assert (p.sections.system, p.sections.history, p.sections.snippets, p.sections.question) == (10, 7, 7, 5)
    assert p.template_tokens == OVERHEAD.fixed + 4 * OVERHEAD.per_message + OVERHEAD.per_join
    assert p.prompt_tokens == 29 + p.template_tokens
    assert p.kv_bytes == (p.prompt_tokens + 50) * 100
    assert p.notice is None


def test_snippets_get_what_is_left_after_system_question_and_reserve() -> None:
    # room = 200 - 50 reserve - (10 + 5 + 8 + 6) fixed = 121 tokens
    p = plan(snippets=[snippet(100), snippet(30), snippet(15)])
    assert p.included == (0, 2)  # 101 + 16 fit; 31 more would not
    assert p.cut == (1,)
    assert "left out 1 of 3 snippet(s)" in (p.notice or "")


def test_the_snippet_budget_caps_retrieval_even_when_the_context_has_room() -> None:
    p = plan(n_ctx=8192, snippets=[snippet(400), snippet(400)], snippet_budget=600)
    assert p.included == (0,)
    assert p.sections.snippets == 400


def test_history_is_dropped_oldest_first_with_a_visible_notice() -> None:
    history = [Message("user", text_of(10)), Message("assistant", text_of(80)),
               Message("user", text_of(20)), Message("assistant", text_of(20))]
    p = plan(history=history)  # 121 tokens of room: the last two turns cost 48, the 80-word one 84 more
    assert p.dropped_turns == (0, 1)
    assert p.history == tuple(history[2:])
    assert p.notice is not None and "dropped the 2 oldest message(s)" in p.notice


def test_a_kept_history_never_starts_with_an_assistant_turn() -> None:
    history = [Message("user", text_of(200)), Message("assistant", text_of(5)), Message("user", text_of(5))]
    p = plan(history=history)
    assert p.history == (history[2],)
    assert p.dropped_turns == (0, 1)


def test_snippets_win_over_history() -> None:
    p = plan(history=[Message("user", text_of(60))], snippets=[snippet(100)])
    assert p.included == (0,)
    assert p.dropped_turns == (0,)


def test_a_kv_budget_below_n_ctx_limits_the_prompt() -> None:
    p = plan(n_ctx=8192, kv_budget_bytes=100 * 150, snippets=[snippet(100), snippet(50)])
    assert p.limit == 150
    assert p.prompt_tokens + p.answer_reserve <= 150
    assert p.kv_bytes <= 100 * 150


def test_the_budget_error_says_what_to_change() -> None:
    with pytest.raises(BudgetError, match="shorten the question, lower the answer reserve") as info:
        plan(question=text_of(500))
    assert "\n" not in str(info.value)


def test_nonsense_sizes_are_refused() -> None:
    with pytest.raises(BudgetError, match="pass positive sizes"):
        plan(n_ctx=0)


def test_budget_dict_has_the_ask_json_shape() -> None:
    d = plan(kv_budget_bytes=10**6).budget_dict()
    assert set(d) == {"n_ctx", "prompt_tokens", "answer_reserve", "sections", "kv_bytes_per_token", "kv_bytes",
                      "kv_budget_bytes"}
    assert set(d["sections"]) == {"system", "history", "snippets", "question"}
    assert d["kv_budget_bytes"] == 10**6


def test_snippet_citation_is_path_start_end() -> None:
    assert Snippet("src/app.py", 10, 42, "x").citation == "src/app.py:10-42"
