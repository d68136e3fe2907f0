"""A report's answer under a token budget: most of it for the lead file, a few lines of each other hit.

On shared/bench the lines a fix edits were shown only from a report's first hit or its second, never
from hits 3–5, and of the reports whose first hit is in a gold file but shows no edited line, most
had one in another chunk of that file (bench/edit_sites.py). So a report's first hit gets the budget
less OTHER_TOKENS for each other hit, and fills it with more chunks of its file in the order the chunk
stage ranked them (`StageChooser.ranked`); each other hit is then cut to an even share of what is left,
around its focus line, so every file found is still named with some of its lines. One-line questions
are packed as before (index/search/hits.py `pack_for`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from index.search.hits import cut_hit, merge_hits
from index.tokenize import estimate_tokens
from index.types import Hit

__all__ = ["LEAD_CHUNKS", "OTHER_TOKENS", "lead_candidates", "pack_lead"]

# Tokens kept for each hit after the first: at most this, and at most 1/20 of the budget (15 at 300
# tokens). Measured on shared/bench, 600 tokens: 20 loses some files' only line, 40 and more starve the lead.
OTHER_TOKENS = 30
OTHER_SHARE = 20
LEAD_CHUNKS = 8  # the lead file's best chunks read for it: 8 full chunks fill 2,000 tokens


def lead_candidates(ranked: Sequence[int], hits: Sequence[Hit], read: Callable[[list[int]], Mapping[int, Hit]]) -> list[Hit]:
    """The lead file's chunks by the chunk stage's rank (`ranked`), as hits, less those a hit shows.
    `read` gives hits by chunk id."""
    if not hits:
        return []
    wanted = list(ranked[:LEAD_CHUNKS])
    rows = read(wanted)
    lead = hits[0].path
    shown = [(h.start_line, h.end_line) for h in hits if h.path == lead]
    out = []
    for cid in wanted:
        hit = rows.get(cid)
        if hit is not None and not any(hit.start_line <= end and start <= hit.end_line for start, end in shown):
            out.append(hit)
    return out


def pack_lead(hits: list[Hit], more: Sequence[Hit], max_tokens: int, focus: Mapping[str, int],
              count: Callable[[str], int] = estimate_tokens) -> tuple[list[Hit], bool]:
    """The first hit, then as many of `more` (the lead file's other chunks, best first) as fit in the
    budget less the others' share (OTHER_TOKENS each); then each other hit whole or cut around its
    `focus` line to an even share of what is left. Truncated when a hit was cut or left out."""
    if not hits:
        return hits, False
    first, others = hits[0], hits[1:]
    each = min(OTHER_TOKENS, max_tokens // OTHER_SHARE)
    budget = max_tokens - each * len(others)
    truncated = False
    if first.tokens <= budget:
        lead, used = [first], first.tokens
        for hit in more:
            if used + hit.tokens <= budget:  # one that does not fit is passed over: a later one may
                lead.append(hit)
                used += hit.tokens
        lead = merge_hits(lead)
        used = sum(hit.tokens for hit in lead)
    else:
        cut = cut_hit(first, budget, count, focus.get(first.path))
        lead, used, truncated = ([cut] if cut else []), (cut.tokens if cut else 0), True
    packed = list(lead)
    left = max_tokens - used
    for i, hit in enumerate(others):
        share = left // (len(others) - i)
        if hit.tokens > share:
            truncated = True
            cut = cut_hit(hit, share, count, focus.get(hit.path))
            if cut is None:
                continue
            hit = cut
        packed.append(hit)
        left -= hit.tokens
    return packed, truncated
