"""What bench/answer_bench.py measures of each answer, and the per-arm summary and table it reports.

A question's answer is scored by the product's own checks (bridge.chat.answers: loops, citations
among the given sources) plus the question's `answer_contains` strings and whether a gold file was
in the prompt; `summary` turns a list of scored answers into the rates of the README's table.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridge.chat.answers import Span, check_citations, has_loop
from bridge.chat.grounding import KnownNames, ground, ungrounded_code_lines, unknown_inline_names

__all__ = ["Question", "Scored", "by_repo", "contains_all", "gold_hit", "load_questions", "score", "summary", "table"]


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    repo: str
    query: str
    gold_files: tuple[str, ...]
    answer_contains: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Scored:
    id: str
    arm: str
    answer: str  # as shown
    model_text: str
    looped: bool
    shown_loop: bool
    cites_source: bool  # the model's text, with the grammar-picked Sources line when there is one
    free_cites: bool  # the model's free text alone, before any grammar-picked line
    grammar_pick: bool  # a Sources line was picked under the grammar
    unknown_citations: int  # in the model's text
    contains: bool  # in the model's words as shown (with grounding: what it did not withhold)
    gold_in_context: bool
    usable: bool
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    seconds: float
    # What the user reads (defaults: rows of runs before these were recorded).
    contains_model: bool = False  # answer_contains in the model's text before grounding
    grounded: bool = False  # the answer went through grounding (a small model)
    withheld: bool = False  # grounding withheld code or citations from it
    shown_code_not_in_sources: int = 0  # code lines of the shown answer found in no retrieved snippet
    shown_unknown_citations: int = 0  # citations in the shown answer of sources that were not retrieved
    shown_unknown_names: int = 0  # inline code names of the shown answer backed by no snippet, path or the question
    # The same answer grounded without the inline-name rule (bridge/chat/grounding.py), as before 2026-12-07:
    contains_without_name_rule: bool = False
    unknown_names_without_name_rule: int = 0


def load_questions(path: Path) -> list[Question]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [
        Question(r["id"], r["repo"], r["query"], tuple(r["gold_files"]), tuple(r.get("answer_contains", ())))
        for r in rows
    ]


def contains_all(text: str, needles: Sequence[str]) -> bool:
    low = text.lower()
    return all(n.lower() in low for n in needles)


def gold_hit(spans: Sequence[Span], gold: Sequence[str]) -> bool:
    return any(s.path == g for s in spans for g in gold)


def score(
    q: Question, arm: str, answer: Any, spans: Sequence[Span], generation: Any, seconds: float, picked: bool,
    snippets: Sequence[str] = (), symbols: Sequence[str] = (),
) -> Scored:
    """`snippets`: the text of each retrieved source as the model read it (what shown code must come from);
    `symbols`: the definitions they lie in (names the answer may show, as the product grounds)."""
    grounding = answer.grounding
    known = KnownNames([*snippets, *(s.path for s in spans), q.query, *symbols])
    before = (
        ground(answer.model_text, spans, snippets, names=False).text if grounding is not None
        else answer.shown_model_text
    )
    return Scored(
        id=q.id,
        arm=arm,
        answer=answer.text,
        model_text=answer.model_text,
        looped=answer.looped or has_loop(answer.model_text),
        shown_loop=has_loop(answer.text),
        cites_source=answer.citations.cited_sources,
        free_cites=check_citations(generation.text, spans).cited_sources,
        grammar_pick=picked,
        unknown_citations=len(answer.citations.unknown),
        contains=contains_all(answer.shown_model_text, q.answer_contains),
        gold_in_context=gold_hit(spans, q.gold_files),
        usable=answer.usable,
        prompt_tokens=generation.prompt_tokens,
        cached_tokens=generation.cached_tokens,
        completion_tokens=generation.completion_tokens,
        seconds=round(seconds, 2),
        contains_model=contains_all(answer.model_text, q.answer_contains),
        grounded=grounding is not None,
        withheld=grounding is not None and grounding.withheld,
        shown_code_not_in_sources=ungrounded_code_lines(answer.text, snippets),
        shown_unknown_citations=len(check_citations(answer.text, spans).unknown),
        shown_unknown_names=len(unknown_inline_names(answer.text, known)),
        contains_without_name_rule=contains_all(before, q.answer_contains),
        unknown_names_without_name_rule=len(unknown_inline_names(before, known)),
    )


def summary(rows: Sequence[Scored]) -> dict[str, Any]:
    n = len(rows)

    def rate(flag: str) -> float:
        return round(sum(bool(getattr(r, flag)) for r in rows) / n, 3) if n else 0.0

    def count(flag: str) -> int:
        return sum(bool(getattr(r, flag)) for r in rows)

    return {
        "questions": n,
        "grounded_rate": rate("grounded"),
        "withheld_rate": rate("withheld"),
        "shown_code_not_in_sources": count("shown_code_not_in_sources"),
        "shown_unknown_citations": count("shown_unknown_citations"),
        "answer_contains": f"{count('contains')}/{n}",
        "answer_contains_without_name_rule": f"{count('contains_without_name_rule')}/{n}",
        "answers_showing_unknown_names": count("shown_unknown_names"),
        "answers_showing_unknown_names_without_name_rule": count("unknown_names_without_name_rule"),
        "answer_contains_model_text": f"{count('contains_model')}/{n}",
        "loop_rate": rate("looped"),
        "shown_loop_rate": rate("shown_loop"),
        "citation_rate": rate("cites_source"),
        "free_citation_rate": rate("free_cites"),
        "grammar_rate": rate("grammar_pick"),
        "unknown_citation_rate": round(sum(r.unknown_citations > 0 for r in rows) / n, 3) if n else 0.0,
        "answer_contains_rate": rate("contains"),
        "gold_in_context_rate": rate("gold_in_context"),
        "usable_rate": rate("usable"),
        "median_s": round(statistics.median(r.seconds for r in rows), 2) if n else 0.0,
        "total_s": round(sum(r.seconds for r in rows), 1),
        "median_prompt_tokens": statistics.median(r.prompt_tokens for r in rows) if n else 0,
    }


def table(summaries: dict[str, dict[str, Any]]) -> str:
    keys = [
        ("questions", "questions"),
        ("grounded_rate", "answers grounded (small model)"),
        ("withheld_rate", "answers with something withheld"),
        ("shown_code_not_in_sources", "shown answers with a code line found in no retrieved snippet"),
        ("shown_unknown_citations", "shown answers citing a source not retrieved"),
        ("answer_contains", "answer_contains (shown words)"),
        ("answer_contains_model_text", "answer_contains (model text before grounding)"),
        ("answer_contains_without_name_rule", "answer_contains (shown words, without the inline-name rule)"),
        ("answers_showing_unknown_names", "shown answers naming code (`name`) found in no snippet, path or the question"),
        ("answers_showing_unknown_names_without_name_rule", "... without the inline-name rule"),
        ("loop_rate", "loop rate (guard fired)"),
        ("shown_loop_rate", "loop rate of the shown answer"),
        ("free_citation_rate", "free text cites a given source as path:start-end"),
        ("citation_rate", "cites a given source (free text or grammar-picked Sources line)"),
        ("grammar_rate", "Sources line picked under the grammar"),
        ("unknown_citation_rate", "cites something not given"),
        ("answer_contains_rate", "answer_contains rate"),
        ("gold_in_context_rate", "gold file in the prompt"),
        ("usable_rate", "usable answer"),
        ("median_prompt_tokens", "median prompt tokens"),
        ("median_s", "median s per question"),
        ("total_s", "total s"),
    ]
    arms = list(summaries)
    lines = ["| measure | " + " | ".join(arms) + " |", "|---|" + "---:|" * len(arms)]
    for key, label in keys:
        lines.append(f"| {label} | " + " | ".join(str(summaries[a][key]) for a in arms) + " |")
    return "\n".join(lines) + "\n"


def by_repo(rows: Sequence[Scored], questions: Sequence[Question]) -> dict[str, dict[str, Any]]:
    repo_of = {q.id: q.repo for q in questions}
    out: dict[str, dict[str, Any]] = {}
    for arm in sorted({r.arm for r in rows}):
        for repo in sorted({repo_of[r.id] for r in rows}):
            picked = [r for r in rows if r.arm == arm and repo_of[r.id] == repo]
            if picked:
                out[f"{arm}/{repo}"] = summary(picked)
    return out
