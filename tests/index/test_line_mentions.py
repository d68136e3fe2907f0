"""A one-line question that names a line of a file (`PATH:LINE`) answers with the chunk holding that line."""

from __future__ import annotations

from pathlib import Path

from index.build import BuildOptions, build_index
from index.question import line_mentions
from index.search import Searcher

SETTINGS = "".join(f"def option_{i}(value):\n    '''Option {i} of the settings.'''\n    return value + {i}\n\n\n" for i in range(30))


def test_lines_are_read_after_a_path_as_compilers_links_and_people_write_them() -> None:
    assert line_mentions("why does src/app/settings.py:42 fail") == (("src/app/settings.py", 42),)
    assert line_mentions("see https://example.org/o/r/blob/main/app/settings.py#L7") == (
        ("//example.org/o/r/blob/main/app/settings.py", 7),
    )
    assert line_mentions("settings.py:12:5: E501 line too long; ./util.py, line 3") == (
        ("settings.py", 12), ("util.py", 3),
    )
    assert line_mentions('File "settings.py", line 3, in f') == ()  # a traceback frame: read as a frame
    assert line_mentions("settings.py has no line here") == ()
    assert line_mentions("x" * 70_000 + ".py:1") == (("x" * 70_000 + ".py", 1),)


def test_a_one_line_question_naming_a_line_gets_the_chunk_holding_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "settings.py").write_text(SETTINGS)
    (repo / "app" / "other.py").write_text("def unrelated():\n    return 1\n")
    build_index(repo, tmp_path / "idx", BuildOptions(embedder=None, target_tokens=40, max_tokens=80))
    searcher = Searcher(tmp_path / "idx")
    line = 6 * 20 + 3  # `return value + 20`
    hit = searcher.search(f"what does app/settings.py:{line} return for the option value", k=1).hits[0]
    assert hit.path == "app/settings.py" and hit.start_line <= line <= hit.end_line
    words_alone = searcher.search("what does app/settings.py return for the option value", k=1).hits[0]
    assert not words_alone.start_line <= line <= words_alone.end_line
    report = f"Option values are wrong\n\nIn my version app/settings.py:{line} returns the option value plus one."
    in_a_report = searcher.search(report, k=1).hits[0]  # a report's numbers are its reporter's version's
    assert not in_a_report.start_line <= line <= in_a_report.end_line
