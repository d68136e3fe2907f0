"""Retrieval quality: load a questions file and score ranked files and spans against its gold.

Everything here is a pure function of its arguments (apart from reading the questions file), so
`bridge eval` and the benchmark scripts share one definition of every metric.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bridge.errors import QuestionsError

__all__ = [
    "AnswerCheck",
    "AnswerSummary",
    "Located",
    "ModeMetrics",
    "Question",
    "QuestionResult",
    "QuestionsError",
    "Span",
    "aggregate",
    "answer_contains",
    "check_answers",
    "load_questions",
    "ndcg_at",
    "ranked_files",
    "recall_at",
    "reciprocal_rank",
    "score_search",
    "span_recall",
    "summarize_answers",
]


@dataclass(frozen=True)
class Span:
    """Lines start_line..end_line (1-based, inclusive) of the file at `path`."""

    path: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class Question:
    id: str
    query: str
    gold_files: tuple[str, ...]
    gold_spans: tuple[Span, ...] = ()
    answer_contains: tuple[str, ...] = ()
    repo: str | None = None
    base_commit: str | None = None


@dataclass(frozen=True)
class QuestionResult:
    """What one retrieval mode returned for one question.

    It carries the whole question (not only its id) so that `aggregate` can score it alone.
    """

    question: Question
    ranked_files: tuple[str, ...]
    spans: tuple[Span, ...]
    latency_ms: float

    @property
    def question_id(self) -> str:
        return self.question.id


@dataclass(frozen=True)
class ModeMetrics:
    mode: str
    n: int
    recall_at_1: float
    recall_at_5: float
    recall_at_10: float
    mrr: float
    ndcg_at_10: float
    span_recall: float | None  # None when no question of the set has gold spans
    median_latency_ms: float


# ---------------------------------------------------------------------------------------------
# Loading


def load_questions(path: Path) -> list[Question]:
    """Read a JSON Lines questions file; blank lines are skipped and unknown keys ignored."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise QuestionsError(
            f"cannot read questions file {path}: {exc.__class__.__name__}; "
            "pass a UTF-8 JSON Lines file"
        ) from exc
    questions: list[Question] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            question = _parse_question(line)
        except ValueError as exc:
            raise QuestionsError(f"{path}:{number}: {exc}; fix that line") from None
        if question.id in seen:
            raise QuestionsError(f"{path}:{number}: duplicate id {question.id!r}; make ids unique")
        seen.add(question.id)
        questions.append(question)
    if not questions:
        raise QuestionsError(f"questions file {path} has no questions; add one JSON object a line")
    return questions


def _parse_question(line: str) -> Question:
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(raw, dict):
        raise ValueError("expected a JSON object")
    gold_files = _str_list(raw, "gold_files", required=True)
    if not gold_files:
        raise ValueError("'gold_files' is empty; name at least one file")
    return Question(
        id=_str_field(raw, "id", required=True) or "",
        query=_str_field(raw, "query", required=True) or "",
        gold_files=gold_files,
        gold_spans=_parse_spans(raw.get("gold_spans", [])),
        answer_contains=_str_list(raw, "answer_contains", required=False),
        repo=_str_field(raw, "repo", required=False),
        base_commit=_str_field(raw, "base_commit", required=False),
    )


def _str_field(raw: dict[str, Any], key: str, *, required: bool) -> str | None:
    value = raw.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise ValueError(f"'{key}' must be a non-empty string")
    return value


def _list_field(raw: dict[str, Any], key: str) -> list[Any]:
    value = raw.get(key, [])
    if not isinstance(value, list):
        raise ValueError(f"'{key}' must be a list")
    return value


def _str_list(raw: dict[str, Any], key: str, *, required: bool) -> tuple[str, ...]:
    if required and key not in raw:
        raise ValueError(f"'{key}' is missing")
    items = _list_field(raw, key)
    if not all(isinstance(item, str) and item for item in items):
        raise ValueError(f"'{key}' must be a list of non-empty strings")
    return tuple(items)


def _parse_spans(value: Any) -> tuple[Span, ...]:
    """Line spans, a list of {path, start_line, end_line}. shared/bench writes the definitions a fix
    touches as names per file instead ({path: ["Class.method", ...]}): no lines to score, so none."""
    if isinstance(value, dict):
        if not all(isinstance(k, str) and isinstance(v, list) for k, v in value.items()):
            raise ValueError("'gold_spans' as an object maps each path to a list of definition names")
        return ()
    if not isinstance(value, list):
        raise ValueError("'gold_spans' must be a list")
    return tuple(_parse_span(item) for item in value)


def _parse_span(item: Any) -> Span:
    if not isinstance(item, dict):
        raise ValueError("each of 'gold_spans' must be an object with path, start_line, end_line")
    path, start, end = item.get("path"), item.get("start_line"), item.get("end_line")
    if not isinstance(path, str) or not path:
        raise ValueError("a gold span needs a non-empty 'path'")
    if not isinstance(start, int) or not isinstance(end, int) or not _is_int(start) or not _is_int(end):
        raise ValueError(f"gold span of {path} needs integers 1 <= start_line <= end_line")
    if not 1 <= start <= end:
        raise ValueError(f"gold span of {path} needs integers 1 <= start_line <= end_line")
    return Span(path=path, start_line=start, end_line=end)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------------
# Metrics


def ranked_files(hit_paths: Sequence[str]) -> list[str]:
    """Files in the order of their first hit; later hits of a file add nothing to its rank."""
    return list(dict.fromkeys(hit_paths))


def recall_at(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """Fraction of the gold files found among the first k ranked files."""
    _check_gold(gold)
    _check_k(k)
    top = set(ranked[:k])
    return sum(1 for path in set(gold) if path in top) / len(set(gold))


def reciprocal_rank(ranked: Sequence[str], gold: Collection[str]) -> float:
    """1 / rank of the first gold file (rank 1 is the top); 0 when no gold file is ranked."""
    _check_gold(gold)
    for index, path in enumerate(ranked):
        if path in gold:
            return 1.0 / (index + 1)
    return 0.0


def ndcg_at(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """Normalised discounted cumulative gain at k with binary relevance (log2 discount)."""
    _check_gold(gold)
    _check_k(k)
    ideal = sum(_discount(index) for index in range(min(k, len(set(gold)))))
    return _dcg(ranked[:k], gold) / ideal


def span_recall(hit_spans: Sequence[Span], gold_spans: Sequence[Span]) -> float:
    """Fraction of the gold lines (union of the gold spans) that some hit span covers."""
    if not gold_spans:
        raise ValueError("span_recall needs at least one gold span")
    gold = _merged_by_path(gold_spans)
    hits = _merged_by_path(hit_spans)
    total = sum(_length(spans) for spans in gold.values())
    covered = sum(_overlap(spans, hits.get(path, [])) for path, spans in gold.items())
    return covered / total


def aggregate(mode: str, per_question: Sequence[QuestionResult]) -> ModeMetrics:
    """Mean of each per-question metric; span recall over the questions that have gold spans."""
    if not per_question:
        raise ValueError(f"no question results to aggregate for mode {mode!r}")

    mean = statistics.fmean
    results = list(per_question)
    with_spans = [r for r in results if r.question.gold_spans]
    return ModeMetrics(
        mode=mode,
        n=len(results),
        recall_at_1=mean(recall_at(r.ranked_files, r.question.gold_files, 1) for r in results),
        recall_at_5=mean(recall_at(r.ranked_files, r.question.gold_files, 5) for r in results),
        recall_at_10=mean(recall_at(r.ranked_files, r.question.gold_files, 10) for r in results),
        mrr=mean(reciprocal_rank(r.ranked_files, r.question.gold_files) for r in results),
        ndcg_at_10=mean(ndcg_at(r.ranked_files, r.question.gold_files, 10) for r in results),
        span_recall=(
            mean(span_recall(r.spans, r.question.gold_spans) for r in with_spans)
            if with_spans
            else None
        ),
        median_latency_ms=statistics.median(r.latency_ms for r in results),
    )


def _check_gold(gold: Collection[str]) -> None:
    if not gold:
        raise ValueError("a metric needs at least one gold file")


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")


def _discount(index: int) -> float:
    return 1.0 / math.log2(index + 2)


def _dcg(ranked: Sequence[str], gold: Collection[str]) -> float:
    # A repeated file earns nothing the second time, so the score never exceeds the ideal.
    gain, seen = 0.0, set()
    for index, path in enumerate(ranked):
        if path in gold and path not in seen:
            gain += _discount(index)
            seen.add(path)
    return gain


def _merged_by_path(spans: Iterable[Span]) -> dict[str, list[tuple[int, int]]]:
    """Per path, disjoint sorted inclusive line intervals; touching intervals are joined."""
    by_path: dict[str, list[tuple[int, int]]] = {}
    for span in sorted(spans, key=lambda s: (s.path, s.start_line, s.end_line)):
        if span.end_line < span.start_line:
            continue
        merged = by_path.setdefault(span.path, [])
        if merged and span.start_line <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], span.end_line))
        else:
            merged.append((span.start_line, span.end_line))
    return by_path


def _length(intervals: Sequence[tuple[int, int]]) -> int:
    return sum(end - start + 1 for start, end in intervals)


def _overlap(gold: Sequence[tuple[int, int]], hits: Sequence[tuple[int, int]]) -> int:
    # Both lists are disjoint and sorted, so every pair overlaps at most once.
    return sum(
        max(0, min(g_end, h_end) - max(g_start, h_start) + 1)
        for g_start, g_end in gold
        for h_start, h_end in hits
    )


# ---------------------------------------------------------------------------------------------
# Running a retriever and checking answers


class Located(Protocol):
    """Anything with a file path and a line range, such as an index hit."""

    @property
    def path(self) -> str: ...

    @property
    def start_line(self) -> int: ...

    @property
    def end_line(self) -> int: ...


def score_search(
    question: Question, hits: Sequence[Located], latency_ms: float, span_cutoff: int
) -> QuestionResult:
    """Files in order of first hit; spans are the first `span_cutoff` hits (what a turn would read)."""
    return QuestionResult(
        question=question,
        ranked_files=tuple(ranked_files([h.path for h in hits])),
        spans=tuple(Span(h.path, h.start_line, h.end_line) for h in hits[:span_cutoff]),
        latency_ms=latency_ms,
    )


def answer_contains(answer: str, expected: Sequence[str]) -> tuple[bool, ...]:
    """For each expected string, whether the answer contains it (case-insensitive)."""
    folded = answer.casefold()
    return tuple(item.casefold() in folded for item in expected)


@dataclass(frozen=True)
class AnswerCheck:
    question_id: str
    mode: str
    answer: str
    contained: tuple[bool, ...]  # one per answer_contains string
    prompt_tokens: int
    total_ms: float


@dataclass(frozen=True)
class AnswerSummary:
    mode: str
    n: int
    contains_rate: float  # share of all expected strings found in their answers
    all_contained_rate: float  # share of questions whose answer has every expected string
    mean_prompt_tokens: float
    median_total_ms: float


def summarize_answers(mode: str, checks: Sequence[AnswerCheck]) -> AnswerSummary:
    if not checks:
        raise ValueError(f"no answers to summarize for mode {mode!r}")
    found = [flag for check in checks for flag in check.contained]
    return AnswerSummary(
        mode=mode,
        n=len(checks),
        contains_rate=sum(found) / len(found) if found else 0.0,
        all_contained_rate=statistics.fmean(all(c.contained) for c in checks),
        mean_prompt_tokens=statistics.fmean(c.prompt_tokens for c in checks),
        median_total_ms=statistics.median(c.total_ms for c in checks),
    )


Ask = Callable[[str], tuple[str, int, float]]  # question -> (answer, prompt tokens, total ms)


def check_answers(mode: str, questions: Sequence[Question], ask: Ask) -> list[AnswerCheck]:
    """Ask every question that has answer_contains strings, and check each answer."""
    checks = []
    for question in questions:
        if not question.answer_contains:
            continue
        answer, tokens, total_ms = ask(question.query)
        checks.append(AnswerCheck(question.id, mode, answer, answer_contains(answer, question.answer_contains),
                                  tokens, total_ms))
    return checks
