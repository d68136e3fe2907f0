"""Checks on a model's answer text: repetition loops and `path:start-end` citations.

Pure functions and one small streaming guard; the chat turn uses them while and after generating,
and bench/answer_bench.py scores answers with the same definitions:
- a loop is a word 6-gram that occurs three times (words are runs of letters, digits and `_`);
- a citation is `path:start-end` where path has a folder or an extension; it is valid when a
  retrieved source has the same path (or ends with the cited path at a folder boundary) and the
  line ranges overlap (a backwards range such as `heapq.py:12-4` is never valid).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "LOOP_N",
    "LOOP_TIMES",
    "MIN_WORDS",
    "Answer",
    "Citation",
    "CitationCheck",
    "Grounded",
    "LoopGuard",
    "Span",
    "check_citations",
    "find_citations",
    "finish_answer",
    "first_loop",
    "has_loop",
]

LOOP_N = 6
LOOP_TIMES = 3
# Fewer words than this is not an answer (an empty reply, or a loop that began at once).
MIN_WORDS = 5

_WORD = re.compile(r"\w+")
# path:start-end; the path needs a "/" or a ".ext" so that times like 10:30-11 do not count.
_CITATION = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+(?:\.[\w-]+)*\.\w+|(?:[\w.-]+/)+[\w.-]+):(\d+)\s*[-–]\s*(\d+)")


@dataclass(frozen=True, slots=True)
class Span:
    """A stretch of lines of one file, 1-based and inclusive (a retrieved source, or a citation)."""

    path: str
    start_line: int
    end_line: int

    @property
    def citation(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


@dataclass(frozen=True, slots=True)
class Citation:
    span: Span
    text: str  # exactly as written in the answer


@dataclass(frozen=True, slots=True)
class CitationCheck:
    valid: tuple[Citation, ...]  # match a retrieved source
    unknown: tuple[Citation, ...]  # cite something that was not retrieved

    @property
    def cited_sources(self) -> bool:
        return bool(self.valid)


def first_loop(text: str, n: int = LOOP_N, times: int = LOOP_TIMES) -> int | None:
    """Character offset where the second occurrence of the first n-gram seen `times` times begins; None without a loop.

    Cutting the text there keeps one full copy of the repeated words and everything before it.
    """
    words = [(m.group().lower(), m.start()) for m in _WORD.finditer(text)]
    seen: dict[tuple[str, ...], list[int]] = {}
    for i in range(len(words) - n + 1):
        gram = tuple(w for w, _ in words[i : i + n])
        starts = seen.setdefault(gram, [])
        starts.append(words[i][1])
        if len(starts) >= times:
            return starts[1]
    return None


def has_loop(text: str, n: int = LOOP_N, times: int = LOOP_TIMES) -> bool:
    """True when some word n-gram occurs `times` times (the benchmark's loop definition)."""
    words = [m.group().lower() for m in _WORD.finditer(text)]
    grams = Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    return any(count >= times for count in grams.values())


class LoopGuard:
    """Fed the answer piece by piece; says when to stop and where to cut.

    Checks only when a piece completes a word, so the cost stays linear in practice (answers are
    at most a few hundred tokens).
    """

    def __init__(self, n: int = LOOP_N, times: int = LOOP_TIMES) -> None:
        self.n, self.times = n, times
        self.text = ""
        self.cut: int | None = None

    def feed(self, piece: str) -> bool:
        """Add a piece; True once the text loops (then `cut` is where the repetition begins)."""
        self.text += piece
        if self.cut is None and piece and not piece[-1].isalnum():
            self.cut = first_loop(self.text, self.n, self.times)
        return self.cut is not None

    def kept(self) -> str:
        """The text before the repetition (all of it when there was none)."""
        return self.text if self.cut is None else self.text[: self.cut].rstrip()


def find_citations(text: str) -> tuple[Citation, ...]:
    """Every `path:start-end` in the text, a backwards range (`heapq.py:12-4`, which the small model
    writes) included: it names no lines, so it never matches a source and is flagged."""
    return tuple(
        Citation(Span(m.group(1).lstrip("./"), int(m.group(2)), int(m.group(3))), m.group(0))
        for m in _CITATION.finditer(text)
    )


def _matches(cited: Span, source: Span) -> bool:
    same = cited.path == source.path or source.path.endswith("/" + cited.path)
    ordered = cited.start_line <= cited.end_line
    return same and ordered and cited.start_line <= source.end_line and source.start_line <= cited.end_line


def check_citations(text: str, sources: Sequence[Span]) -> CitationCheck:
    valid: list[Citation] = []
    unknown: list[Citation] = []
    for citation in find_citations(text):
        (valid if any(_matches(citation.span, s) for s in sources) else unknown).append(citation)
    return CitationCheck(tuple(valid), tuple(unknown))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@dataclass(frozen=True, slots=True)
class Grounded:
    """The model's text with what bridge.chat.grounding withheld taken out, and counts of it."""

    text: str  # the model's text as shown: withheld code and citations taken out
    withheld_blocks: int  # fenced code blocks left out whole (their first code line is in no snippet)
    withheld_block_lines: int  # the code lines in them
    withheld_lines: int  # other code lines left out: outside fences, and the rest of a block after such a line
    withheld_citations: int  # citations of sources that were not retrieved, cut out
    withheld_sentences: int = 0  # prose sentences that showed a name as code found in no snippet

    @property
    def withheld(self) -> bool:
        return bool(self.withheld_blocks or self.withheld_lines or self.withheld_citations or self.withheld_sentences)

    @property
    def note(self) -> str:
        """One line that says what was withheld ('' when nothing was)."""
        code = [_plural(n, word) for n, word in ((self.withheld_blocks, "block"), (self.withheld_lines, "line")) if n]
        parts = []
        if code:
            parts.append(f"code not found in the retrieved sources ({', '.join(code)})")
        if self.withheld_citations:
            parts.append(_plural(self.withheld_citations, "citation") + " of a source that was not retrieved")
        if self.withheld_sentences:
            parts.append(_plural(self.withheld_sentences, "sentence") + " naming code not in the sources")
        return f"[withheld: {'; '.join(parts)}]" if parts else ""


@dataclass(frozen=True, slots=True)
class Answer:
    text: str  # what the user reads: the model's words, then notes, then the citations it relies on
    model_text: str  # the model's own words, cut before a loop
    looped: bool  # generation was stopped because the model began repeating itself
    usable: bool  # False: the text is a notice plus the best retrieved snippet, not the model's
    citations: CitationCheck  # of model_text against the retrieved sources
    grounding: Grounded | None = None  # what grounding withheld from model_text (None: a free answer)

    @property
    def shown_model_text(self) -> str:
        """The model's words as shown: model_text less what grounding withheld."""
        return self.grounding.text if self.grounding is not None else self.model_text


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def finish_answer(
    model_text: str, sources: Sequence[Span], *, looped: bool, best: str | None, grounded: Grounded | None = None
) -> Answer:
    """Turn the model's text into the answer shown: flag unknown citations, end with the sources it cites.

    `best` is the top retrieved snippet as it was shown to the model; when the model wrote nothing
    usable the answer says so and shows that snippet instead. `grounded` (bridge.chat.grounding) is
    model_text with unbacked code and citations withheld: it is shown instead, with one line saying
    what was withheld.
    """
    text = model_text.strip()
    check = check_citations(text, sources)
    shown = grounded.text.strip() if grounded is not None else text
    # Grounded, a Sources line alone (the one picked under the grammar) is no answer either.
    said = "\n".join(line for line in shown.splitlines() if not line.startswith("Sources: ")) if grounded else shown
    if len(_WORD.findall(said)) < MIN_WORDS:
        if len(_WORD.findall(text)) >= MIN_WORDS:
            reason = "all it wrote was code or citations not found in the retrieved sources, withheld"
        else:
            reason = "it began repeating itself at once" if looped else "it wrote almost nothing"
        message = f"The model produced no usable answer ({reason})."
        message += f" The best retrieved snippet:\n{best.strip()}" if best else " Nothing was retrieved either."
        return Answer(message, text, looped, False, check, grounded)
    parts = [shown]
    if looped:
        parts.append("[stopped: the model began repeating itself; the repetition is cut]")
    if grounded is not None:
        if grounded.withheld:
            parts.append(grounded.note)
    elif check.unknown:
        parts.append("Not among the retrieved sources: " + ", ".join(_unique([c.text for c in check.unknown])))
    valid = check.valid if grounded is None else check_citations(shown, sources).valid
    relied = _unique([s.citation for c in valid for s in sources if _matches(c.span, s)])
    if relied:
        if not shown.splitlines()[-1].startswith("Sources: "):  # else the model already ended with them
            parts.append("Sources: " + ", ".join(relied))
    elif sources:
        parts.append("Sources (retrieved; the answer cites none): " + ", ".join(s.citation for s in sources[:3]))
    return Answer("\n\n".join(parts), text, looped, True, check, grounded)
