"""One chat turn (retrieve over MCP -> plan -> generate) with a fake runtime and a real MCP server over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.chat import CITATION, FakeRuntime, make_repo

from bridge.chat.budget import Plan
from bridge.chat.retrieval import McpRetriever, Retrieval, local_server
from bridge.chat.session import ChatSession, ask_report, open_runtime
from bridge.chat.settings import Settings
from bridge.errors import BudgetError, ChatError, ConfigError

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def retriever(live_server: object) -> Iterator[McpRetriever]:
    with McpRetriever(live_server.url, live_server.token) as r:  # type: ignore[attr-defined]
        yield r


def session(retriever: object, runtime: FakeRuntime | None = None, **settings: object) -> ChatSession:
    return ChatSession(runtime or FakeRuntime(), retriever, Settings(mode="lexical", **settings))  # type: ignore[arg-type]


class SpyRetriever:
    """Records searches and returns nothing."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def search(self, query: str, *, k: int, max_tokens: int, mode: str) -> Retrieval:
        self.queries.append(query)
        return Retrieval((), 0.0)


# --- retrieval through the MCP tool ------------------------------------------------------------


def test_a_turn_searches_through_the_mcp_server_and_cites_what_it_retrieved(retriever: McpRetriever) -> None:
    runtime = FakeRuntime()
    turn = session(retriever, runtime).ask("where is parse_config reading the settings file")
    assert turn.sources and turn.sources[0].path == "src/config.py"
    assert turn.retrieved >= len(turn.sources)
    assert turn.retrieval_ms > 0
    (messages, _), = runtime.calls
    shown = CITATION.findall(messages[-1].content)
    assert shown == [s.citation for s in turn.sources]
    assert turn.answer.startswith(f"See {turn.sources[0].citation}")


def test_a_retrieved_source_is_the_exact_lines_of_the_file(retriever: McpRetriever, chat_repo: Path) -> None:
    runtime = FakeRuntime()
    turn = session(retriever, runtime).ask("retry attempts delay sleep")
    top = turn.sources[0]
    lines = (chat_repo / top.path).read_text().splitlines()[top.start_line - 1 : top.end_line]
    assert "\n".join(lines) in runtime.calls[0][0][-1].content


def test_the_prompt_is_system_then_history_then_snippets_then_question(retriever: McpRetriever) -> None:
    runtime = FakeRuntime()
    chat = session(retriever, runtime)
    first = chat.ask("how does start_server get its settings")
    chat.ask("and what does parse_config return")
    messages, _ = runtime.calls[-1]
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1].content == "how does start_server get its settings"
    assert messages[2].content == first.answer
    last = messages[3].content
    first_citation = last[1 : last.index("]")]
    assert last.startswith("[") and last.rstrip().endswith(f"cite the snippet you used like this: (see {first_citation}).")
    assert last.index("```") < last.index("Question: and what does parse_config return")


def test_the_answer_gets_exactly_the_reserve_and_the_prompt_never_overflows(retriever: McpRetriever) -> None:
    runtime = FakeRuntime(n_ctx=400, answer_words=1000)
    turn = session(retriever, runtime, answer_reserve=100).ask("parse_config settings file pairs")
    (messages, max_tokens), = runtime.calls
    assert max_tokens == 100 == turn.generation.completion_tokens
    assert runtime.count_messages(messages) <= turn.plan.prompt_tokens
    assert turn.plan.prompt_tokens + 100 <= 400


def test_streamed_pieces_make_up_the_answer_and_time_the_first_token(retriever: McpRetriever) -> None:
    pieces: list[str] = []
    turn = session(retriever).ask("retry", on_token=pieces.append)
    assert "".join(pieces).strip() == turn.checked.model_text
    assert turn.answer.startswith(turn.checked.model_text)
    assert turn.first_token_ms is not None and 0 < turn.first_token_ms <= turn.total_ms


def test_a_looping_model_is_stopped_and_what_came_before_is_kept_with_a_notice(retriever: McpRetriever) -> None:
    runtime = FakeRuntime(answer_words=200, filler=("it", "calls", "the", "handler", "again", "and"))
    turn = session(retriever, runtime, answer_reserve=300).ask("retry")
    assert turn.generation.finish_reason == "stopped"
    assert turn.generation.completion_tokens < 30
    assert turn.checked.looped and turn.checked.usable
    assert turn.answer.count("it calls the handler again and") == 1
    assert "[stopped: the model began repeating itself" in turn.answer


def test_the_answer_ends_with_the_retrieved_source_it_cites(retriever: McpRetriever) -> None:
    turn = session(retriever).ask("parse_config settings")
    cited = turn.checked.citations.valid[0].span.citation
    assert turn.answer.endswith(f"Sources: {cited}")
    assert cited in [s.citation for s in turn.sources]


def test_when_the_model_writes_nothing_usable_the_best_snippet_is_shown_instead(retriever: McpRetriever) -> None:
    runtime = FakeRuntime(answer_words=0)
    runtime.silent = True
    turn = session(retriever, runtime).ask("parse_config settings")
    assert not turn.checked.usable
    assert turn.answer.startswith("The model produced no usable answer (it wrote almost nothing).")
    assert f"[{turn.sources[0].citation}]" in turn.answer
    assert turn.answer.rstrip().endswith("```")


def test_the_plan_is_shown_before_generation_starts(retriever: McpRetriever) -> None:
    runtime = FakeRuntime()
    seen: list[tuple[Plan, int]] = []
    turn = session(retriever, runtime).ask("retry", on_plan=lambda plan: seen.append((plan, len(runtime.calls))))
    assert seen == [(turn.plan, 0)]


# --- budget --------------------------------------------------------------------------------------


def test_history_is_trimmed_oldest_first_with_a_visible_notice(retriever: McpRetriever) -> None:
    runtime = FakeRuntime(n_ctx=500, answer_words=60)
    chat = session(retriever, runtime, answer_reserve=80, snippet_tokens=150)
    notices: list[str | None] = []
    for question in ["first question about retry", "second about parse_config", "third about start_server",
                     "fourth about sockets", "fifth about settings"]:
        chat.ask(question, on_plan=lambda plan: notices.append(plan.notice))
    assert notices[0] is None
    assert any(n and "dropped the" in n and "oldest message" in n for n in notices)
    messages, _ = runtime.calls[-1]
    kept = [m.content for m in messages if m.role == "user"][:-1]
    assert "first question about retry" not in kept
    assert kept == [q for q in ["second about parse_config", "third about start_server", "fourth about sockets"]
                    if q in kept]
    assert all(p + 80 <= 500 for p in (runtime.count_messages(m) for m, _ in runtime.calls))


def test_snippets_that_do_not_fit_are_left_out_and_not_reported_as_sources(retriever: McpRetriever) -> None:
    runtime = FakeRuntime()
    turn = session(retriever, runtime, snippet_tokens=45, k=5).ask("parse_config start_server retry settings")
    shown = CITATION.findall(runtime.calls[0][0][-1].content)
    assert [s.citation for s in turn.sources] == shown
    assert turn.plan.sections.snippets <= 45


def test_a_question_too_long_for_the_context_fails_before_any_search() -> None:
    spy = SpyRetriever()
    with pytest.raises(BudgetError, match="question .* do not fit n_ctx 300: shorten the question"):
        session(spy, FakeRuntime(n_ctx=300), answer_reserve=100).ask("why " * 400)
    assert spy.queries == []


def test_a_report_over_64_kb_is_refused_in_one_line_before_any_search() -> None:
    spy = SpyRetriever()
    with pytest.raises(ChatError, match=r"^the question is 65537 bytes, over the 65536-byte \(64 KB\) limit: shorten it$"):
        session(spy, FakeRuntime(n_ctx=8192)).ask("a" * 65537)
    assert spy.queries == []
    session(spy, FakeRuntime(n_ctx=8192)).ask("a" * 65536)  # the limit itself is accepted
    assert len(spy.queries[0]) == 65536


def test_bytes_that_are_not_text_are_replaced_not_a_crash() -> None:
    spy, runtime = SpyRetriever(), FakeRuntime()
    session(spy, runtime).ask("parse_config fails on \udcff\udcfe input")
    assert spy.queries == ["parse_config fails on \ufffd\ufffd input"]


def test_a_pasted_report_over_4_kb_is_searched_whole() -> None:
    spy = SpyRetriever()
    session(spy, FakeRuntime(n_ctx=8192)).ask("é" * 3000)
    assert len(spy.queries[0].encode("utf-8")) == 6000


REPORT = "\n".join([
    "parse_config drops the last key of server.ini",
    "Steps: call `parse_config('server.ini')` and read the result.",
    *(f"somepackage{i}    1.{i}.0" for i in range(60)),  # a pasted `pip list`
    "Expected every key; got all but the last.",
])


def test_a_report_too_long_for_the_context_is_condensed_for_the_model_and_searched_whole() -> None:
    spy, runtime = SpyRetriever(), FakeRuntime(n_ctx=400)
    chat = session(spy, runtime, answer_reserve=100, snippet_tokens=60)
    turn = chat.ask(REPORT)
    assert spy.queries == [REPORT]  # the search read every line
    asked = runtime.calls[0][0][-1].content
    assert "parse_config drops the last key" in asked and "Expected every key" in asked
    assert "somepackage" not in asked
    assert turn.condensed is not None and turn.condensed.dropped == {"packages": 60}
    assert turn.plan.notice is not None and "60 lines of package list" in turn.plan.notice
    assert chat.history[0].content == turn.condensed.text  # later turns see what the model saw


def test_a_report_still_too_long_after_focusing_keeps_its_first_lines_and_says_how_many_were_cut() -> None:
    report = "\n".join(["retry gives up too early", *(f"step {i}: call retry with attempts {i}" for i in range(200))])
    runtime = FakeRuntime(n_ctx=600)
    turn = session(SpyRetriever(), runtime, answer_reserve=100, snippet_tokens=60).ask(report)
    assert turn.condensed is not None and turn.condensed.cut_lines > 0
    asked = runtime.calls[0][0][-1].content
    assert asked.count("step ") == 200 - turn.condensed.cut_lines
    assert f"{turn.condensed.cut_lines} more lines of the report left out" in asked
    assert "step 0:" in asked and "step 199:" not in asked
    assert turn.plan.prompt_tokens + 100 <= 600  # it fits, with the reserve
    assert f"its last {turn.condensed.cut_lines} lines" in (turn.plan.notice or "")


def test_a_report_that_fits_beside_the_snippet_budget_is_read_as_written() -> None:
    runtime = FakeRuntime(n_ctx=2048)
    turn = session(SpyRetriever(), runtime).ask(REPORT)
    assert turn.condensed is None and "somepackage59" in runtime.calls[0][0][-1].content


def test_a_kv_budget_caps_the_prompt_and_is_reported(retriever: McpRetriever) -> None:
    budget = 23_040 * 700  # 700 tokens of the fake's KV cache
    runtime = FakeRuntime(n_ctx=2048)
    turn = session(retriever, runtime, kv_budget=budget, answer_reserve=200).ask("retry")
    assert turn.plan.limit == 700
    assert turn.plan.prompt_tokens + 200 <= 700
    report = ask_report(turn, runtime)["budget"]
    assert report["kv_budget_bytes"] == budget
    assert report["kv_bytes_per_token"] == 23_040
    assert report["kv_bytes"] == (turn.plan.prompt_tokens + 200) * 23_040 <= budget


def test_no_snippet_budget_means_no_search() -> None:
    spy = SpyRetriever()
    turn = session(spy, snippet_tokens=0).ask("what is this")
    assert spy.queries == [] and turn.sources == ()


def test_a_turn_of_punctuation_alone_is_answered_without_a_search() -> None:
    spy = SpyRetriever()
    turn = session(spy).ask("?")
    assert spy.queries == [] and turn.sources == ()


def test_an_empty_question_is_refused() -> None:
    with pytest.raises(ChatError, match="empty"):
        session(SpyRetriever()).ask("   ")


# --- the report ----------------------------------------------------------------------------------


def test_the_ask_report_has_exactly_the_documented_shape(retriever: McpRetriever) -> None:
    runtime = FakeRuntime()
    report = ask_report(session(retriever, runtime).ask("parse_config"), runtime)
    assert set(report) == {"answer", "sources", "model", "budget", "notice", "timings", "checks", "grounding"}
    assert report["notice"] is None
    assert report["checks"] == {"looped": False, "usable": True, "citations": [report["answer"].split()[1]],
                                "unknown_citations": []}
    assert set(report["sources"][0]) == {"path", "start_line", "end_line", "score"}
    assert report["model"] == {"path": "fake.gguf", "n_ctx": 2048, "trained_context": 8192, "gpu_layers": 0,
                               "cache_type": "f16"}
    assert set(report["budget"]) == {"n_ctx", "prompt_tokens", "answer_reserve", "sections", "kv_bytes_per_token",
                                     "kv_bytes", "kv_budget_bytes"}
    assert set(report["budget"]["sections"]) == {"system", "history", "snippets", "question"}
    assert set(report["timings"]) == {"retrieval_ms", "prefill_ms", "prefill_tokens_per_s", "decode_tokens_per_s",
                                      "total_ms"}
    sections = report["budget"]["sections"]
    assert sum(sections.values()) < report["budget"]["prompt_tokens"]  # the template adds the rest


def test_session_history_can_be_reset(retriever: McpRetriever) -> None:
    chat = session(retriever)
    chat.ask("retry")
    chat.reset()
    chat.ask("parse_config")
    assert chat.last is not None and chat.last.plan.sections.history == 0


# --- failures of the MCP side ----------------------------------------------------------------------


def test_a_search_the_server_refuses_is_a_chat_error_with_its_message(retriever: McpRetriever) -> None:
    chat = ChatSession(FakeRuntime(), retriever, Settings(mode="vector"))
    with pytest.raises(ChatError, match="refused the search: .*no vectors yet"):
        chat.ask("retry")


def test_a_wrong_token_is_a_chat_error_that_names_the_server(live_server: object) -> None:
    with pytest.raises(ChatError, match=f"cannot open an MCP session with {live_server.url}.*--token-env"):  # type: ignore[attr-defined]
        McpRetriever(live_server.url, "wrong-token", timeout=20)  # type: ignore[attr-defined]


def test_an_unreachable_server_is_a_chat_error() -> None:
    with pytest.raises(ChatError, match="http://127.0.0.1:9/mcp"):
        McpRetriever("http://127.0.0.1:9/mcp", timeout=20)


def test_a_warm_up_search_returns_at_once_and_leaves_the_session_usable(retriever: McpRetriever) -> None:
    retriever.warm_up("lexical")
    assert retriever.search("retry", k=2, max_tokens=600, mode="lexical").snippets[0].path == "src/retry.py"


def test_the_local_server_builds_a_missing_index_and_searches_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "fresh")
    with local_server(repo, tmp_path / "index") as server, McpRetriever(server.url, server.token) as r:
        assert server.token
        hits = r.search("partition key value pairs", k=3, max_tokens=600, mode="hybrid").snippets
    assert hits[0].path == "src/config.py"
    assert (tmp_path / "index").is_dir()


# --- choosing the runtime ------------------------------------------------------------------------


def test_an_llm_url_without_model_facts_cannot_honour_a_kv_budget() -> None:
    with pytest.raises(ConfigError, match="--kv-budget with --llm-url needs .*--model"):
        open_runtime(Settings(llm_url="http://127.0.0.1:9", kv_budget=1 << 20))


def test_an_llm_url_with_the_models_gguf_gets_the_same_context_choice_as_llama_cpp() -> None:
    from bridge.llm.gguf import bundled_model_path

    settings = Settings(llm_url="http://127.0.0.1:9/v1", model=bundled_model_path(), kv_budget=23_040 * 1000)
    runtime = open_runtime(settings)  # no request is made while the context is known
    assert runtime.n_ctx == 1000  # type: ignore[attr-defined]
    runtime.close()


def test_a_remote_model_of_unknown_shape_reports_no_kv_bytes(retriever: McpRetriever) -> None:
    runtime = FakeRuntime()
    runtime.facts = None  # type: ignore[assignment]
    chat = session(retriever, runtime)
    turn = chat.ask("retry")
    assert chat.kv_bytes_per_token == 0
    assert (turn.plan.kv_bytes, turn.plan.kv_budget_bytes) == (0, None)



def test_a_model_that_cites_nothing_picks_its_sources_under_a_grammar(retriever: McpRetriever) -> None:
    runtime = FakeRuntime()
    runtime.silent_citation = True
    turn = session(retriever, runtime).ask("parse_config settings")
    offered = [s.citation for s in turn.sources]
    assert runtime.cited == [tuple(offered)]
    assert turn.answer.endswith(f"Sources: {offered[-1]}")
    assert [c.span.citation for c in turn.checked.citations.valid] == [offered[-1]]


def test_without_a_grammar_the_answer_says_it_cites_none_of_the_retrieved_sources(retriever: McpRetriever) -> None:
    runtime = FakeRuntime()
    runtime.silent_citation = True
    runtime.can_cite = False
    turn = session(retriever, runtime).ask("parse_config settings")
    assert "Sources (retrieved; the answer cites none): " in turn.answer
    assert not turn.checked.citations.valid
