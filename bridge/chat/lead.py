"""How a small model's answer opens: a name the best snippet defines, picked by the model under a grammar.

Asked which function does something, the bundled SmolLM2-135M named one in no snippet, or the wrong one,
more often than the right one. Its answer now opens with one of the names the best-ranked snippet defines
(the model's pick under a grammar that allows only those names, so it is always real), and its free text
continues from it. On bench/answer_bench.py's 31 questions, answers naming what they should: 12 -> 16 of
31 (seed 0); offered every snippet's names instead, the model picked worse (11 of 31): the best snippet is
where retrieval is strongest (bench/RESULTS.md).
"""

from __future__ import annotations

import re

__all__ = ["defined_names", "lead_names", "lead_text"]

# A definition's name in the languages the index chunks: Python, JS/TS, Go, Rust, and Java- or C#-style
# types. The keyword must open the line (after modifiers), so "class" inside prose or a string is not one.
_DEFINITION = re.compile(
    r"^[ \t]*(?:(?:export|default|pub(?:\([^)]*\))?|public|private|protected|static|abstract|final|async|unsafe)\s+)*"
    r"(?:def|class|function|func|fn|struct|enum|trait|interface|type|impl)\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)",
    re.MULTILINE,
)


def defined_names(code: str) -> tuple[str, ...]:
    """The names `code` defines, in line order, each once."""
    return tuple(dict.fromkeys(m.group(1) for m in _DEFINITION.finditer(code)))


def lead_names(code: str) -> tuple[str, ...]:
    """The names an answer about `code` may open with: what it defines, less `__dunder__` methods
    (an answer opening with `__init__` names nothing) unless they are all it defines."""
    names = defined_names(code)
    return tuple(n for n in names if not (n.startswith("__") and n.endswith("__"))) or names


def lead_text(name: str) -> str:
    """How the answer opens once the model has picked `name`."""
    return f"`{name}` is"
