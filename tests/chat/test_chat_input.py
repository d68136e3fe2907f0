"""What one turn of `bridge chat` reads from the terminal (bridge/cli/chat_input.py)."""

from __future__ import annotations

import pytest

from bridge.cli.chat_input import read_turn


class Terminal:
    """Lines as the terminal hands them over; a line whose number is in `ready` is already waiting
    when the one before it has been read (`pasted=N`: lines 1..N, the N after the first)."""

    def __init__(self, *lines: str, pasted: int = 0, ready: set[int] | None = None) -> None:
        self.lines = list(lines)
        self.ready = set(range(1, pasted + 1)) if ready is None else ready
        self.read_count = 0
        self.prompts: list[str] = []
        self.hints = 0

    def read(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.lines:
            raise EOFError
        self.read_count += 1
        return self.lines.pop(0)

    def waiting(self) -> bool:
        return self.read_count in self.ready and bool(self.lines)

    def hint(self) -> None:
        self.hints += 1

    def turn(self) -> str:
        return read_turn(self.read, self.waiting, self.hint)


def test_a_typed_line_is_a_turn_of_its_own() -> None:
    term = Terminal("where is the config parsed?", "next question")
    assert term.turn() == "where is the config parsed?"
    assert term.turn() == "next question"


def test_a_pasted_report_with_blank_lines_is_one_turn_sent_by_an_empty_line() -> None:
    report = ["parse_config drops a key", "", "Steps:", "call it", "", "Expected: all keys"]
    term = Terminal(*report, "", "the next question", pasted=len(report) - 1)
    assert term.turn() == "\n".join(report)
    assert term.hints == 1
    assert term.turn() == "the next question"


def test_a_paste_without_a_final_newline_is_finished_by_the_enter_typed_after_it() -> None:
    # the paste's last line is only handed over once Enter is pressed: it arrives as typed input
    term = Terminal("title of the report", "body line", "last pasted line", "", pasted=1)
    assert term.turn() == "title of the report\nbody line\nlast pasted line"


def test_a_blank_pasted_line_before_an_unfinished_last_line_does_not_send_the_turn() -> None:
    term = Terminal("title", "", "Steps: call it", "", "It raises KeyError.", "", pasted=3)
    assert term.turn() == "title\n\nSteps: call it\n\nIt raises KeyError."
    assert term.hints == 1


def test_a_paste_that_arrives_in_pieces_is_still_one_turn() -> None:
    # over SSH: two lines, a pause, then the rest, which starts with a blank line
    term = Terminal("title", "first body line", "", "more body", "last body line", "", ready={1, 3, 4})
    assert term.turn() == "title\nfirst body line\n\nmore body\nlast body line"


def test_a_paste_whose_first_line_is_a_docstring_is_a_paste_not_a_block() -> None:
    term = Terminal('"""Test module reproducing the crash."""', "import pytest", "def test_it(): pass", "",
                    pasted=2)
    assert term.turn() == '"""Test module reproducing the crash."""\nimport pytest\ndef test_it(): pass'


def test_a_docstring_pasted_into_a_typed_block_does_not_close_it() -> None:
    term = Terminal('"""', "def f():", '    """Doc."""', "    return 1", '"""', ready={2, 3})
    assert term.turn() == 'def f():\n    """Doc."""\n    return 1'


def test_end_of_input_sends_what_was_pasted() -> None:
    term = Terminal("title", "body", pasted=1)
    assert term.turn() == "title\nbody"
    with pytest.raises(EOFError):
        term.turn()


def test_triple_quotes_wrap_lines_typed_by_hand() -> None:
    term = Terminal('"""', "first line", "", "second line", '"""', "after")
    assert term.turn() == "first line\n\nsecond line"
    assert term.prompts[1:] == ["... "] * 4
    assert term.turn() == "after"


def test_triple_quotes_may_open_and_close_on_the_lines_they_share() -> None:
    assert Terminal('"""title', 'body"""').turn() == "title\nbody"
    assert Terminal('"""one line"""').turn() == "one line"
