"""Context without a tool call, through a real MCP client over real HTTP: the `ask_repo` prompt carries
the question and the code that answers it within `bridge ask`'s snippet budget, and the repository's
files are resources under `read_file`'s path rules."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from bridge.chat.budget import DEFAULT_SNIPPET_BUDGET
from bridge.chat.prompt import render_question, system_prompt
from bridge.chat.settings import Settings
from bridge.server.connect import connect
from bridge.server.transports import RunningServer, start_background
from index.tokenize import estimate_tokens

TOKEN = "context-token-0123456789abcdef"
QUESTION = "How are the settings parsed from the config file?"


@pytest.fixture
def running(repo: Path, bridge_home: Path) -> Iterator[RunningServer]:
    with start_background([repo], token=TOKEN, no_vectors=True, watch=False) as server:
        yield server


def _with_client(url: str, work):  # type: ignore[no-untyped-def]
    async def main():  # type: ignore[no-untyped-def]
        async with connect(url, TOKEN) as client:
            return await work(client)

    return anyio.run(main)


def _refusal(work) -> str:  # type: ignore[no-untyped-def]
    """The message of the error a client call ends with (the SDK raises it from inside task groups)."""
    with pytest.raises(BaseException) as refused:
        work()
    exc: BaseException = refused.value
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc)


def test_ask_repo_is_listed_with_its_question_argument(running: RunningServer) -> None:
    listed = _with_client(running.url, lambda c: c.list_prompts())
    (prompt,) = [p for p in listed.prompts if p.name == "ask_repo"]
    arguments = {a.name: a.required for a in prompt.arguments}
    assert arguments == {"question": True, "repo": False}


def test_ask_repo_gives_the_question_and_the_snippets_within_bridge_asks_budget(running: RunningServer) -> None:
    async def work(client):  # type: ignore[no-untyped-def]
        prompt = await client.get_prompt("ask_repo", {"question": QUESTION})
        search = await client.call_tool("search_code", {"query": QUESTION, "k": Settings().k, "max_tokens": DEFAULT_SNIPPET_BUDGET})
        return prompt, search

    prompt, search = _with_client(running.url, work)
    (message,) = prompt.messages
    assert message.role == "user"
    text = message.content.text
    system, question = system_prompt(), QUESTION
    assert text.startswith(system)
    citations = re.findall(r"^\[(\S+:\d+-\d+)\]$", text, re.MULTILINE)
    assert citations and citations[0].startswith("src/config.py:")
    assert text.endswith(render_question(question, citations[0]))
    # The same hits bridge ask retrieves (search_code with its k and snippet budget), in rank order,
    # and the code blocks together within that budget.
    hits = search.structured_content["hits"]
    assert citations == [f"{h['path']}:{h['start_line']}-{h['end_line']}" for h in hits][: len(citations)]
    snippets = text[len(system):text.index("Question: ")]
    assert 0 < estimate_tokens(snippets) <= DEFAULT_SNIPPET_BUDGET
    assert "def parse_config(path):" in snippets


def test_ask_repo_for_an_unknown_repository_is_a_readable_error(running: RunningServer) -> None:
    message = _refusal(lambda: _with_client(running.url, lambda c: c.get_prompt("ask_repo", {"question": QUESTION, "repo": "nope"})))
    assert "unknown repo 'nope'" in message


def test_the_files_are_a_resource_template_that_reads_like_read_file(running: RunningServer, repo: Path) -> None:
    async def work(client):  # type: ignore[no-untyped-def]
        templates = await client.list_resource_templates()
        read = await client.read_resource("repo://demo/src/config.py")
        return templates, read

    templates, read = _with_client(running.url, work)
    assert [t.uri_template for t in templates.resource_templates] == ["repo://{repo}/{+path}"]
    (content,) = read.contents
    assert content.text == (repo / "src" / "config.py").read_text()


@pytest.mark.parametrize("path", [".env", "id_rsa", "build/out.py", ".git/config", "../demo/src/config.py", "missing.py"])
def test_a_file_read_file_refuses_is_refused_as_a_resource(running: RunningServer, path: str) -> None:
    message = _refusal(lambda: _with_client(running.url, lambda c: c.read_resource(f"repo://demo/{path}")))
    assert message and "hunter2" not in message and "PRIVATE KEY" not in message and "generated" not in message
