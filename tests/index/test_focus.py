"""The focus step (index/rank/focus.py): a long report is searched without its pasted output."""

from __future__ import annotations

from pathlib import Path

import pytest

from index.build.pipeline import BuildOptions, build_index
from index.rank.focus import FOCUS_BYTES, focus, focus_report
from index.search.probe import file_ranking
from index.search.searcher import Searcher

PIP_LIST = "\n".join(["Package                       Version", "----------------------------- -------"]
                     + [f"settings-tool-{i:03d}             1.{i}.0" for i in range(120)]
                     + ["toml-settings-loader 2.0.1", "config-settings==0.3.2"])
PYTEST_RUN = """============================= test session starts ==============================
platform linux -- Python 3.11.4, pytest-7.4.0, pluggy-1.2.0
rootdir: /home/me/project
plugins: settings-1.0
collected 3 items

tests/test_config.py ..F                                                  [100%]
tests/test_config.py::test_settings PASSED
=================================== FAILURES ==================================="""
DIAGNOSTICS = "\n".join(f"src/app/settings_{i}.py:{i}:0: C0103: Attribute name \"settings_{i}\" doesn't conform"
                        for i in range(40))
LOGS = "2024-05-01 12:00:01,123 INFO settings reloaded\n[2024-05-01T12:00:02] DEBUG settings cache warm"
TEMPLATE = "<!--\nThanks for reporting! Please fill in the settings of your environment.\n-->\n- [x] minimal example"
TRACEBACK = """Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/pkg/server.py", line 3, in serve
    return port
ValueError: port must be positive"""


def report(*parts: str) -> str:
    return "\n".join(["The server ignores the port it is given", "Calling `serve(8080)` serves on port 80.", *parts])


def test_a_short_question_is_searched_exactly_as_typed():
    question = report(PIP_LIST[:200])
    assert len(question.encode()) <= FOCUS_BYTES
    assert focus(question) == question


def test_package_lists_pytest_output_diagnostics_logs_and_template_text_are_dropped_from_a_long_report():
    focused = focus_report(report(TEMPLATE, PIP_LIST, PYTEST_RUN, DIAGNOSTICS, LOGS, TRACEBACK))
    assert "settings" not in focused.text.lower()
    assert {"packages", "pytest", "rules", "diagnostics", "logs", "checklist", "comments"} <= focused.dropped.keys()
    assert focused.dropped["packages"] == 123  # the header and the 122 rows


def test_the_title_prose_code_and_traceback_of_a_long_report_stay_in_order():
    text = focus(report(PIP_LIST, TRACEBACK, "    return port  # the code the reporter ran"))
    lines = text.splitlines()
    assert lines[:2] == ["The server ignores the port it is given", "Calling `serve(8080)` serves on port 80."]
    assert TRACEBACK in text and "    return port  # the code the reporter ran" in text


def test_code_lines_that_look_like_versions_are_kept():
    text = focus(report(PIP_LIST, "def scale(x):", "    return 2.5", "    return 1.5 * x"))
    assert "    return 2.5\n    return 1.5 * x" in text


def test_a_report_that_would_keep_only_its_title_is_searched_whole():
    question = "\n".join(["numpy 1.24.1"] * 500)
    assert focus(question) == question
    titled = "\n".join(["", "pip list", *["numpy 1.24.1"] * 500])
    assert focus(titled) == titled


def test_the_title_is_the_first_line_with_text_even_after_blank_lines_and_template_comments():
    text = focus("\n".join(["<!-- describe the bug -->", "", "numpy 1.24.1 breaks on import", TRACEBACK, PIP_LIST]))
    assert text.strip().splitlines()[0] == "numpy 1.24.1 breaks on import"
    assert "settings" not in text


def make_repo(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "config.py").write_text(
        "def load_settings(path):\n    '''Read the settings of a tool from a TOML file: settings, config, loader.'''\n"
        "    return parse_toml(path)\n"
    )
    (root / "pkg" / "server.py").write_text("def serve(port):\n    '''Serve HTTP on the given port.'''\n    return port\n")
    return root


@pytest.fixture(scope="module")
def searcher(tmp_path_factory: pytest.TempPathFactory) -> Searcher:
    root = make_repo(tmp_path_factory.mktemp("repo"))
    index_dir = root.parent / "index"
    build_index(root, index_dir, BuildOptions(embedder=None))
    return Searcher(index_dir)


def test_a_long_report_finds_the_file_its_title_and_code_name_not_the_one_its_package_list_repeats(searcher: Searcher):
    question = report(PIP_LIST, PYTEST_RUN)
    assert len(question.encode()) > FOCUS_BYTES
    # BM25 over the whole report would put config.py first: its package list says "settings" 250 times
    assert [h.path for h in searcher.search(question, k=2, mode="lexical").hits] == ["pkg/server.py"]
    assert [path for path, _ in file_ranking(searcher, question)] == ["pkg/server.py"]
    assert searcher.search(question, k=1).query == question  # the result echoes what was asked
