"""A small model's turn, end to end with a fake runtime: sources first, invented code never shown."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from support.chat import FAKE_FACTS, FakeRuntime
from typer.testing import CliRunner

from bridge.chat.retrieval import McpRetriever
from bridge.chat.session import ChatSession, ask_report
from bridge.chat.settings import Settings
from bridge.cli import app
from bridge.llm.runtime import GREEDY, Decoding, Generation, Message, OnToken, StopWhen

pytestmark = pytest.mark.timeout(60)

INVENTED = (
    "The settings are read by parse_config (see {cited}).\n\n"
    "bridge/test.py:12-3\n"
    "```python\n"
    "def fetch_settings(path):\n"
    "    return load_everything(path)\n"
    "```\n"
    "It splits each line at the first equals sign.\n"
)


class InventingRuntime(FakeRuntime):
    """A fake of `parameters` weights that answers with INVENTED, a few characters per piece."""

    def __init__(self, parameters: int | None, answer: str = INVENTED) -> None:
        super().__init__()
        self.facts = dataclasses.replace(FAKE_FACTS, parameters=parameters)
        self.answer = answer

    def generate(
        self, messages: Sequence[Message], *, max_tokens: int, decoding: Decoding = GREEDY,
        on_token: OnToken | None = None, stop_when: StopWhen | None = None, prefix: str = "",
    ) -> Generation:
        self.calls.append((tuple(messages), max_tokens))
        self.prefixes.append(prefix)
        cited = messages[-1].content[1 : messages[-1].content.index("]")]
        text = (" " if prefix else "") + self.answer.format(cited=cited)  # a reply begun with a name goes on
        for i in range(0, len(text), 4):
            if on_token is not None:
                on_token(text[i : i + 4])
        return Generation(text=text, prompt_tokens=100, completion_tokens=60, cached_tokens=0, prefill_ms=10.0,
                          prefill_tokens_per_s=1e4, decode_tokens_per_s=100.0, total_ms=20.0, finish_reason="stop")


@pytest.fixture(scope="module")
def retriever(live_server: object) -> Iterator[McpRetriever]:
    with McpRetriever(live_server.url, live_server.token) as r:  # type: ignore[attr-defined]
        yield r


def turn_of(retriever: McpRetriever, parameters: int | None, grounding: str = "auto") -> tuple[object, list[str]]:
    pieces: list[str] = []
    chat = ChatSession(InventingRuntime(parameters), retriever, Settings(mode="lexical", grounding=grounding))  # type: ignore[arg-type]
    return chat.ask("where is parse_config reading the settings file", on_token=pieces.append), pieces


def test_a_small_model_never_streams_or_shows_code_or_citations_the_sources_lack(retriever: McpRetriever) -> None:
    turn, pieces = turn_of(retriever, 134_515_008)
    streamed = "".join(pieces)
    for shown in (streamed, turn.answer):  # type: ignore[attr-defined]
        assert "fetch_settings" not in shown and "bridge/test.py" not in shown
    assert streamed.startswith("`parse_config` is The settings are read by parse_config (see src/config.py:")
    assert "[withheld: code not found in the retrieved sources (1 block); 1 citation of a source that was not retrieved]" \
        in turn.answer  # type: ignore[attr-defined]
    assert "It splits each line at the first equals sign." in turn.answer  # type: ignore[attr-defined]


def test_a_large_model_or_free_grounding_keeps_the_answer_as_written(retriever: McpRetriever) -> None:
    for parameters, grounding in ((8_030_261_248, "auto"), (134_515_008, "free")):
        turn, pieces = turn_of(retriever, parameters, grounding)
        assert "def fetch_settings(path):" in turn.answer  # type: ignore[attr-defined]
        assert "Not among the retrieved sources: bridge/test.py:12-3" in turn.answer  # type: ignore[attr-defined]
        assert turn.checked.grounding is None  # type: ignore[attr-defined]


def test_a_grounded_small_model_is_decoded_without_code_fences_and_a_large_one_with_them(retriever: McpRetriever) -> None:
    def fences(parameters: int, grounding: str = "auto") -> bool:
        chat = ChatSession(InventingRuntime(parameters), retriever, Settings(mode="lexical", grounding=grounding))  # type: ignore[arg-type]
        return chat.decoding.fences

    assert not fences(134_515_008)  # its blocks were inventions, withheld whole (bridge/chat/session.py)
    assert fences(8_030_261_248) and fences(134_515_008, "free")


def test_the_ask_report_says_what_grounding_withheld(retriever: McpRetriever) -> None:
    runtime = InventingRuntime(134_515_008)
    turn = ChatSession(runtime, retriever, Settings(mode="lexical")).ask("parse_config settings")
    grounding = ask_report(turn, runtime)["grounding"]
    assert grounding == {
        "mode": "grounded", "withheld_code_blocks": 1, "withheld_block_lines": 2, "withheld_code_lines": 0,
        "withheld_citations": 1, "withheld_sentences": 0,
        "note": "[withheld: code not found in the retrieved sources (1 block); 1 citation of a source that was not retrieved]",
        "lead": turn.lead,
    }
    assert turn.lead and turn.answer.startswith(f"`{turn.lead}` is ")


def test_bridge_ask_with_a_small_model_shows_the_sources_and_their_first_lines_before_the_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, chat_repo: Path,
) -> None:
    runtime = InventingRuntime(134_515_008)
    monkeypatch.setattr("bridge.chat.session.open_runtime", lambda settings: runtime)
    monkeypatch.setenv("BRIDGE_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(app, ["ask", "parse_config settings file", "--repo", str(chat_repo), "--mode", "lexical"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    listed = re.search(r"sources \(retrieved, best first\):\n  src/config\.py:(\d+)-\d+  (.+)\n", result.stderr)
    assert listed is not None, result.stderr
    lines = (chat_repo / "src/config.py").read_text().splitlines()[int(listed.group(1)) - 1 :]
    assert listed.group(2) == next(line.strip() for line in lines if line.strip())
    assert result.stderr.index("sources (retrieved") < result.stderr.index("budget: n_ctx")
    assert "fetch_settings" not in result.stdout and "bridge/test.py" not in result.stdout
    assert result.stdout.startswith("`parse_config` is The settings are read by parse_config (see src/config.py:")
    assert result.stdout.count("[withheld:") == 1


def test_the_sources_line_picked_under_the_grammar_survives_a_fence_the_model_left_open(retriever: McpRetriever) -> None:
    runtime = InventingRuntime(134_515_008, answer="It reads the settings file with parse_config here.\n```\n")
    turn = ChatSession(runtime, retriever, Settings(mode="lexical")).ask("parse_config settings")
    assert turn.picked
    opening = runtime.prefixes[0]  # the name the answer opens with (bridge/chat/lead.py)
    assert turn.answer == f"{opening} It reads the settings file with parse_config here.\n\nSources: {turn.picked}"
