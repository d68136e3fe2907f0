"""A small model's answer opens with a name the best snippet defines, the model's own pick among them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from support.chat import FAKE_FACTS, FakeRuntime

from bridge.chat.lead import defined_names, lead_names, lead_text
from bridge.chat.retrieval import McpRetriever
from bridge.chat.session import ChatSession, ask_report
from bridge.chat.settings import Settings

pytestmark = pytest.mark.timeout(60)

SMALL, LARGE = 134_515_008, 8_030_261_248


def test_definitions_are_read_in_the_languages_the_index_chunks() -> None:
    code = (
        "class Basket(Base):\n"
        "    async def total(self):\n"
        "export default function render(props) {}\n"
        "func (s *Server) Serve(l net.Listener) error {\n"
        "pub(crate) fn parse_line(line: &str) -> Line {\n"
        "public static class Handler {\n"
        "type Options struct {\n"
    )
    assert defined_names(code) == ("Basket", "total", "render", "Serve", "parse_line", "Handler", "Options")


def test_a_keyword_inside_prose_or_a_call_is_not_a_definition() -> None:
    code = '"""The class of every item; def is a keyword."""\nitems = make_class(def_value)\nreturn total(items)\n'
    assert defined_names(code) == ()


def test_each_name_is_offered_once_and_dunder_methods_only_when_nothing_else_is_defined() -> None:
    assert lead_names("class A:\n    def __init__(self):\n    def run(self):\n    def run(self, x):\n") == ("A", "run")
    assert lead_names("    def __enter__(self):\n    def __exit__(self, *a):\n") == ("__enter__", "__exit__")
    assert lead_text("run") == "`run` is"


def test_lines_inside_one_definition_that_define_nothing_offer_that_definitions_name() -> None:
    middle = "    pairs = {}\n    for line in open(path):\n        pairs[key] = value\n"
    assert lead_names(middle, "Config.parse_config") == ("parse_config",)
    assert lead_names(middle) == ()  # no symbol known: nothing to open with
    assert lead_names("def run(self):\n    pass\n", "Other.thing") == ("run",)  # what the lines define comes first


class SmallRuntime(FakeRuntime):
    def __init__(self, parameters: int) -> None:
        super().__init__()
        self.facts = dataclasses.replace(FAKE_FACTS, parameters=parameters)


@pytest.fixture(scope="module")
def retriever(live_server: object) -> Iterator[McpRetriever]:
    with McpRetriever(live_server.url, live_server.token) as r:  # type: ignore[attr-defined]
        yield r


def test_a_small_models_answer_opens_with_its_pick_among_the_names_the_best_snippet_defines(
    retriever: McpRetriever,
) -> None:
    runtime = SmallRuntime(SMALL)
    turn = ChatSession(runtime, retriever, Settings(mode="lexical")).ask("where is parse_config reading the settings file")
    best = turn.plan.snippets[0]
    assert best.path == "src/config.py" and best.symbol == "parse_config"  # the wire hit's symbol reaches the snippet
    assert runtime.offered == [lead_names(best.code)] == [("parse_config",)]
    opening = lead_text(runtime.offered[0][-1])
    assert runtime.prefixes == [opening]  # the model goes on from its pick
    assert turn.answer.startswith(opening + "See ")
    report = ask_report(turn, runtime)
    assert report["answer"].startswith(opening) and report["grounding"]["lead"] == turn.lead == runtime.offered[0][-1]


def test_the_opening_comes_out_of_the_answers_reserve_and_is_left_out_when_it_would_fill_it(
    retriever: McpRetriever,
) -> None:
    question = "where is parse_config reading the settings file"
    for reserve, opened in ((40, True), (2, False)):
        runtime = SmallRuntime(SMALL)
        turn = ChatSession(runtime, retriever, Settings(mode="lexical", answer_reserve=reserve)).ask(question)
        assert runtime.calls[-1][1] == (reserve - 2 if opened else reserve)  # "`parse_config` is": two fake tokens
        assert (turn.lead == "parse_config") is opened and runtime.prefixes == [lead_text("parse_config") if opened else ""]


def test_a_large_model_or_a_backend_without_grammars_answers_as_it_begins(retriever: McpRetriever) -> None:
    large = SmallRuntime(LARGE)
    free = ChatSession(large, retriever, Settings(mode="lexical")).ask("where is parse_config")
    assert large.offered == [] and large.prefixes == [""] and free.lead is None
    plain = SmallRuntime(SMALL)
    plain.can_cite = False
    turn = ChatSession(plain, retriever, Settings(mode="lexical")).ask("where is parse_config")
    assert plain.offered and plain.prefixes == [""] and turn.lead is None and turn.answer.startswith("See ")
