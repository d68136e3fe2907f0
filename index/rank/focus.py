"""The focus step: a long bug report searched by what it says about code, not by its pasted output.

A whole report pasted as a query (up to index.search.searcher.MAX_QUERY_BYTES) is mostly material that
matches every file a little and the right one no better: `pip list` tables of a hundred
packages, pytest's progress and summary lines, a linter's diagnostics on the reporter's own
files, timestamped log lines, and the issue template's comments and checklists. Their words
outvote the few that matter (the title, the code, the traceback, the names), because BM25 adds a
term's weight once per occurrence in the query and the dense vector averages over all of it.

`focus` drops those lines from a report longer than FOCUS_BYTES and keeps everything else in
order (title first, so index/question.title_of still finds it); a shorter question is returned
unchanged, so ordinary questions are searched exactly as typed. Each rule matches a line by its
shape alone, never by a word list of one project, and a rule that would leave nothing but the
title is not applied (the report is then searched whole).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["FOCUS_BYTES", "Focused", "focus", "focus_report"]

FOCUS_BYTES = 4000  # reports longer than this are focused; issue 11 measured them weakest

_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)  # issue-template instructions
_RULES: Sequence[tuple[str, re.Pattern[str]]] = (
    # `pip list` / `conda list` rows: a name, two or more spaces (or one, alone on the line), a
    # version; `pip freeze` pins
    ("packages", re.compile(r"^\s*[A-Za-z0-9][\w.\-]*(?:\s{2,}|\s*==\s*|\s+@\s+)v?\d[\w.+!\-]*(?:\s+\S.*)?\s*$")),
    ("packages", re.compile(r"^\s*(?!(?:return|yield|print|assert)\b)[A-Za-z][\w.\-]+\s+v?\d+\.[\w.+!\-]*\s*$")),
    ("packages", re.compile(r"^\s*(?:Package|Name)\s{2,}Version\b.*$|^\s*#\s*Name\s+Version\b.*$")),
    # pytest: progress lines, per-test outcomes, session header facts
    ("pytest", re.compile(r"^\S+\.py\s+[.sSxXfFEP]+\s*(?:\[\s*\d+%\])?\s*$")),
    ("pytest", re.compile(r"^\S+::\S+\s+(?:PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)\b.*$")),
    ("pytest", re.compile(r"^(?:platform \w+ -- Python\b|rootdir:|plugins:|cachedir:|collected \d+ items?\b|collecting\b)")),
    # ruled lines: pytest's ==== banners, table separators
    ("rules", re.compile(r"^\s*[=_\-*]{5,}(?:\s.*?\s[=_\-*]{5,})?\s*$")),
    # diagnostics on the reporter's own files: `path:line:col: CODE message` (pylint, flake8, mypy codes)
    ("diagnostics", re.compile(r"^\s*\S+:\d+:(?:\d+:)?\s*[A-Z]{1,3}\d{3,4}\b.*$")),
    # timestamped log lines
    ("logs", re.compile(r"^\s*\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}.*$")),
    # the template's checklist
    ("checklist", re.compile(r"^\s*[-*]\s+\[[ xX]\]\s.*$")),
)


@dataclass(frozen=True)
class Focused:
    """A report after the focus step: its text and how many lines each rule dropped."""

    text: str
    dropped: dict[str, int]


def focus_report(query: str, min_bytes: int = FOCUS_BYTES) -> Focused:
    """`query` without its pasted output when it is longer than `min_bytes`; unchanged otherwise."""
    if len(query.encode("utf-8", "surrogatepass")) <= min_bytes:
        return Focused(query, {})
    text = _COMMENT.sub("", query)
    lines = text.splitlines()
    dropped: dict[str, int] = {}
    kept: list[str] = []
    title = next((n for n, line in enumerate(lines) if line.strip()), 0)
    for number, line in enumerate(lines):
        rule = _matching_rule(line) if number != title else None  # the title always stays
        if rule is None:
            kept.append(line)
        else:
            dropped[rule] = dropped.get(rule, 0) + 1
    if sum(bool(line.strip()) for line in kept) <= 1:  # nothing left but the title
        return Focused(query, {})
    if len(text) < len(query):
        dropped["comments"] = query.count("<!--")
    return Focused("\n".join(kept), dropped)


def focus(query: str, min_bytes: int = FOCUS_BYTES) -> str:
    """The text a long report is searched by (see focus_report)."""
    return focus_report(query, min_bytes).text


def _matching_rule(line: str) -> str | None:
    for name, pattern in _RULES:
        if pattern.match(line):
            return name
    return None
