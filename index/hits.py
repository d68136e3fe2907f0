"""What a search does with its ranked chunks: merge neighbours of one file, pack under a token budget."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from index.tokenize import estimate_tokens
from index.types import Hit

__all__ = ["fit_prefix", "merge_hits", "pack_hits"]


def merge_hits(hits: list[Hit]) -> list[Hit]:
    """Fold each hit into an earlier (better) hit of the same file that it overlaps or touches."""
    merged: list[Hit] = []
    for hit in hits:
        for j, kept in enumerate(merged):
            if kept.path == hit.path and hit.start_line <= kept.end_line + 1 and kept.start_line <= hit.end_line + 1:
                merged[j] = _union(kept, hit)
                break
        else:
            merged.append(hit)
    return merged


def _union(a: Hit, b: Hit) -> Hit:
    lines = dict(enumerate(a.text.split("\n"), a.start_line))
    lines.update(enumerate(b.text.split("\n"), b.start_line))
    start, end = min(a.start_line, b.start_line), max(a.end_line, b.end_line)
    text = "\n".join(lines[i] for i in range(start, end + 1))
    return replace(
        a,
        start_line=start,
        end_line=end,
        text=text,
        tokens=estimate_tokens(text),
        lexical_rank=_best(a.lexical_rank, b.lexical_rank),
        vector_rank=_best(a.vector_rank, b.vector_rank),
        symbol=a.symbol if a.symbol == b.symbol else a.symbol or b.symbol,
    )


def _best(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def pack_hits(hits: list[Hit], max_tokens: int | None, count: Callable[[str], int] = estimate_tokens) -> tuple[list[Hit], bool]:
    """Whole hits in rank order while they fit; the first that does not is cut at a line boundary."""
    if max_tokens is None:
        return hits, False
    packed: list[Hit] = []
    used = 0
    for hit in hits:
        if used + hit.tokens <= max_tokens:
            packed.append(hit)
            used += hit.tokens
            continue
        cut = _cut(hit, max_tokens - used, count)
        if cut is not None:
            packed.append(cut)
        return packed, True
    return packed, False


def fit_prefix(items: Sequence[str], budget: int, count: Callable[[str], int], sep: str = "\n") -> int:
    """The largest n such that the first n items, joined by `sep`, count at most `budget` tokens."""
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(sep.join(items[:mid])) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _cut(hit: Hit, budget: int, count: Callable[[str], int]) -> Hit | None:
    lines = hit.text.split("\n")
    # Whole lines only, and never all of them (the whole hit did not fit): text stays lines start..end.
    lo = min(fit_prefix(lines, budget, count), len(lines) - 1)
    if lo == 0:
        return None
    text = "\n".join(lines[:lo])
    return replace(hit, end_line=hit.start_line + lo - 1, text=text, tokens=count(text))
