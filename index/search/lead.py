"""A report's answer under a token budget: most of it for the lead file, a few lines of each other hit.

On shared/bench the lines a fix edits were shown only from a report's first hit or its second, never
from hits 3–5, and of the reports whose first hit is in a gold file but shows no edited line, most
had one in another chunk of that file (bench/edit_sites.py). So a report's first hit gets the budget
less OTHER_TOKENS for each other hit, and fills it with more chunks of its file in the order the chunk
stage ranked them (`index/search/chooser.py`), each shown without its docstrings (`code_parts`); each
other hit is then cut to an even share of what is left, around its focus line, so every file found is
still named with some of its lines. One-line questions are packed as before (index/search/hits.py
`pack_for`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from index.search.hits import cut_hit, merge_hits
from index.tokenize import estimate_tokens
from index.types import Chunk, Hit

__all__ = ["LEAD_CHUNKS", "OTHER_TOKENS", "code_parts", "docstring_lines", "lead_candidates", "pack_lead"]

# Tokens kept for each hit after the first: at most this, and at most 1/20 of the budget (15 at 300
# tokens). Measured on shared/bench, 600 tokens: 20 loses some files' only line, 40 and more starve the lead.
OTHER_TOKENS = 30
OTHER_SHARE = 20
# The lead file's best chunks read for it. 8 whole chunks fill 2,000 tokens; without their docstrings
# more fit: on shared/bench (chosen there, with docstrings then found chunk by chunk) 12 showed the edit
# site at 2,000 tokens in 0.557 of reports held out, 8 in 0.514 and 16 in 0.550 (whole chunks: 0.500
# with 12, 0.493 with 8).
LEAD_CHUNKS = 12
_HEADER = re.compile(r"\s*(?:async\s+def|def|class)\s")
_DOC_OPEN = re.compile(r"\s*[rRuU]?(\"\"\"|\'\'\')")


def _docstrings(lines: Sequence[str]) -> list[tuple[int, int]]:
    """A Python file's docstrings as (first, end) indexes of its `lines`: a triple-quoted string opening
    on the line after a `def`/`class` header's closing `:`, or as the module's first statement."""
    found: list[tuple[int, int]] = []
    header_end = prev = None  # the last header's `:` line; the last non-blank line
    in_header = False
    i = 0
    while i < len(lines):
        line = lines[i]
        opened = _DOC_OPEN.match(line)
        if opened and (prev is None or prev == header_end):
            quote = opened.group(1)
            end = i + 1 if quote in line[opened.end():] else next(
                (j + 1 for j in range(i + 1, len(lines)) if quote in lines[j]), len(lines))
            found.append((i, end))
            prev, i = end - 1, end
            continue
        if _HEADER.match(line):
            in_header, header_end = True, None
        if line.strip():
            if in_header and line.rstrip().endswith(":"):
                in_header, header_end = False, i
            prev = i
        i += 1
    return found


def docstring_lines(chunks: Sequence[Chunk]) -> frozenset[int]:
    """The line numbers of a Python file's docstrings, read from all its chunks (in file order): a long
    docstring is split over chunks, and a chunk that begins inside one cannot tell from its own text."""
    if not chunks or chunks[0].language != "python":
        return frozenset()
    text: dict[int, str] = {}
    for chunk in chunks:
        text.update(enumerate(chunk.text.split("\n"), chunk.start_line))
    lines = [text.get(n, "") for n in range(1, max(text) + 1)]
    return frozenset(n for first, end in _docstrings(lines) for n in range(first + 1, end + 1))


def code_parts(hit: Hit, docs: frozenset[int], count: Callable[[str], int] = estimate_tokens) -> list[Hit]:
    """A hit without its file's docstring lines (`docs`, from `docstring_lines`): the exact line ranges
    around them, blank-only ones left out (the hit itself when it holds none). At a small budget code is
    what a report's fix edits: of the tokens of shared/bench's gold files' chunks 26 % are docstrings,
    holding 5 % of the edited lines."""
    if not any(hit.start_line <= n <= hit.end_line for n in docs):
        return [hit]
    parts, piece = [], []
    for n, line in [*enumerate(hit.text.split("\n"), hit.start_line), (hit.end_line + 1, None)]:
        if line is not None and n not in docs:
            piece.append((n, line))
            continue
        if any(own.strip() for _, own in piece):
            text = "\n".join(own for _, own in piece)
            parts.append(replace(hit, start_line=piece[0][0], end_line=piece[-1][0], text=text, tokens=count(text)))
        piece = []
    return parts


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
              docs: frozenset[int] = frozenset(), count: Callable[[str], int] = estimate_tokens) -> tuple[list[Hit], bool]:
    """The first hit (without its docstrings when it does not fit whole, cut when even that does not),
    then as many of `more` (the lead file's other chunks, best first, each without its docstrings:
    `code_parts` with the lead file's `docs`) as fit in the budget less the others' share
    (OTHER_TOKENS each); then each other hit whole or cut around its `focus` line to an even share of
    what is left. Truncated when a hit was cut or left out, or the first hit shown without its
    docstrings."""
    if not hits:
        return hits, False
    first, others = hits[0], hits[1:]
    each = min(OTHER_TOKENS, max_tokens // OTHER_SHARE)
    budget = max_tokens - each * len(others)
    truncated = first.tokens > budget
    head = code_parts(first, docs, count) if truncated else [first]  # too big: its code alone may fit
    if sum(part.tokens for part in head) <= budget:
        lead, used = list(head), sum(part.tokens for part in head)
        for hit in more:
            parts = code_parts(hit, docs, count)
            cost = sum(part.tokens for part in parts)
            if used + cost <= budget:  # one that does not fit is passed over: a later one may
                lead.extend(parts)
                used += cost
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
