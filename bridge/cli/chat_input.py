"""One turn of `bridge chat` from the terminal: a typed line, a pasted report, or a block in \"\"\".

A terminal hands a program its input a line at a time, so a bug report pasted at the prompt used to
become one turn per line (a 60-line report: 60 answers). Pasted lines arrive together, faster than
anyone types, so a line with more input already waiting behind it starts a paste: the turn takes
every line that came with it and then whatever is typed, until an empty line is typed (a blank line
of the paste was already waiting when it was read, or has more of the paste right behind it: a
paste over SSH may arrive in pieces). Whatever its first line, a paste is a paste: a pasted
docstring does not open a block. A paste need not end with a newline: the
terminal hands over its last line with the Enter that the user presses anyway (but a paste of two
lines whose second is unfinished is seen as one typed line: nothing is waiting behind the first).
A typed line of three double quotes opens a block that the next line ending in them closes, for
typing several lines by hand (closing quotes with more input behind them are a pasted docstring).
Piped input is not a terminal: there each line is a turn, as before. Ctrl-C drops what was typed.
"""

from __future__ import annotations

import contextlib
import select
import sys
from collections.abc import Callable

__all__ = ["BLOCK", "PASTE_WAIT_S", "line_editing", "pasted_more", "read_turn"]

BLOCK = '"""'
PASTE_WAIT_S = 0.03  # the rest of a paste is in the terminal's buffer within this; no one types a line so fast

Read = Callable[[str], str]  # prompt -> line without its newline; EOFError at end of input


def read_turn(read: Read, waiting: Callable[[], bool], on_paste: Callable[[], None] = lambda: None) -> str:
    """The text of one turn (EOFError when the input ends before a turn starts). `waiting` says
    whether more input is already there; `on_paste` is called once a paste has been taken in,
    to tell the user how to send it."""
    first = read("> ")
    if waiting():  # a paste, whatever its first line says (a docstring may open it)
        return _paste(first, read, waiting, on_paste)
    if first.strip().startswith(BLOCK):
        return _block(first.strip()[len(BLOCK):], read, waiting)
    return first


def _paste(first: str, read: Read, waiting: Callable[[], bool], on_paste: Callable[[], None]) -> str:
    lines = [first]
    told = False
    while True:
        pasted = waiting()  # this line was there before we asked: part of the paste
        if not pasted and not told:
            on_paste()
            told = True
        try:
            line = read("")
        except EOFError:
            break
        # An empty line sends the turn when it was typed: not waiting before it was read, and
        # nothing behind it (a paste delivered in pieces may resume with a blank line).
        if not line.strip() and not pasted and not waiting():
            break
        lines.append(line)
    return "\n".join(lines)


def _block(opening: str, read: Read, waiting: Callable[[], bool]) -> str:
    if opening.rstrip().endswith(BLOCK):  # three quotes, one line, three quotes
        return opening.rstrip()[: -len(BLOCK)]
    lines = [opening] if opening.strip() else []
    while True:
        try:
            line = read("... ")
        except EOFError:
            break
        # Closing quotes with more input right behind them are a pasted docstring, not the end.
        if line.rstrip().endswith(BLOCK) and not waiting():
            last = line.rstrip()[: -len(BLOCK)]
            if last.strip():
                lines.append(last)
            break
        lines.append(line)
    return "\n".join(lines)


def line_editing() -> None:
    """Load readline where there is one: line editing and history, and no cut at 4 KB (the kernel's
    line-at-a-time input hands over at most 4,095 bytes of a line; readline reads the keys itself)."""
    with contextlib.suppress(ImportError):  # not on Windows
        import readline  # noqa: F401


def pasted_more() -> bool:
    """True when standard input is a terminal with more input already waiting."""
    if not sys.stdin.isatty():
        return False
    ready, _, _ = select.select([sys.stdin], [], [], PASTE_WAIT_S)
    return bool(ready)
