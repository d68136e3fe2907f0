"""A pasted bug report condensed to the room the context leaves it: the model reads what it says
about code, while the search still reads it whole.

A report is accepted up to index.search.searcher.MAX_QUERY_BYTES (64 KB, some 16k tokens), but the bundled
model has 8k tokens of context, and the snippets and the answer reserve need theirs. A report of
several lines that does not fit is first focused (index/rank/focus.py: pasted package lists, test
progress, linter output, log lines and template comments left out, whatever its length), then, if
it still does not fit, cut after the last line that does and marked as cut. The title always stays.
A question of one line is never cut: it fails the budget check with its advice, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from index.rank import focus_report

__all__ = ["Condensed", "condense"]

CUT_MARK = "[… {n} more lines of the report left out to fit the context]"
# What each focus rule (index/rank/focus.py) drops, as the notice names it.
_LABELS = {"packages": "package list", "pytest": "test-runner output", "rules": "ruled separators",
           "diagnostics": "linter output", "logs": "log output", "checklist": "template checklist",
           "comments": "template comments"}


@dataclass(frozen=True, slots=True)
class Condensed:
    """What the model reads instead of a report too long for the context."""

    text: str
    dropped: dict[str, int]  # lines left out per focus rule (index/rank/focus.py)
    cut_lines: int  # lines cut from the end after focusing (0: focusing was enough)

    def notice(self, tokens: int, kept_tokens: int) -> str:
        left_out = [f"{_lines(n)} of {_LABELS.get(rule, rule)}" for rule, n in self.dropped.items()
                    if n and rule != "comments"]
        if self.dropped.get("comments"):
            left_out.append("its template comments")
        if self.cut_lines:
            left_out.append(f"its last {_lines(self.cut_lines)}")
        return (f"the question ({tokens:,} tokens) was condensed to {kept_tokens:,} tokens to leave room for the "
                f"retrieved code: {', '.join(left_out)} left out; the search read it whole")


def condense(question: str, fits: Callable[[str], bool]) -> Condensed | None:
    """None when `question` fits or is a single line; else the longest condensed form that fits
    (at least the title, which may itself not fit: the budget check then says so)."""
    lines = question.splitlines()
    if fits(question) or len([line for line in lines if line.strip()]) < 2:
        return None
    focused = focus_report(question, min_bytes=0)
    if fits(focused.text):
        return Condensed(focused.text, focused.dropped, 0)
    kept = focused.text.splitlines()
    # The longest prefix of lines that fits with its mark: whether a prefix fits only grows
    # shorter as it grows longer, so a binary search asks the tokenizer ~log2(lines) times.
    lo, hi = 1, len(kept) - 1  # the title always stays; all of them did not fit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(_cut(kept, mid)):
            lo = mid
        else:
            hi = mid - 1
    return Condensed(_cut(kept, lo), focused.dropped, len(kept) - lo)


def _lines(n: int) -> str:
    return "1 line" if n == 1 else f"{n} lines"


def _cut(lines: list[str], n: int) -> str:
    return "\n".join([*lines[:n], "", CUT_MARK.format(n=len(lines) - n)])
