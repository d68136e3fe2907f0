"""A file a pasted traceback walks through answers with the function the traceback names."""

from __future__ import annotations

from pathlib import Path

from index.build import BuildOptions, build_index
from index.question import traceback_frames
from index.search import Searcher

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
    assert traceback_frames(REPORT) == (("/usr/lib/python3/site-packages/pkg/sessions.py", "send_request"),)
    windows = 'File "C:\\py\\pkg\\api.py", line 3, in get\n  File "C:\\py\\pkg\\sessions.py", line 9, in send\n'
    assert traceback_frames(windows) == (("C:/py/pkg/api.py", "get"), ("C:/py/pkg/sessions.py", "send"))


def test_the_hit_of_a_file_a_traceback_names_is_the_function_it_names(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "sessions.py").write_text(SESSIONS)
    (repo / "pkg" / "other.py").write_text("def unrelated():\n    return 1\n")
    build_index(repo, tmp_path / "idx", BuildOptions(embedder=None, target_tokens=30, max_tokens=60))
    searcher = Searcher(tmp_path / "idx")
    without = searcher.search(REPORT.split("Traceback")[0], k=1, mode="hybrid").hits[0]
    assert without.path == "pkg/sessions.py" and without.symbol == "redirect_target"
    hit = searcher.search(REPORT, k=1, mode="hybrid").hits[0]
    assert hit.path == "pkg/sessions.py" and hit.symbol == "send_request"
