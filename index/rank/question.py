"""Reading a question: its title line, and what it says about code beyond its words.

A bug report names files (tracebacks, `from pkg.mod import f`, "the bug is in utils.py") and uses
identifiers in code context (fences, backticks, traceback lines, names shaped like code); its first
line is the reporter's summary. index/rank/evidence.py turns these into the mentions, definitions and title
signals; index/search/votes.py reads the title too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from index.rank.focus import focus
from index.tokenize import terms

__all__ = [
    "QUOTED_LINE", "Frame", "QueryClues", "Question", "as_text", "extract_clues", "flatten", "line_mentions",
    "named_symbols", "only_a_name", "title_of", "traceback_frames",
]

# A path is looked for only at the start of each run of path characters: searched anywhere, the
# pattern backtracks cubically on a long run without a dot (4 KB of one word took 50 s).
_PATH_RUN = re.compile(r"[\w.\-/\\]+")
_PATH = re.compile(
    r"[\w.\-/\\]*[\w\-]\.(?:py|pyx|pxd|pyi|c|h|cc|cpp|hpp|js|jsx|ts|tsx|go|rs|java|rb|rst|md|txt|cfg|toml|ini|ya?ml|json)\b"
)
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_FROM_IMPORT = re.compile(r"\bfrom\s+([\w.]+)\s+import\s+\(?([\w\s,]+)")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_CODE_SHAPED = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]|[a-z][A-Z]|\w\(")
_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_INLINE = re.compile(r"`[^`\n]+`")
# Traceback frames in the three shapes reports paste, each (path, function) and the source line when
# the traceback prints one. Python: `File "PATH", line N, in FUNC`, the line of code indented under it.
# pytest (--tb=short, and every frame but the first and last in its default --tb=auto): `PATH:N: in
# FUNC`, the line under it. IPython and Jupyter: `File PATH:N, in FUNC(ARGS)` (8.x) or `PATH in FUNC(ARGS)`, then numbered
# lines of context with `--> N` at the frame's line.
_FRAME = re.compile(
    r'^\s*File "([^"\n]+)", line \d+, in ([A-Za-z_]\w*)[^\n]*(?:\n[ \t]+(?!File ")(\S[^\n]*))?', re.MULTILINE
)
_PYTEST_FRAME = re.compile(r"^[ \t]*([^\s\"':]+\.py):\d+: in ([A-Za-z_]\w*)[ \t\r]*(?:\n[ \t]+(\S[^\n]*))?", re.MULTILINE)
_IPYTHON_FRAME = re.compile(r"^[ \t]*(?:File )?([^\s\"',]+\.py)(?::\d+,)? in (?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)\(", re.MULTILINE)
_IPYTHON_ARROW = re.compile(r"^-+>[ \t]*\d+[ \t]+(\S[^\n]*)", re.MULTILINE)
# What may follow a path to name one of its lines: `:12` (compilers, linters, pytest), `#L12` (a link
# to a line), `, line 12` or ` line 12`.
_LINE_AFTER_PATH = re.compile(r":(\d+)|#L(\d+)|,?[ \t]+line[ \t]+(\d+)")
# A name declared in prose as code declares it: `def url_for`, `class Config` (CapWords: "class to" is English).
_DECLARED = re.compile(r"\b(?:def\s+(?=[A-Za-z_])|class\s+(?=[A-Z]))(\w+)")
_DECLARING = r"(?:class|def|function|func|fn|struct|interface|trait|enum|type)"
_ONLY_A_NAME = re.compile(rf"\s*`?(?:{_DECLARING}\s+)?[A-Za-z_][\w.]*(?:\(\))?`?\s*")
_SURROGATE = re.compile("[\ud800-\udfff]")
_CODE_LINE = re.compile(r"^(?:\s{4,}|\t|>>>|\.\.\.|\s*File \").*$", re.MULTILINE)


def as_text(query: str) -> str:
    """`query` with what is not text replaced by U+FFFD: the lone surrogates that bytes of another
    encoding (a Latin-1 log, `\xff`) become when read as UTF-8, which no tokenizer accepts."""
    try:
        query.encode("utf-8")
        return query
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", query)


@dataclass(frozen=True)
class QueryClues:
    """What a question says about code, beyond its words."""

    paths: tuple[str, ...]  # path-like mentions, "/" separators, in order of appearance
    modules: tuple[str, ...]  # dotted names, in order of appearance
    identifiers: frozenset[str]  # names used in code context or shaped like code


def extract_clues(query: str) -> QueryClues:
    found = (_PATH.match(run.group(0)) for run in _PATH_RUN.finditer(query) if "." in run.group(0))
    paths = tuple(m.group(0).replace("\\", "/").removeprefix("./") for m in found if m)
    modules = [m.group(0) for m in _DOTTED.finditer(query)]
    for match in _FROM_IMPORT.finditer(query):
        modules.extend(f"{match.group(1)}.{name}" for name in re.findall(r"\w+", match.group(2)))
    code = "\n".join([*_FENCE.findall(query), *_INLINE.findall(query), *_CODE_LINE.findall(query)])
    identifiers = set(_IDENT.findall(code)) | set(_DECLARED.findall(query))
    for match in _IDENT.finditer(query):
        window = query[max(0, match.start() - 1) : match.end() + 1]
        if _CODE_SHAPED.search(window):
            identifiers.add(match.group(0))
    return QueryClues(paths, tuple(modules), frozenset(identifiers))


# A line of code shorter than this (`return x`, `else:`) is quoted by chance; on shared/bench 12–24
# gave the chunk stage the same gain and 32 less (bench/DECISIONS.md).
QUOTED_LINE = 16


def flatten(text: str) -> str:
    """Lowercased, whitespace collapsed: how a quoted line and the text quoting it are compared."""
    return " ".join(text.lower().split())


@dataclass(frozen=True)
class Question:
    """One question as every stage of a search reads it. Each reading is made once, on first use
    (a lexical search never parses frames), however many stages ask for it."""

    asked: str  # as the user asked it, text only (`as_text`)
    text: str  # what is searched: a long report without its pasted output (index/rank/focus.py)

    @classmethod
    def of(cls, asked: str) -> Question:
        """`asked` must already be text (`as_text`): callers check its size before it is focused."""
        return cls(asked, focus(asked))

    @cached_property
    def terms(self) -> list[str]:
        return terms(self.text)

    @cached_property
    def title(self) -> str | None:
        return title_of(self.text)

    @cached_property
    def title_terms(self) -> list[str]:
        return terms(self.title) if self.title else []

    @cached_property
    def clues(self) -> QueryClues:
        return extract_clues(self.text)

    @cached_property
    def title_clues(self) -> QueryClues | None:
        return extract_clues(self.title) if self.title else None

    @cached_property
    def names(self) -> frozenset[str]:
        """`named_symbols` of the text, from its clues."""
        return frozenset({*self.clues.modules, *self.clues.identifiers})

    @cached_property
    def only_a_name(self) -> bool:
        return only_a_name(self.text)

    @cached_property
    def lines(self) -> tuple[tuple[str, int], ...]:
        return line_mentions(self.text)

    @cached_property
    def frames(self) -> tuple[Frame, ...]:
        return traceback_frames(self.text)

    @cached_property
    def flat(self) -> str:
        """The question as asked, pasted output included, lowercased with its whitespace collapsed: what
        a line of code it quotes is looked up in."""
        return flatten(self.asked)

    @cached_property
    def flat_windows(self) -> frozenset[str]:
        """Every QUOTED_LINE-character stretch of `flat`: a line's first characters must be one of them
        before the line is looked up whole (a set lookup, not a scan of the report per line)."""
        flat = self.flat
        return frozenset(flat[i : i + QUOTED_LINE] for i in range(len(flat) - QUOTED_LINE + 1))



def title_of(query: str) -> str | None:
    """The first non-empty line of a question of several lines; None for a one-line question."""
    lines = [line for line in query.splitlines() if line.strip()]
    return lines[0] if len(lines) > 1 else None


def named_symbols(query: str) -> frozenset[str]:
    """The definitions a question names as code: dotted names (`Blueprint.register`), and identifiers
    in code context, shaped like code (`send_file`, `FlaskClient`) or declared (`class Config`)."""
    clues = extract_clues(query)
    return frozenset({*clues.modules, *clues.identifiers})


def only_a_name(query: str) -> bool:
    """Whether the question is a definition's name and nothing else (`Blueprint.register`, `def
    url_for`, `send_file()`): a request to see where it starts."""
    return _ONLY_A_NAME.fullmatch(query) is not None


def line_mentions(query: str) -> tuple[tuple[str, int], ...]:
    """(path, line) of each line of a file the question names (`src/app.py:12`, `app.py#L12`, `app.py
    line 12`), in order."""
    out: list[tuple[str, int]] = []
    for run in _PATH_RUN.finditer(query):
        path = _PATH.match(run.group(0))
        if path and path.end() == len(run.group(0)) and (line := _LINE_AFTER_PATH.match(query, run.end())):
            number = next(g for g in line.groups() if g is not None)
            out.append((path.group(0).replace("\\", "/").removeprefix("./"), int(number)))
    return tuple(out)


class Frame(NamedTuple):
    """One frame of a quoted Python traceback (Python's, pytest's or IPython's shape): its file, its
    function and `source`, the line of code printed for it (stripped; None when there is none)."""

    path: str
    function: str
    source: str | None = None


def traceback_frames(query: str) -> tuple[Frame, ...]:
    """Every Python traceback frame the question quotes, outermost first (`File
    "/site-packages/pkg/mod.py", line 12, in parse`, and pytest's and IPython's shapes of it);
    module-level frames are left out."""
    found = [(m.start(), _frame(m.group(1), m.group(2), m.group(3))) for m in _FRAME.finditer(query)]
    found += [(m.start(), _frame(m.group(1), m.group(2), m.group(3))) for m in _PYTEST_FRAME.finditer(query)]
    ipython = list(_IPYTHON_FRAME.finditer(query))
    for m, after in zip(ipython, [*(n.start() for n in ipython[1:]), len(query)]):
        arrow = _IPYTHON_ARROW.search(query, m.end(), after)
        found.append((m.start(), _frame(m.group(1), m.group(2), arrow.group(1) if arrow else None)))
    return tuple(frame for _, frame in sorted(found, key=lambda item: item[0]))


def _frame(path: str, function: str, source: str | None) -> Frame:
    return Frame(path.replace("\\", "/"), function, source.strip() if source and source.strip() else None)
