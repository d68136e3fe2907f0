"""Pure prompt planner: token counts per section that never exceed n_ctx minus the answer reserve.

Order is system -> history -> this turn's snippets -> question, so the stable part of the prompt
comes first and llama.cpp can reuse its KV cache for it. Snippets get what is left after the
system prompt, the question and the answer reserve (capped at the snippet budget); history gets
the rest and is trimmed oldest first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.errors import BudgetError
from bridge.llm.runtime import Message, TemplateOverhead
from index.search import DEFAULT_MAX_TOKENS

__all__ = [
    "DEFAULT_ANSWER_RESERVE",
    "DEFAULT_SNIPPET_BUDGET",
    "Plan",
    "Sections",
    "Snippet",
    "check_fixed",
    "kv_limit",
    "plan_prompt",
]

DEFAULT_SNIPPET_BUDGET = DEFAULT_MAX_TOKENS
DEFAULT_ANSWER_RESERVE = 512


@dataclass(frozen=True, slots=True)
class Snippet:
    """One retrieved span; `text` is the block exactly as it goes into the prompt."""

    path: str
    start_line: int
    end_line: int
    text: str
    score: float = 0.0
    code: str = ""  # the lines themselves, as indexed (`text` wraps them in the snippet template)
    symbol: str | None = None  # the definition the lines lie in (`Class.method`), when the index knows it

    @property
    def citation(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


@dataclass(frozen=True, slots=True)
class Sections:
    system: int
    history: int
    snippets: int
    question: int


@dataclass(frozen=True, slots=True)
class Plan:
    n_ctx: int
    limit: int  # n_ctx, or fewer tokens when the KV budget holds fewer
    answer_reserve: int
    sections: Sections
    template_tokens: int
    prompt_tokens: int
    kv_bytes_per_token: int
    kv_bytes: int  # KV cache for the prompt plus the full answer reserve
    kv_budget_bytes: int | None
    system: str
    history: tuple[Message, ...]  # kept turns, oldest first
    dropped_turns: tuple[int, ...]  # indices into the given history
    snippets: tuple[Snippet, ...]  # included, in rank order
    included: tuple[int, ...]  # indices into the given snippets
    cut: tuple[int, ...]
    question: str
    notice: str | None  # visible to the user when history or snippets were left out

    def budget_dict(self) -> dict[str, Any]:
        """The `budget` object of `bridge ask --json`."""
        s = self.sections
        return {
            "n_ctx": self.n_ctx,
            "prompt_tokens": self.prompt_tokens,
            "answer_reserve": self.answer_reserve,
            "sections": {"system": s.system, "history": s.history, "snippets": s.snippets, "question": s.question},
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes": self.kv_bytes,
            "kv_budget_bytes": self.kv_budget_bytes,
        }


def kv_limit(n_ctx: int, kv_bytes_per_token: int, kv_budget_bytes: int | None) -> int:
    if kv_budget_bytes is None or kv_bytes_per_token < 1:
        return n_ctx
    return min(n_ctx, kv_budget_bytes // kv_bytes_per_token)


def _pack_snippets(
    snippets: Sequence[Snippet], room: int, count: Callable[[str], int], per_join: int
) -> tuple[list[int], list[int], int]:
    """Greedy in rank order; a snippet that does not fit is skipped, smaller later ones may still fit."""
    included: list[int] = []
    cut: list[int] = []
    used = 0
    for i, snippet in enumerate(snippets):
        cost = count(snippet.text) + per_join
        if used + cost <= room:
            included.append(i)
            used += cost
        else:
            cut.append(i)
    return included, cut, used


def _keep_history(
    history: Sequence[Message], room: int, count: Callable[[str], int], per_message: int
) -> list[int]:
    """Newest turns first until one does not fit, so the dropped turns are always the oldest."""
    kept: list[int] = []
    for i in reversed(range(len(history))):
        cost = count(history[i].content) + per_message
        if cost > room:
            break
        kept.append(i)
        room -= cost
    kept.reverse()
    # Chat templates expect the conversation to resume with a user turn.
    while kept and history[kept[0]].role != "user":
        kept.pop(0)
    return kept


def _notice(dropped: int, cut: int, total: int, limit: int, snippet_room: int) -> str | None:
    parts = []
    if dropped:
        parts.append(f"dropped the {dropped} oldest message(s) of history to fit the {limit}-token context")
    if cut:
        parts.append(f"left out {cut} of {total} snippet(s) that did not fit the {snippet_room} snippet tokens")
    return "; ".join(parts) or None


def check_fixed(
    *,
    n_ctx: int,
    limit: int,
    answer_reserve: int,
    system: str,
    question: str,
    count: Callable[[str], int],
    overhead: TemplateOverhead,
) -> tuple[int, int, int]:
    """(system, question, all fixed tokens); BudgetError when they and the reserve exceed `limit`.

    The chat loop calls this before it searches, so a question too long for the context fails
    before any retrieval; `plan_prompt` calls it again with the same inputs.
    """
    system_tokens = count(system)
    question_tokens = count(question)
    fixed = system_tokens + question_tokens + 2 * overhead.per_message + overhead.fixed
    if fixed + answer_reserve > limit:
        where = f"n_ctx {n_ctx}" if limit == n_ctx else f"the KV budget ({limit} tokens of n_ctx {n_ctx})"
        raise BudgetError(
            f"system prompt ({system_tokens}) + question ({question_tokens}) + chat template "
            f"({fixed - system_tokens - question_tokens}) + answer reserve ({answer_reserve}) = "
            f"{fixed + answer_reserve} tokens do not fit {where}: shorten the question, lower the "
            f"answer reserve or raise --n-ctx/--kv-budget"
        )
    return system_tokens, question_tokens, fixed


def plan_prompt(
    *,
    n_ctx: int,
    answer_reserve: int,
    kv_bytes_per_token: int,
    system: str,
    question: str,
    count: Callable[[str], int],
    history: Sequence[Message] = (),
    snippets: Sequence[Snippet] = (),
    snippet_budget: int = DEFAULT_SNIPPET_BUDGET,
    kv_budget_bytes: int | None = None,
    overhead: TemplateOverhead = TemplateOverhead(),
) -> Plan:
    """Decide what goes into the prompt; raise BudgetError when even the fixed parts cannot fit.

    `question` is the user message text that follows the snippets (already wrapped by its
    template); `count` must count tokens as the runtime will (see bridge.llm.tokens).
    """
    # kv_bytes_per_token 0 means unknown (a remote model without facts); a KV budget then cannot apply.
    unknown_kv = kv_bytes_per_token == 0 and kv_budget_bytes is None
    if n_ctx < 1 or answer_reserve < 0 or snippet_budget < 0 or (kv_bytes_per_token < 1 and not unknown_kv):
        raise BudgetError(
            f"bad budget inputs (n_ctx {n_ctx}, answer reserve {answer_reserve}, snippet budget "
            f"{snippet_budget}, KV bytes/token {kv_bytes_per_token}): pass positive sizes"
        )
    limit = kv_limit(n_ctx, kv_bytes_per_token, kv_budget_bytes)
    system_tokens, question_tokens, fixed = check_fixed(
        n_ctx=n_ctx, limit=limit, answer_reserve=answer_reserve, system=system, question=question, count=count,
        overhead=overhead,
    )
    room = limit - answer_reserve - fixed
    snippet_room = min(room, snippet_budget)
    included, cut, snippet_cost = _pack_snippets(snippets, snippet_room, count, overhead.per_join)
    kept = _keep_history(history, room - snippet_cost, count, overhead.per_message)

    history_tokens = sum(count(history[i].content) for i in kept)
    snippet_tokens = sum(count(snippets[i].text) for i in included)
    template = overhead.fixed + overhead.per_message * (2 + len(kept)) + overhead.per_join * len(included)
    prompt_tokens = system_tokens + history_tokens + snippet_tokens + question_tokens + template
    kept_set = set(kept)
    dropped = tuple(i for i in range(len(history)) if i not in kept_set)
    return Plan(
        n_ctx=n_ctx,
        limit=limit,
        answer_reserve=answer_reserve,
        sections=Sections(system_tokens, history_tokens, snippet_tokens, question_tokens),
        template_tokens=template,
        prompt_tokens=prompt_tokens,
        kv_bytes_per_token=kv_bytes_per_token,
        kv_bytes=(prompt_tokens + answer_reserve) * kv_bytes_per_token,
        kv_budget_bytes=kv_budget_bytes,
        system=system,
        history=tuple(history[i] for i in kept),
        dropped_turns=dropped,
        snippets=tuple(snippets[i] for i in included),
        included=tuple(included),
        cut=tuple(cut),
        question=question,
        notice=_notice(len(dropped), len(cut), len(snippets), limit, snippet_room),
    )
