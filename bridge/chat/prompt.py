"""Prompt templates (shipped in the `prompts` package) and the messages list for a chat turn."""

from __future__ import annotations

from bridge.chat.budget import Plan, Snippet
from bridge.llm.runtime import Message
from bridge.server.prompt import load_template, render_template
from index.types import Hit

__all__ = [
    "build_messages",
    "load_template",
    "render_question",
    "render_snippet",
    "snippet_from_hit",
    "system_prompt",
]

# The templates are loaded and rendered by bridge.server.prompt, which the MCP `ask_repo` prompt uses too.
_format = render_template


def system_prompt() -> str:
    return load_template("system.txt").strip()


def render_question(question: str, citation: str = "path:start-end") -> str:
    """The user-message text that follows the snippets.

    `citation` (the first snippet's) is shown as the shape to copy: with it the bundled SmolLM2
    cited a retrieved source in 5 of 11 answers, against 1 of 6 when told only "path:start-end"
    (bench/decode_bench.py, bench/archive/RESULTS-journal.md).
    """
    return _format("question.txt", question=question.strip(), citation=citation).strip()


def render_snippet(
    path: str, start_line: int, end_line: int, text: str, *, language: str | None = None, score: float = 0.0,
    symbol: str | None = None,
) -> Snippet:
    citation = f"{path}:{start_line}-{end_line}"
    block = _format("snippet.txt", citation=citation, language=language or "", text=text.rstrip("\n"))
    return Snippet(path=path, start_line=start_line, end_line=end_line, text=block, score=score, code=text,
                   symbol=symbol)


def snippet_from_hit(hit: Hit) -> Snippet:
    return render_snippet(hit.path, hit.start_line, hit.end_line, hit.text, language=hit.language, score=hit.score,
                          symbol=hit.symbol)


def build_messages(plan: Plan) -> tuple[Message, ...]:
    """system -> kept history -> one user message of snippets then the question (stable prefix first)."""
    user = "".join(s.text for s in plan.snippets) + plan.question
    return (Message("system", plan.system), *plan.history, Message("user", user))
