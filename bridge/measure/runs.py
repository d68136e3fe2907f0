"""What `bridge eval` runs: retrieval per search mode, and the two answer arms.

The answer arms are chat sessions that differ only in their retriever: the index under the
snippet budget (`SearcherRetriever`), or the repository's files in path order cut to the context
(`WholeRepository`, the truncated full context a long-context user would paste).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bridge.chat.budget import Snippet
from bridge.chat.prompt import render_snippet, snippet_from_hit
from bridge.chat.retrieval import Retrieval
from bridge.chat.session import ChatSession
from bridge.chat.settings import Settings
from bridge.llm.runtime import Runtime
from bridge.measure.evaluate import AnswerCheck, Question, QuestionResult, check_answers, score_search
from index.errors import NoIndex
from index.search import MAX_K, Searcher
from index.tokenize import estimate_tokens

__all__ = ["FULL_CONTEXT_SLACK", "AnswerArms", "SearcherRetriever", "WholeRepository", "answer_arms", "run_modes"]

# The full-context arm hands the planner files worth this many times n_ctx by the (high) token
# estimate; the planner then packs what really fits, so the repository is cut at n_ctx.
FULL_CONTEXT_SLACK = 2

OnArm = Callable[[str, int], None]


class SearcherRetriever:
    """The chat loop's Retriever over a Searcher in this process (no MCP round trip)."""

    def __init__(self, searcher: Searcher) -> None:
        self._searcher = searcher

    def search(self, query: str, *, k: int, max_tokens: int, mode: str) -> Retrieval:
        result = self._searcher.search(query, k=k, max_tokens=max_tokens, mode=mode)
        return Retrieval(tuple(snippet_from_hit(hit) for hit in result.hits), result.took_ms)


class WholeRepository:
    """A Retriever that returns whole files in path order, ignoring the query: full context."""

    def __init__(self, root: Path, paths: Sequence[str], n_ctx: int) -> None:
        snippets: list[Snippet] = []
        total = 0
        for path in sorted(paths):
            try:
                text = (root / path).read_text(encoding="utf-8", errors="replace").rstrip("\n")
            except OSError:
                continue
            snippets.append(render_snippet(path, 1, max(1, text.count("\n") + 1), text))
            total += estimate_tokens(text)
            if total >= FULL_CONTEXT_SLACK * n_ctx:
                break
        self.snippets = tuple(snippets)

    def search(self, query: str, *, k: int, max_tokens: int, mode: str) -> Retrieval:
        return Retrieval(self.snippets, 0.0)


def run_modes(
    searcher: Searcher, questions: Sequence[Question], modes: Sequence[str], k: int, skip_missing: bool
) -> tuple[dict[str, list[QuestionResult]], dict[str, str]]:
    """Each mode's scored results; a mode whose index part is missing is skipped when allowed."""
    results: dict[str, list[QuestionResult]] = {}
    skipped: dict[str, str] = {}
    for mode in modes:
        try:
            # Up to MAX_K hits so that ten distinct files can be ranked; spans use the first k.
            found = [(q, searcher.search(q.query, k=MAX_K, mode=mode)) for q in questions]
        except NoIndex as exc:
            if not skip_missing:
                raise
            skipped[mode] = str(exc)
            continue
        results[mode] = [score_search(q, r.hits, r.took_ms, k) for q, r in found]
    return results, skipped


@dataclass(frozen=True)
class AnswerArms:
    model: str
    n_ctx: int
    checks: dict[str, list[AnswerCheck]]  # arm name -> one check per question


def answer_arms(
    runtime: Runtime, searcher: Searcher, questions: Sequence[Question], settings: Settings,
    on_arm: OnArm | None = None,
) -> AnswerArms:
    """Answer every question twice with one runtime: retrieval, then the truncated full context."""
    n_ctx = runtime.info.n_ctx
    arms: dict[str, ChatSession] = {
        "retrieval": ChatSession(runtime, SearcherRetriever(searcher), settings),
        "full_context": ChatSession(
            runtime, WholeRepository(searcher.root, list(searcher.manifest.files), n_ctx),
            dataclasses.replace(settings, snippet_tokens=n_ctx),
        ),
    }
    checks: dict[str, list[AnswerCheck]] = {}
    for name, session in arms.items():
        if on_arm is not None:
            on_arm(name, len(questions))

        def ask(query: str, session: ChatSession = session) -> tuple[str, int, float]:
            session.reset()
            turn = session.ask(query)
            return turn.answer, turn.plan.prompt_tokens, turn.total_ms

        checks[name] = check_answers(name, questions, ask)
    return AnswerArms(runtime.info.model, n_ctx, checks)

