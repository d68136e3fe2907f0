from __future__ import annotations

from importlib import resources

import pytest

from bridge.chat.budget import plan_prompt
from bridge.chat.prompt import (
    build_messages,
    load_template,
    render_question,
    render_snippet,
    snippet_from_hit,
    system_prompt,
)
from bridge.errors import PromptError
from bridge.llm.runtime import Message, TemplateOverhead
from index.types import Hit


def test_templates_are_package_resources_of_prompts() -> None:
    names = {entry.name for entry in resources.files("prompts").iterdir()}
    assert {"system.txt", "snippet.txt", "question.txt"} <= names


def test_the_system_prompt_asks_for_path_line_citations() -> None:
    text = system_prompt()
    assert "path:start-end" in text
    assert text == text.strip()


def test_a_missing_template_names_itself_and_the_fix() -> None:
    with pytest.raises(PromptError, match=r"prompts/nope\.txt is missing.*reinstall"):
        load_template("nope.txt")


def test_a_snippet_is_headed_by_its_citation_and_fenced() -> None:
    s = render_snippet("src/app.py", 3, 5, "def f():\n    return {'a': 1}\n", language="python", score=0.5)
    assert s.citation == "src/app.py:3-5"
    assert s.text.startswith("[src/app.py:3-5]\n```python\ndef f():\n    return {'a': 1}\n```\n")
    assert s.score == 0.5


def test_a_snippet_from_a_search_hit_keeps_its_lines() -> None:
    hit = Hit("lib/x.rs", 10, 12, 0.9, 1, None, "main", "rust", "fn main() {}", 4)
    s = snippet_from_hit(hit)
    assert (s.path, s.start_line, s.end_line) == ("lib/x.rs", 10, 12)
    assert "```rust\nfn main() {}\n```" in s.text


def test_the_question_asks_for_citations_and_survives_braces() -> None:
    text = render_question("  what does {x} mean?  ")
    assert text.startswith("Question: what does {x} mean?")
    assert "path:start-end" in text


def test_messages_put_the_stable_prefix_first() -> None:
    history = [Message("user", "earlier question"), Message("assistant", "earlier answer")]
    snippets = [render_snippet("a.py", 1, 2, "one"), render_snippet("b.py", 3, 4, "two")]
    plan = plan_prompt(
        n_ctx=4096,
        answer_reserve=256,
        kv_bytes_per_token=1,
        system=system_prompt(),
        question=render_question("why?"),
        count=len,
        history=history,
        snippets=snippets,
        overhead=TemplateOverhead(),
    )
    messages = build_messages(plan)
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[0].content == system_prompt()
    assert messages[1:3] == tuple(history)
    user = messages[-1].content
    assert user.index("[a.py:1-2]") < user.index("[b.py:3-4]") < user.index("Question: why?")
    assert user.endswith(render_question("why?"))
