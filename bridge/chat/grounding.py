"""Grounded answers for small models: code and citations that the retrieved snippets do not hold are withheld.

A small model (the bundled SmolLM2-135M) writes plausible code that is in no file and cites files
that do not exist; shown as its answer, a newcomer takes them for the repository's. With grounding
on, the answer shows only what the snippets back. The rules (bench/answer_bench.py counts with them):

- a code line is a line inside a ``` fence, or outside one a line that reads as a statement
  (`def`, `class`, `import`, `return`, an assignment, a bare call, ...) or is indented four spaces;
  lines without a letter or digit (`}`, `...`) are not counted;
- a code line is grounded when, with whitespace collapsed, it equals a line of a retrieved snippet;
- a fenced block is shown up to its first code line that is not grounded (the lines the model copied;
  the block is closed there) and withheld whole when that is its first code line; a code line outside
  fences is withheld alone;
- a citation that matches no retrieved source (bridge.chat.answers) is cut out of its line, and a line
  left with fewer than two words by that is dropped;
- a sentence of prose that shows a name as code (`name`, `name()`, `a.b`, `~a.B::c`) found in no
  snippet, no source's path, not in the question and not the definition a snippet lies in is
  withheld: the bundled model wrote invented names in backticks in half its answers
  (`getHTTPResponse`, `fetch_snippet`), and backticks tell a reader "this is in the code". Python's
  builtins and keywords count as known; any other span (an expression, a header) must appear in a
  snippet as written, whitespace collapsed.

`Grounder` works on pieces as they stream, so nothing is shown before it is checked; `ground` is the
same on a whole text. One line at the end says what was withheld. In process, a grounded model is also
decoded without ``` blocks (bridge/chat/session.py, `Decoding.fences`): the bundled model's blocks were
inventions withheld whole, and the prose it writes instead keeps what it names (bench/RESULTS.md).
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Iterable, Sequence
from typing import Literal

from bridge.chat.answers import Grounded, Span, check_citations, find_citations

__all__ = [
    "GROUNDINGS",
    "SMALL_MODEL_PARAMETERS",
    "Grounded",
    "Grounder",
    "Grounding",
    "KnownNames",
    "code_lines",
    "ground",
    "grounds",
    "ungrounded_code_lines",
    "unknown_inline_names",
]

Grounding = Literal["auto", "strict", "free"]
GROUNDINGS: tuple[Grounding, ...] = ("auto", "strict", "free")
# Below this many weights (from the GGUF's tensors) a model is small: grounded by default.
# SmolLM2-135M has 0.13 B; Llama 3.2 1B has 1.24 B and keeps free answers.
SMALL_MODEL_PARAMETERS = 1_000_000_000

_FENCE = re.compile(r"^\s*(```|~~~)")
_STATEMENT = re.compile(
    r"^(?:(?:async\s+)?def\s+\w+\s*\(|class\s+\w+\s*[:(]|import\s+[\w.]+|from\s+[\w.]+\s+import\s|return\b|raise\b"
    r"|yield\b|await\s|@[\w.]+|(?:el)?if\s.*:$|else\s*:$|for\s.+\sin\s.+:$|while\s.+:$|try\s*:$|except\b.*:$"
    r"|finally\s*:$|with\s.+:$|(?:export\s+)?(?:function|const|let|var)\s+\w+|#include\b"
    r"|(?:public|private|protected|static)\s+\w+"
    r"|[\w.\[\]'\"]+(?:\s*,\s*[\w.\[\]]+)*\s*[-+*/|&]?=(?!=)\s*\S"  # an assignment (not ==)
    r"|[\w.]+\(.*\)\s*;?$)"  # a bare call
)
_LIST_ITEM = re.compile(r"^(?:[-*+]|\d+[.)])\s")
_EMPTY_WRAPPER = re.compile(r"\(\s*(?:see|in|from|at|cf\.?)?\s*\)|\[\s*\]|``", re.IGNORECASE)
_DANGLING = re.compile(r"\s*[,;]\s*(?=[,;.)\]]|$)")
_INLINE = re.compile(r"`([^`\n]+)`")
_NAME = re.compile(r"[A-Za-z_]\w*")
_REFERENCE = re.compile(r"~?[A-Za-z_]\w*(?:(?:\.|::)[A-Za-z_]\w*)*")
_CALL_TAIL = re.compile(r"\s*\([^()]*\)\s*$")
# Sentences end at . ! or ? before a space; "e.g. x" splits early, which withholds less, never more.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_ALWAYS_KNOWN = frozenset(dir(builtins)) | frozenset(keyword.kwlist) | {"self", "cls"}


def grounds(mode: Grounding, parameters: int | None) -> bool:
    """Whether answers are grounded: always (strict), never (free), or for a small model (auto).

    A model of unknown size (an OpenAI-compatible server without --model) is taken to be large.
    """
    if mode != "auto":
        return mode == "strict"
    return parameters is not None and parameters < SMALL_MODEL_PARAMETERS


def _norm(line: str) -> str:
    return " ".join(line.split())


def _counts(line: str) -> bool:
    return any(ch.isalnum() for ch in line)


def _is_code(line: str) -> bool:
    """A line outside fences that reads as code."""
    if not _counts(line):
        return False
    stripped = line.strip()
    indented = line.startswith(("    ", "\t"))
    return bool(_STATEMENT.match(stripped)) or (indented and not _LIST_ITEM.match(stripped))


def code_lines(text: str) -> list[str]:
    """The code lines of a text, fenced or not (the definition above)."""
    found: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        elif (fenced and _counts(line)) or (not fenced and _is_code(line)):
            found.append(line)
    return found


def _snippet_lines(texts: Iterable[str]) -> frozenset[str]:
    return frozenset(_norm(line) for text in texts for line in text.split("\n") if _counts(line))


def ungrounded_code_lines(text: str, snippets: Sequence[str]) -> int:
    """How many code lines of `text` are found in none of the snippets."""
    known = _snippet_lines(snippets)
    return sum(_norm(line) not in known for line in code_lines(text))


class KnownNames:
    """What an inline code span may name: the words and the text of the snippets, the sources' paths,
    the question and the definitions the snippets lie in."""

    def __init__(self, texts: Iterable[str]) -> None:
        joined = [_norm(t) for t in texts]
        self.text = "\n".join(joined)
        self.words = frozenset(w for t in joined for w in _NAME.findall(t)) | _ALWAYS_KNOWN

    def knows(self, span: str) -> bool:
        """Whether an inline code span is backed: a name, perhaps dotted, called or in a Sphinx reference
        (`~pkg.Class::attr`), whose every part is a known word; anything else found as written. A
        citation (`path:start-end`) is the citation rule's to judge, not this one's."""
        span = _norm(span)
        if not _counts(span) or self._found(span) or _is_citation(span):
            return True
        name = _CALL_TAIL.sub("", span)
        if _REFERENCE.fullmatch(name):
            return all(part in self.words for part in _NAME.findall(name))
        return False

    def _found(self, span: str) -> bool:
        """Whether the span occurs in the texts as a whole: `get` is not found in `budget`."""
        before = r"(?<!\w)" if span[0].isalnum() or span[0] == "_" else ""
        after = r"(?!\w)" if span[-1].isalnum() or span[-1] == "_" else ""
        return re.search(before + re.escape(span) + after, self.text) is not None


def _is_citation(span: str) -> bool:
    found = find_citations(span)
    return len(found) == 1 and found[0].text == span


def unknown_inline_names(text: str, known: KnownNames) -> list[str]:
    """The inline code spans of `text` (outside fences) that `known` does not back."""
    found: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            found += [m.group(1) for m in _INLINE.finditer(line) if not known.knows(m.group(1))]
    return found


class Grounder:
    """Fed the model's text piece by piece; returns what may be shown, a whole line (or block) at a time."""

    def __init__(self, sources: Sequence[Span], snippets: Sequence[str], also_known: Sequence[str] = (), *,
                 names: bool = True) -> None:
        """`also_known`: other texts whose names count as backed (the question, the snippets' symbols)."""
        self.sources = tuple(sources)
        self.known = _snippet_lines(snippets)
        self.names = KnownNames([*snippets, *(s.path for s in sources), *also_known]) if names else None
        self.withheld_sentences = 0
        self.shown = ""
        self._pending = ""
        self._block: list[str] | None = None  # the open fenced block, its opening fence first
        self._blank = True  # the last shown line was blank (or nothing was shown): skip another blank
        self.withheld_blocks = self.withheld_block_lines = self.withheld_lines = self.withheld_citations = 0

    def feed(self, piece: str) -> str:
        """Add a piece of the model's text; the lines it completes that may be shown."""
        self._pending += piece
        *complete, self._pending = self._pending.split("\n")
        return self._emit(self._line(line) for line in complete)

    def finish(self) -> str:
        """The rest, once the model has stopped: its last line, and a block it left open (closed here)."""
        lines = [self._line(self._pending)] if self._pending else []
        self._pending = ""
        if self._block is not None:
            lines.append(self._close_block(closing=self._block[0].strip()[:3]))
        return self._emit(lines).rstrip("\n")

    def result(self) -> Grounded:
        return Grounded(self.shown.strip(), self.withheld_blocks, self.withheld_block_lines, self.withheld_lines,
                        self.withheld_citations, self.withheld_sentences)

    def _emit(self, parts: Iterable[str | None]) -> str:
        out = "".join(p for p in parts if p is not None)
        self.shown += out
        return out

    def _line(self, line: str) -> str | None:
        """What to show for one complete line: itself (perhaps without citations), a whole block, or nothing yet."""
        if self._block is not None:
            if _FENCE.match(line):
                return self._close_block(line)
            self._block.append(line)
            return None
        if _FENCE.match(line):
            self._block = [line]
            return None
        if _is_code(line) and _norm(line) not in self.known:
            self.withheld_lines += 1
            return None
        return self._shown_line(self._without_unknown_names(self._without_unknown_citations(line)))

    def _close_block(self, closing: str) -> str | None:
        """The block up to its first code line found in no snippet (the lines the model copied), closed
        again; nothing when even its first code line is not found."""
        assert self._block is not None
        block, self._block = self._block, None
        body = block[1:]
        cut = next((i for i, line in enumerate(body) if _counts(line) and _norm(line) not in self.known), len(body))
        kept, rest = body[:cut], body[cut:]
        while kept and not kept[-1].strip():
            kept.pop()
        hidden = sum(_counts(line) for line in rest)
        if not hidden and not any(_counts(line) for line in kept):  # an empty block: nothing to show or withhold
            return None
        if not any(_counts(line) for line in kept):
            self.withheld_blocks += 1
            self.withheld_block_lines += hidden
            return None
        self.withheld_lines += hidden
        return "".join(self._shown_line(line) or "" for line in [block[0], *kept, closing])

    def _without_unknown_citations(self, line: str) -> str | None:
        unknown = check_citations(line, self.sources).unknown
        if not unknown:
            return line
        self.withheld_citations += len(unknown)
        for citation in unknown:
            line = line.replace(citation.text, "")
        line = _DANGLING.sub("", _EMPTY_WRAPPER.sub("", line))
        line = re.sub(r"\s+([,.;:)\]])", r"\1", re.sub(r"[ \t]{2,}", " ", line)).rstrip()
        return line if len(re.findall(r"\w+", line)) >= 2 else None

    def _without_unknown_names(self, line: str | None) -> str | None:
        """The line less its sentences that show a name as code that nothing retrieved backs."""
        if line is None or self.names is None or "`" not in line:
            return line
        body = line.lstrip()
        marker = _LIST_ITEM.match(body)  # "3. " is no sentence of its own
        head = line[: len(line) - len(body)] + (marker.group(0) if marker else "")
        sentences = _SENTENCE_END.split(line[len(head):])
        names = self.names
        kept = [s for s in sentences if all(names.knows(m.group(1)) for m in _INLINE.finditer(s))]
        if len(kept) == len(sentences):
            return line
        self.withheld_sentences += len(sentences) - len(kept)
        return head + " ".join(s.strip() for s in kept) if kept else None

    def _shown_line(self, line: str | None) -> str | None:
        if line is None:
            return None
        blank = not line.strip()
        if blank and self._blank:
            return None
        self._blank = blank
        return line + "\n"


def ground(
    text: str, sources: Sequence[Span], snippets: Sequence[str], also_known: Sequence[str] = (), *,
    names: bool = True,
) -> Grounded:
    """The whole text through a Grounder (the same as streaming it); `names=False` leaves inline code
    spans unchecked (bench/answer_bench.py measures the rule with it)."""
    grounder = Grounder(sources, snippets, also_known, names=names)
    grounder.feed(text)
    grounder.finish()
    return grounder.result()
