"""A 50-turn conversation through the chat loop (real MCP retrieval over HTTP, fake runtime):
every turn's prompt plus its answer reserve fits the context, the KV cache it needs never
exceeds the plan nor the budget, and history is trimmed oldest first once it must be."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.chat import FAKE_FACTS, FakeRuntime

from bridge.chat.retrieval import McpRetriever
from bridge.chat.session import ChatSession
from bridge.chat.settings import Settings
from bridge.llm.gguf import kv_bytes_per_token

TURNS = 50
KV_PER_TOKEN = kv_bytes_per_token(FAKE_FACTS, "f16")
QUESTIONS = [
    "where is parse_config reading the settings file",
    "how does start_server get its port and settings",
    "what does retry do between attempts and when does it give up",
    "explain the README in detail, " + "with every word considered carefully " * 12,
    "which function opens a listening socket",
]


@pytest.fixture(scope="module")
def retriever(live_server: object) -> Iterator[McpRetriever]:
    with McpRetriever(live_server.url, live_server.token) as r:  # type: ignore[attr-defined]
        yield r


@pytest.mark.parametrize(
    ("n_ctx", "kv_budget"),
    [(1024, None), (4096, 900 * KV_PER_TOKEN)],
    ids=["context-bound", "kv-budget-bound"],
)
def test_fifty_turns_keep_every_prompt_within_the_context_and_the_kv_budget(
    retriever: McpRetriever, n_ctx: int, kv_budget: int | None
) -> None:
    runtime = FakeRuntime(n_ctx=n_ctx, answer_words=120)
    settings = Settings(mode="lexical", answer_reserve=160, snippet_tokens=300, kv_budget=kv_budget)
    chat = ChatSession(runtime, retriever, settings)
    limit = min(n_ctx, kv_budget // KV_PER_TOKEN) if kv_budget else n_ctx
    dropped_before = 0
    for n in range(TURNS):
        turn = chat.ask(f"{QUESTIONS[n % len(QUESTIONS)]} (turn {n})")
        plan = turn.plan
        sent, max_tokens = runtime.calls[-1]
        used = runtime.count_messages(sent)
        assert plan.limit == limit
        assert used <= plan.prompt_tokens, n  # the planner's count is what the runtime sees, or more
        assert plan.prompt_tokens + plan.answer_reserve <= plan.limit, n
        assert max_tokens == plan.answer_reserve == 160
        assert (used + turn.generation.completion_tokens) * KV_PER_TOKEN <= plan.kv_bytes, n
        if kv_budget is not None:
            assert plan.kv_bytes <= kv_budget, n
        assert turn.sources, n  # snippets keep their room however long the history grows
        kept = len(plan.history)
        assert plan.dropped_turns == tuple(range(len(chat.history) - 2 - kept)), n  # the oldest ones
        assert len(plan.dropped_turns) >= dropped_before, n
        dropped_before = len(plan.dropped_turns)
    assert dropped_before > 0, "the conversation never outgrew the context: the test proves nothing"
    assert len(chat.history) == 2 * TURNS
