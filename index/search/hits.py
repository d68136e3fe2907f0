"""What a search does with its ranked chunks: the best chunk of each best file first (hybrid), merge
neighbours of one file, pack under a token budget, and say which hits' files changed since the build."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from index.files import stat_signature
from index.rank import FileEvidence, FileScores, Frame, Question, is_quoted
from index.store import FileEntry
from index.tokenize import estimate_tokens
from index.types import Chunk, Hit

__all__ = [
    "NAMED_FOCUS", "ChunkChooser", "Pointers", "files_first", "fit_prefix", "marked_stale", "merge_hits",
    "cut_hit", "focus_lines", "pack_for", "pack_hits", "pointers",
]

_GONE = "deleted since indexing: run `bridge index` (MCP: refresh_index) to drop it"
_CHANGED = "changed since indexing, so these lines may have moved: run `bridge index` (MCP: refresh_index)"


@dataclass(frozen=True)
class Pointers:
    """Where in a file a question points, by file number: the deepest traceback frame in it; and, for
    a one-line question, the line it names (`PATH:LINE`, `PATH#LLINE`, `PATH line LINE`) or else the
    definition it names (`names`, in the files in `defining`). A pasted report's line numbers are its
    reporter's version's and it names many identifiers in passing, so only its frames are used."""

    frames: Mapping[int, Frame] = field(default_factory=dict)
    lines: Mapping[int, int] = field(default_factory=dict)
    names: frozenset[str] = frozenset()
    defining: frozenset[int] = frozenset()
    only_a_name: bool = False  # the question is a name alone: show where its definition starts

    def __contains__(self, f: int) -> bool:
        return f in self.frames or f in self.lines or f in self.defining

    def chunk(self, chunks: Mapping[int, Chunk], f: int, scores: np.ndarray) -> int | None:
        """Of file f's `chunks`, the one the question points at, if any."""
        if f in self.frames:
            return _function_chunk(chunks, self.frames[f], scores)
        if f in self.lines:
            return _best_scored([cid for cid, c in chunks.items() if c.start_line <= self.lines[f] <= c.end_line], scores)
        return _named_chunk(chunks, self.names, scores, self.only_a_name)

    def focus(self, paths: Sequence[str], hits: Sequence[Hit]) -> dict[str, int]:
        """Path -> the line of its hit that the question points at (the quoted line of the deepest
        frame in that file, or the line a one-line question names), for hits that hold one."""
        pointed = {paths[f]: f for f in (*self.frames, *self.lines)}
        found: dict[str, int] = {}
        for hit in hits:
            f = pointed.get(hit.path)
            if f is None or hit.path in found:
                continue
            source = self.frames[f].source if f in self.frames else None
            if source:
                line = next((n for n, own in enumerate(hit.text.split("\n"), hit.start_line) if own.strip() == source), None)
            else:
                line = self.lines.get(f)
            if line is not None and hit.start_line <= line <= hit.end_line:
                found[hit.path] = line
        return found


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


def named_lines(hits: Sequence[Hit], question: Question) -> dict[str, int]:
    """Path -> the line of its hit that uses most of the names the report's title uses as code (each
    counting twice) and the report's other code names, for hits where any line uses one."""
    clues = question.title_clues
    title = clues.identifiers | {m.rsplit(".", 1)[-1] for m in clues.modules} if clues else frozenset()
    body = question.clues.identifiers
    found: dict[str, int] = {}
    for hit in hits:
        best, at = 0, None
        for n, line in enumerate(hit.text.split("\n"), hit.start_line):
            words = set(_WORD.findall(line))
            score = 2 * len(words & title) + len(words & body)
            if score > best:
                best, at = score, n
        if at is not None and hit.path not in found:
            found[hit.path] = at
    return found


def quoted_focus(hits: Sequence[Hit], question: Question) -> dict[str, int]:
    """Path -> the first line of its hit that the report quotes word for word (`is_quoted`)."""
    found: dict[str, int] = {}
    for hit in hits:
        if hit.path not in found:
            at = next((n for n, line in enumerate(hit.text.split("\n"), hit.start_line) if is_quoted(question, line)), None)
            if at is not None:
                found[hit.path] = at
    return found


def pointers(files: FileEvidence, question: Question) -> Pointers:
    frames: dict[int, Frame] = {}
    for frame in question.frames:  # outermost first: a deeper frame in the same file wins
        if (f := files.file_named(frame.path)) is not None:
            frames[f] = frame
    if question.title is not None:
        return Pointers(frames)
    lines: dict[int, int] = {}
    for path, line in question.lines:
        if (f := files.file_named(path)) is not None:
            lines.setdefault(f, line)
    names = question.names
    defining = frozenset().union(*(files.files_defining(name.rsplit(".", 1)[-1]) for name in names))
    return Pointers(frames, lines, names, defining, question.only_a_name)


# Of one file's chunks (by id) and the chunk the fused order picks in it, the one to show (None: that one).
ChunkChooser = Callable[[Mapping[int, Chunk], int | None], int | None]


def files_first(
    files: FileEvidence, file_score: FileScores, scores: np.ndarray, order: list[int], fused: dict[int, float], k: int,
    pointed: Pointers | None = None, read: Callable[[list[int]], Mapping[int, Chunk]] | None = None,
    choose: ChunkChooser | None = None,
) -> tuple[list[int], dict[int, float]]:
    """The best chunk of each of the k best files, by file score; then the other chunks, scored lower.

    Only the best files are put in order (a few more than k: a file without chunks is skipped),
    not every file with evidence; more are taken only when those run out. A file the question points
    into (`pointed`, from `pointers`) answers with the chunk it points at when it has one (`read`
    gets chunks by id): the report's words pick any chunk of a big file, often an unrelated one (a QA
    run: requests' `get_redirect_target` for a traceback through `Session.request`). Of a long
    function's chunks, the one holding the line the traceback quotes is shown: the report's words
    favour its docstring (flask's `Blueprint.register`, 106 lines, for a `raise ValueError(` near
    its middle). Otherwise `choose` (the chunk stage, for reports) may pick another of its chunks."""
    best_chunk: dict[int, int] = {}
    for cid in order:
        best_chunk.setdefault(int(files.chunk_file[cid]), cid)
    chosen: dict[int, float] = {}
    wanted = 2 * k
    seen = 0
    while len(chosen) < k and seen < len(file_score):
        best = file_score.best(wanted)
        at = np.searchsorted(file_score.files, best)
        for f, value in zip(best[seen:].tolist(), file_score.scores[at[seen:]].tolist()):
            if len(chosen) == k:
                break
            first, n = int(files.first_chunk[f]), int(files.n_chunks[f])
            if n == 0:
                continue
            chunk = best_chunk.get(f)
            is_pointed = pointed is not None and f in pointed
            if read is not None and (is_pointed or choose is not None):
                rows = read(list(range(first, first + n)))
                target = pointed.chunk(rows, f, scores) if pointed is not None and is_pointed else None
                picked = choose(rows, chunk) if choose is not None else None  # asked also where pointed: it ranks the file
                target = picked if target is None else target
                chunk = chunk if target is None else target  # not `or`: chunk 0 is a chunk
            if chunk is None:  # named or defining, but no chunk among the candidates: its best BM25 chunk
                chunk = first + int(np.argmax(scores[first : first + n])) if len(scores) else first
            chosen[chunk] = value
        seen, wanted = len(best), 4 * wanted
    rest = [c for c in order if c not in chosen]
    if rest:  # below every chosen chunk, in chunk order
        floor = min(chosen.values(), default=1.0) / (2 * fused[rest[0]])
        chosen.update((c, fused[c] * floor) for c in rest)
    return sorted(chosen, key=lambda c: (-chosen[c], c)), chosen


def _function_chunk(chunks: Mapping[int, Chunk], frame: Frame, scores: np.ndarray) -> int | None:
    """Of a file's chunks, the best-scored one of the frame's function (a long function has
    several), among those holding the frame's quoted line when any does."""
    mine = [cid for cid, c in chunks.items() if c.symbol and c.symbol.rsplit(".", 1)[-1] == frame.function]
    if frame.source:
        mine = [cid for cid in mine if _holds_line(chunks[cid].text, frame.source)] or mine
    return _best_scored(mine, scores)


def _named_chunk(chunks: Mapping[int, Chunk], names: frozenset[str], scores: np.ndarray, first: bool) -> int | None:
    """Of a file's chunks, the best-scored one of the definition the question names most exactly
    (`FlaskClient.open` before `FlaskClient`), or with `first` the one where it starts; None when the
    question names none of them."""
    best, mine = 0.0, []
    for cid, chunk in chunks.items():
        parts = chunk.symbol.split(".") if chunk.symbol else []
        n: float = max((_shared_tail(parts, name.split(".")) for name in names), default=0)
        if not n and any(_inside(parts, name.split(".")) for name in names):
            # a chunk named for a method of the class asked for (a small class's header, docstring
            # and first method are one chunk, `JSONDecodeError.__init__`): below any exact match
            n = 0.5
        if n > best:
            best, mine = n, [cid]
        elif n and n == best:
            mine.append(cid)
    return min(mine, key=lambda cid: chunks[cid].start_line) if first and mine else _best_scored(mine, scores)


def _inside(symbol: list[str], name: list[str]) -> bool:
    """Whether `symbol` is a definition inside `name` (`Config.load` inside `Config`)."""
    return any(symbol[i : i + len(name)] == name for i in range(len(symbol) - len(name)))


def _shared_tail(symbol: list[str], name: list[str]) -> int:
    """How many dotted parts the shorter of the two ends the longer with (`Blueprint.register` and
    `register`: 1; `register_blueprint` and `register`: 0). A name qualified by a class, by the
    CapWords convention, is not a symbol outside it: `Table.read` is no module's `read`, while
    `np.polyfit` is a module's `polyfit`."""
    n = min(len(symbol), len(name))
    if not n or symbol[-n:] != name[-n:] or (n < len(name) and name[-n - 1][:1].isupper()):
        return 0
    return n


def _best_scored(candidates: Sequence[int], scores: np.ndarray) -> int | None:
    """The best-scored chunk of `candidates` (the first on a tie), or None when there are none."""
    if not candidates:
        return None
    return max(candidates, key=lambda cid: (float(scores[cid]) if len(scores) else 0.0, -cid))


def _holds_line(text: str, line: str) -> bool:
    return line in text and any(own.strip() == line for own in text.splitlines())


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


def pack_hits(
    hits: list[Hit], max_tokens: int | None, count: Callable[[str], int] = estimate_tokens,
    focus: Mapping[str, int] | None = None,
) -> tuple[list[Hit], bool]:
    """Whole hits in rank order while they fit; the first that does not is cut at line boundaries:
    its first lines, or the lines around the one the question points at (`focus`, path -> line, from
    `Pointers.focus`). A traceback's quoted line is often far down a function: of the 42 top-5 hits
    of shared/bench that hold one, 6 were packed without it at 600 tokens and 19 at 300; kept
    around it, 5 and 14, every one a hit left out whole or one where that line alone does not fit."""
    if max_tokens is None:
        return hits, False
    packed: list[Hit] = []
    used = 0
    for hit in hits:
        if used + hit.tokens <= max_tokens:
            packed.append(hit)
            used += hit.tokens
            continue
        cut = cut_hit(hit, max_tokens - used, count, (focus or {}).get(hit.path))
        if cut is not None:
            packed.append(cut)
        return packed, True
    return packed, False


# Off only to measure what it adds (bench/edit_sites.py --no-title-focus): one more report's edit site
# at 300 tokens, two with the chunk stage.
NAMED_FOCUS = True


def focus_lines(hits: Sequence[Hit], question: Question, pointed: Pointers | None, paths: Sequence[str]) -> dict[str, int]:
    """Path -> the line a hit cut to fit keeps: the one the question points at (a traceback's quoted
    line, a one-line question's PATH:LINE); in a report's hits (hybrid), else the line that uses most
    of the names its title uses."""
    focus = pointed.focus(paths, hits) if pointed is not None else {}
    if NAMED_FOCUS and pointed is not None and question.title is not None:
        focus = {**named_lines(hits, question), **quoted_focus(hits, question), **focus}
    return focus


def pack_for(hits: list[Hit], max_tokens: int | None, question: Question, pointed: Pointers | None,
          paths: Sequence[str]) -> tuple[list[Hit], bool]:
    """Hits within `max_tokens`, a hit cut to fit keeping the lines around its `focus_lines` line."""
    if max_tokens is None:
        return hits, False
    return pack_hits(hits, max_tokens, focus=focus_lines(hits, question, pointed, paths))


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


def cut_hit(hit: Hit, budget: int, count: Callable[[str], int], focus: int | None = None) -> Hit | None:
    """Some of a hit that did not fit whole, within `budget`: the lines around `focus` (a line of it),
    else its first lines; None when not even one line fits."""
    lines = hit.text.split("\n")
    # Whole lines only, and never all of them (the whole hit did not fit): text stays lines start..end.
    first = end = 0
    if focus is not None and hit.start_line <= focus <= hit.end_line:
        first, end = _window(lines, focus - hit.start_line, budget, count)
    if end == first:  # no focus, or not even its line fits: the first lines
        first, end = 0, min(fit_prefix(lines, budget, count), len(lines) - 1)
    if end == first:
        return None
    text = "\n".join(lines[first:end])
    return replace(hit, start_line=hit.start_line + first, end_line=hit.start_line + end - 1, text=text, tokens=count(text))


def _window(lines: list[str], at: int, budget: int, count: Callable[[str], int]) -> tuple[int, int]:
    """The widest lines[first:end] holding line `at`, as many lines before it as after where the
    hit has them, that counts at most `budget` tokens; (at, at) when not even that line fits."""

    def bounds(r: int) -> tuple[int, int]:
        return max(0, at - r), min(len(lines), at + r + 1)

    if count(lines[at]) > budget:
        return at, at
    lo, hi = 0, len(lines)
    while lo < hi:  # the widest radius that fits (a wider window never counts fewer tokens)
        mid = (lo + hi + 1) // 2
        first, end = bounds(mid)
        if count("\n".join(lines[first:end])) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return bounds(lo)


def marked_stale(hits: list[Hit], root: Path, built: Mapping[str, FileEntry]) -> list[Hit]:
    """Hits whose file's size or mtime on disk is no longer the indexed one (`built`: the
    manifest's files) say so in their evidence: the text is what was indexed, and the lines on disk
    may differ (one stat per hit). A reader on another machine than the build's (an index on Milvus)
    has no such folder and marks nothing."""
    if not root.is_dir():
        return hits
    out = []
    for hit in hits:
        entry = built.get(hit.path)
        now = stat_signature(root, hit.path)
        if entry is not None and now != (entry.size, entry.mtime_ns):
            hit = replace(hit, evidence=(*hit.evidence, _GONE if now is None else _CHANGED))
        out.append(hit)
    return out
