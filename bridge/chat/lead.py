"""How a small model's answer opens: `NAME` is, NAME its pick under a grammar among the best snippet's names.

Asked which function does something, the bundled SmolLM2-135M named one in no snippet, or the wrong one,
more often than the right one. Its answer now opens with one of the names the best-ranked snippet defines
(or, for lines in the middle of one definition, that definition's), a grammar allowing only those names, so
the name is always real; " is" follows and its free text goes on from there. bench/answer_bench.py, answers
naming what they should: 31 questions 9.3 -> 16.0 (mean of seeds 0-2; the form was chosen on them), ten
unseen ones 2.0 -> 3.0. Offered every snippet's names the model picked worse (11 vs 16 of 31); without " is"
more answers stopped at the name (bench/DECISIONS.md).
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


def lead_names(code: str, symbol: str | None = None) -> tuple[str, ...]:
    """The names an answer about `code` may open with: what it defines, less `__dunder__` methods
    (an answer opening with `__init__` names nothing) unless they are all it defines; for lines inside
    one definition that define nothing themselves (a function's middle), that definition's `symbol`."""
    names = defined_names(code)
    if not names and symbol:
        return (symbol.rsplit(".", 1)[-1],)
    return tuple(n for n in names if not (n.startswith("__") and n.endswith("__"))) or names


def lead_text(name: str) -> str:
    """How the answer opens once the model has picked `name`."""
    return f"`{name}` is"
