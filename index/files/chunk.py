"""Split source files into token-bounded chunks that follow definitions (the syntax tree: index/files/syntax.py).

Lines: a file's lines are `file.text.splitlines()` ("\r\n", a lone "\r" and the other
separators `str.splitlines` knows all end a line) and a chunk's `text` joins its lines with
"\n", so `"\n".join(file.text.splitlines()[start - 1:end]) == chunk.text` always holds and a
CRLF file chunks exactly like its LF twin. Tree-sitter parses that "\n"-joined text, so its rows
are the same lines. Blank lines at either end of a chunk are dropped; blank files give no chunks.

Code (Python, JavaScript, TypeScript/TSX, Go, Rust, Java, C, C++; grammars come from the
per-language `tree-sitter-*` wheels, which work offline, and parsers are cached per language and
thread). The nodes at each level cut the text into segments; a comment or attribute directly
above a node stays with it, and blank lines stay with the segment above. Then:

- a definition over `target_tokens / 2` is a chunk of its own and never shares one with a
  neighbour; other segments (imports, statements, small definitions) are packed in order into
  chunks of at most `target_tokens`;
- a definition of at most `max_tokens` stays whole, except a container (class, struct, impl,
  trait, interface, enum, namespace, module) over `target_tokens`, which is split the same way
  at its members; anything over `max_tokens` is split at its inner nodes (statements, fields)
  and, where it has none, into line windows. A definition's header lines go with its first
  slice and its closing lines with its last; adjacent small leftovers of one definition join;
- `symbol` is the qualified name of the definition a chunk lies in (`Class.method`,
  `Type.Method` for a Go receiver, `ns.Class.method` in C++), of the one definition in a packed
  chunk, or of the one definition of a file that fits in one chunk; otherwise `None`.

Markdown is cut at ATX headings outside code fences and packed up to `target_tokens` (`symbol`
is the first heading). Other text, and code whose grammar is missing or whose parse fails,
becomes line windows of at most `target_tokens` overlapping by `overlap_lines`, as do long
Markdown sections and long definitions without inner nodes.

Bounds: no chunk exceeds `max_tokens` (by `tokenize.estimate_tokens`) except a single line that
alone does: chunk text is always whole lines, so such a line is a chunk by itself.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from itertools import accumulate
from typing import Any

from index.files.syntax import CONTAINERS, definition, grammar_for, inner, lines_of, root_of
from index.tokenize import COST_UNIT, line_cost
from index.types import Chunk, SourceFile

__all__ = ["chunk_file"]

_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_FENCE = re.compile(r" {0,3}(?:```|~~~)")

Piece = tuple[int, int, "str | None"]  # 1-based inclusive line range and its symbol


def chunk_file(
    file: SourceFile, target_tokens: int = 250, max_tokens: int = 400, overlap_lines: int = 3
) -> list[Chunk]:
    """Chunks of `file` in line order (see the module docstring for the rules)."""
    lines = file.text.splitlines()
    if not file.text.strip():
        return []
    plan = _Plan(lines, target_tokens, max(max_tokens, target_tokens), overlap_lines)
    root = root_of(file, lines)
    if root is not None:
        pieces = plan.split(root, 1, len(lines), None, container=True)
    elif grammar_for(file) == "markdown":
        pieces = plan.markdown()
    else:
        pieces = plan.windows(1, len(lines), None)
    return [c for c in (plan.chunk(file, p) for p in plan.merge(pieces)) if c is not None]


class _Plan:
    """Line costs of one file and the splitting rules that turn them into line ranges."""

    def __init__(self, lines: list[str], target: int, limit: int, overlap: int) -> None:
        self.lines = lines
        self.prefix = [0, *accumulate(map(line_cost, lines))]  # cost of lines 1..n is prefix[n]
        self.target = target * COST_UNIT
        self.limit = limit * COST_UNIT
        self.overlap = max(0, overlap)

    def cost(self, start: int, end: int) -> int:
        return self.prefix[end] - self.prefix[start - 1]

    def split(self, node: Any, start: int, end: int, symbol: str | None, container: bool) -> list[Piece]:
        """Pieces covering lines start..end of `node` (a definition, statement or the root)."""
        if node is None:
            return self.windows(start, end, symbol)
        if self.cost(start, end) <= self.target or (not container and self.cost(start, end) <= self.limit):
            if node.parent is None:  # a small file: name it after its one definition, if any
                names = [name for _, name in map(definition, node.named_children) if name]
                symbol = names[0] if len(names) == 1 else None
            return [(start, end, symbol)]
        segments = _segments(inner(node), start, end)
        if not segments:
            return self.windows(start, end, symbol)
        out: list[Piece] = []
        group: list[tuple[int, int, str | None]] = []  # start, end, symbol of a small definition

        def flush() -> None:
            if group:
                names = [name for _, _, name in group if name is not None]
                out.append((group[0][0], group[-1][1], names[0] if len(names) == 1 else symbol))
                group.clear()

        for seg_start, seg_end, main in segments:
            kind, name = definition(main) if main is not None else (None, None)
            qualified = f"{symbol}.{name}" if symbol and name else (name or symbol)
            cost = self.cost(seg_start, seg_end)
            alone = cost > self.target or (kind is not None and 2 * cost > self.target)
            if not alone and (not group or self.cost(group[0][0], seg_end) <= self.target):
                group.append((seg_start, seg_end, qualified if kind else None))
                continue
            if alone and not out and node.parent is not None and _is_header(group, self.cost, self.target):
                seg_start = group.pop()[0]  # a definition's header lines go with its first slice
            flush()
            if alone:
                out.extend(self.split(main, seg_start, seg_end, qualified, kind in CONTAINERS))
            else:
                group.append((seg_start, seg_end, qualified if kind else None))
        flush()
        return out

    def merge(self, pieces: list[Piece]) -> list[Piece]:
        """Join adjacent small slices of the same definition (left over around split-off parts)."""
        out: list[Piece] = []
        for start, end, symbol in pieces:
            adjacent = out and symbol is not None and out[-1][2] == symbol and out[-1][1] + 1 == start
            if adjacent and self.cost(out[-1][0], end) <= self.target:
                out[-1] = (out[-1][0], end, symbol)
                continue
            out.append((start, end, symbol))
        return out

    def windows(self, start: int, end: int, symbol: str | None) -> list[Piece]:
        """Runs of lines of at most target cost, overlapping by `overlap` lines."""
        out: list[Piece] = []
        first = start
        while True:
            last = bisect.bisect_right(self.prefix, self.prefix[first - 1] + self.target, first, end + 1) - 1
            last = max(last, first)
            if last >= end and out:  # fill the last window backwards rather than leave it short
                fits = bisect.bisect_left(self.prefix, self.prefix[end] - self.target, 0, end) + 1
                first = max(out[-1][0] + 1, min(first, fits))
            out.append((first, last, symbol))
            if last >= end:
                return out
            first = max(last + 1 - self.overlap, first + 1)

    def markdown(self) -> list[Piece]:
        """Sections at headings, packed up to the target; a longer section becomes windows."""
        starts, in_fence = [1], False
        for number, line in enumerate(self.lines, 1):
            if _FENCE.match(line):
                in_fence = not in_fence
            elif not in_fence and number > 1 and _HEADING.match(line):
                starts.append(number)
        ends = [first - 1 for first in starts[1:]] + [len(self.lines)]
        out: list[Piece] = []
        group: list[Any] = []  # start, end, heading of the sections packed so far
        for start, end in zip(starts, ends):
            line = self.lines[start - 1]
            heading = line.strip().strip("#").strip() or None if _HEADING.match(line) else None
            if group and self.cost(group[0], end) <= self.target:
                group[1] = end
                continue
            if group:
                out.append((group[0], group[1], group[2]))
                group = []
            if self.cost(start, end) > self.target:
                out.extend(self.windows(start, end, heading))
            else:
                group = [start, end, heading]
        if group:
            out.append((group[0], group[1], group[2]))
        return out

    def chunk(self, file: SourceFile, piece: Piece) -> Chunk | None:
        start, end, symbol = piece
        while start <= end and not self.lines[start - 1].strip():
            start += 1
        while end >= start and not self.lines[end - 1].strip():
            end -= 1
        if start > end:
            return None
        text = "\n".join(self.lines[start - 1 : end])
        digest = hashlib.sha1(f"{file.path}\n{text}".encode("utf-8", "surrogatepass")).hexdigest()
        tokens = -(-self.cost(start, end) // COST_UNIT)
        return Chunk(file.path, start, end, file.language, symbol, text, digest, tokens)


def _is_header(group: list[tuple[int, int, str | None]], cost: Any, target: int) -> bool:
    """True for a lone first segment with no definition in it and at most half the target."""
    return len(group) == 1 and group[0][2] is None and 2 * cost(group[0][0], group[0][1]) <= target


def _segments(kids: list[Any], start: int, end: int) -> list[tuple[int, int, Any]]:
    """Cut start..end where each kid starts; comments and attributes join the node right below."""
    cuts: list[list[Any]] = []  # [first line, main node or None while only comments]
    glue_until = -2  # last line of a leading comment block: the next node joins its segment
    for kid in kids:
        first, last = lines_of(kid)
        if not cuts:
            cuts.append([start, None])
        elif first > cuts[-1][0] and first > glue_until + 1:
            cuts.append([first, None])
        if cuts[-1][1] is None and ("comment" in kid.type or kid.type == "attribute_item"):
            glue_until = last
            continue
        glue_until = -2
        if cuts[-1][1] is None:
            cuts[-1][1] = kid
    ends = [first - 1 for first, _ in cuts[1:]] + [end]
    return [(first, last, main) for (first, main), last in zip(cuts, ends)]


