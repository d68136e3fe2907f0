"""A file a pasted traceback walks through answers with the function the traceback names."""

from __future__ import annotations

from pathlib import Path

from support.small_index import small_index

from index.rank.question import Frame, traceback_frames

SESSIONS = '''"""Sessions."""


def redirect_target(resp):
    """Where a redirect response points: its location header, decoded."""
    location = resp.headers["location"]
    header = location.encode("latin1")
    return header.decode("utf8")


def send_request(method, url, headers):
    """Send one request."""
    prepared = prepare(method, url)
    return transport(prepared)
'''

REPORT = """Header values break redirects

A location header with latin1 bytes is decoded wrong: the redirect target's location header,
encoded as latin1 and decoded as utf8, loses the header. Redirect location header decode.

Traceback (most recent call last):
  File "/home/me/app.py", line 4, in <module>
    get(url)
  File "/usr/lib/python3/site-packages/pkg/sessions.py", line 12, in send_request
ValueError: invalid header value
"""


def test_traceback_frames_are_read_outermost_first_without_module_frames() -> None:
    assert traceback_frames(REPORT) == (Frame("/usr/lib/python3/site-packages/pkg/sessions.py", "send_request"),)
    windows = 'File "C:\\py\\pkg\\api.py", line 3, in get\n  File "C:\\py\\pkg\\sessions.py", line 9, in send\n'
    assert traceback_frames(windows) == (Frame("C:/py/pkg/api.py", "get"), Frame("C:/py/pkg/sessions.py", "send"))


def test_a_frame_keeps_the_line_of_code_printed_under_it() -> None:
    quoted = (
        'Traceback (most recent call last):\n'
        '  File "/srv/app.py", line 4, in main\n'
        '    run(config)\n'
        '  File "/venv/pkg/runner.py", line 88, in run\n'
        '    raise ValueError(\n'
        '    ^^^^^^^^^^^^^^^^^\n'
        'ValueError: no such stage\n'
    )
    assert traceback_frames(quoted) == (
        Frame("/srv/app.py", "main", "run(config)"), Frame("/venv/pkg/runner.py", "run", "raise ValueError("),
    )


def test_the_hit_of_a_file_a_traceback_names_is_the_function_it_names(tmp_path: Path) -> None:
    searcher = small_index(tmp_path, {"pkg/sessions.py": SESSIONS, "pkg/other.py": "def unrelated():\n    return 1\n"}, 30)
    without = searcher.search(REPORT.split("Traceback")[0], k=1, mode="hybrid").hits[0]
    assert without.path == "pkg/sessions.py" and without.symbol == "redirect_target"
    hit = searcher.search(REPORT, k=1, mode="hybrid").hits[0]
    assert hit.path == "pkg/sessions.py" and hit.symbol == "send_request"


def test_pytest_frames_are_read_with_the_line_under_them() -> None:
    short = (
        "sympy/core/expr.py:124: in __eq__\r\n"
        "    other = sympify(other)\r\n"
        "sympy/core/sympify.py:385: in sympify\r\n"
        "    expr = parse_expr(a)\r\n"
        "E   AttributeError: 'Symbol' object has no attribute 'y'\r\n"
    )
    assert traceback_frames(short) == (
        Frame("sympy/core/expr.py", "__eq__", "other = sympify(other)"),
        Frame("sympy/core/sympify.py", "sympify", "expr = parse_expr(a)"),
    )


def test_ipython_frames_are_read_with_the_line_their_arrow_marks() -> None:
    notebook = (
        "File ~/code/seaborn/seaborn/_core/plot.py:841, in Plot._plot(self, pyplot)\n"
        "    838 plotter._compute_stats(self, layers)\n"
        "--> 841 plotter._setup_scales(self, common, layers)\n"
        "    842 \n"
        "~/lib/python3.8/site-packages/seaborn/relational.py in plot(self, ax, kws)\n"
        "    584         if \"hue\" in self.variables:\n"
        "--> 585             c = self._hue_map(data[\"hue\"])\n"
    )
    assert traceback_frames(notebook) == (
        Frame("~/code/seaborn/seaborn/_core/plot.py", "_plot", "plotter._setup_scales(self, common, layers)"),
        Frame("~/lib/python3.8/site-packages/seaborn/relational.py", "plot", 'c = self._hue_map(data["hue"])'),
    )


RUNNER = (
    '"""Stages."""\n\n\n'
    "def run(config):\n"
    '    """Run every stage of the config in order.\n\n'
    + "".join(f"    A stage named in the config runs after the stages before it, step {i}.\n" for i in range(40))
    + '    """\n'
    "    for stage in config.stages:\n"
    "        if stage.name not in KNOWN:\n"
    "            raise ValueError(\n"
    '                f"unknown: {stage.name!r}"\n'
    "            )\n"
    "        stage.run()\n"
)

RUNNER_REPORT = """A stage named in the config does not run

A stage named in the config is refused although the stages before it run in order.

Traceback (most recent call last):
  File "/venv/pkg/runner.py", line 48, in run
    raise ValueError(
"""


def test_of_a_long_function_the_hit_is_the_chunk_holding_the_quoted_line(tmp_path: Path) -> None:
    searcher = small_index(tmp_path, {"pkg/runner.py": RUNNER}, 60)
    chunks = searcher.search("stage config run", k=10, mode="lexical").hits
    assert len({(h.start_line, h.end_line) for h in chunks if h.symbol == "run"}) > 1  # the function is split
    hit = searcher.search(RUNNER_REPORT, k=1, mode="hybrid").hits[0]
    assert hit.symbol == "run" and "raise ValueError(" in hit.text
    without_line = searcher.search(RUNNER_REPORT.replace("    raise ValueError(\n", ""), k=1, mode="hybrid").hits[0]
    assert "raise ValueError(" not in without_line.text  # the report's words alone pick the docstring


def test_under_a_token_budget_the_hit_keeps_the_lines_around_the_quoted_line(tmp_path: Path) -> None:
    searcher = small_index(tmp_path, {"pkg/runner.py": RUNNER}, 60)
    whole = searcher.search(RUNNER_REPORT, k=1, mode="hybrid").hits[0]
    cut = searcher.search(RUNNER_REPORT, k=1, mode="hybrid", max_tokens=12)
    assert cut.truncated and cut.hits[0].tokens <= 12
    hit = cut.hits[0]
    assert "raise ValueError(" in hit.text and whole.start_line < hit.start_line <= hit.end_line < whole.end_line
    assert hit.text.split("\n") == whole.text.split("\n")[hit.start_line - whole.start_line : hit.end_line - whole.start_line + 1]
    no_line = searcher.search(RUNNER_REPORT.replace("    raise ValueError(\n", ""), k=1, mode="hybrid", max_tokens=12)
    assert "raise ValueError(" not in no_line.hits[0].text  # without a quoted line: the chunk's first lines
