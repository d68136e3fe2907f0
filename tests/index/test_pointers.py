"""A one-line question that points into a file, at a line (`PATH:LINE`) or a definition (`Runner.stop`), answers
with that chunk of it rather than the one its words alone would choose."""

from __future__ import annotations

from pathlib import Path

from support.small_index import small_index

from index.build.pipeline import BuildOptions, build_index
from index.rank.question import extract_clues, line_mentions, named_symbols, only_a_name
from index.search.searcher import Searcher

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
    searcher = small_index(tmp_path, {"app/settings.py": SETTINGS, "app/other.py": "def unrelated():\n    return 1\n"}, 40)
    line = 6 * 20 + 3  # `return value + 20`
    hit = searcher.search(f"what does app/settings.py:{line} return for the option value", k=1).hits[0]
    assert hit.path == "app/settings.py" and hit.start_line <= line <= hit.end_line
    words_alone = searcher.search("what does app/settings.py return for the option value", k=1).hits[0]
    assert not words_alone.start_line <= line <= words_alone.end_line
    cut = searcher.search(f"what does app/settings.py:{line} return for the option value", k=1, max_tokens=12)
    assert cut.truncated and cut.hits[0].start_line <= line <= cut.hits[0].end_line  # a budget keeps that line
    report = f"Option values are wrong\n\nIn my version app/settings.py:{line} returns the option value plus one."
    in_a_report = searcher.search(report, k=1).hits[0]  # a report's numbers are its reporter's version's
    assert not in_a_report.start_line <= line <= in_a_report.end_line


RUNNER = (
    "class Runner:\n"
    '    """Runs the jobs of a queue, one worker per job."""\n\n'
    + "".join(
        f'    def step_{i}(self, job):\n        """Stop the job if step {i} fails."""\n        return job.run({i})\n\n'
        for i in range(12)
    )
    + '    def stop(self, job):\n        """Cancel it."""\n        return job.cancel()\n'
)
HELPERS = (
    'def stop(job):\n    """Kill it at once."""\n    return job.kill()\n\n\n'
    'def start(job):\n    """Start a job; the runner can stop the job later."""\n    return job.run(0)\n'
)


def test_a_question_names_definitions_by_their_shape_as_code() -> None:
    assert "Runner.stop" in named_symbols("where does Runner.stop cancel the job")
    assert "Runner" in named_symbols("class Runner")
    assert "send_file" in named_symbols("what does send_file return")
    assert "return" not in named_symbols("what does send_file return")
    assert only_a_name("Runner.stop") and only_a_name("def stop") and only_a_name("`send_file()`")
    assert not only_a_name("where does Runner.stop cancel the job")


def test_a_one_line_question_naming_a_definition_gets_its_chunk(tmp_path: Path) -> None:
    searcher = small_index(tmp_path, {"jobs/runner.py": RUNNER, "jobs/helpers.py": HELPERS}, 40)

    def shown(path: str, query: str) -> str | None:
        return next(h.symbol for h in searcher.search(query, k=3).hits if h.path == path)

    assert shown("jobs/runner.py", "how does the runner fail a step of the job") != "Runner.stop"  # the words alone
    assert shown("jobs/runner.py", "how does Runner.stop fail a step of the job") == "Runner.stop"
    assert shown("jobs/runner.py", "class Runner") == "Runner"
    # `Runner.stop` names a method: the module function `stop` of another file is not it.
    assert shown("jobs/helpers.py", "how does Runner.stop stop the job") == "start"
    assert shown("jobs/helpers.py", "how does stop() stop the job") == "stop"


def test_a_name_declared_in_prose_counts_as_code_when_it_looks_declared() -> None:
    assert "Config" in extract_clues("class Config").identifiers
    assert "url_for" in extract_clues("def url_for").identifiers
    assert extract_clues("a class to hold the settings").identifiers == frozenset()


def test_class_name_finds_the_file_that_defines_it_before_files_that_use_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "models.py").write_text('class Config:\n    """Settings."""\n\n    debug = False\n')
    uses = "".join(f"def load_{i}():\n    # the class Config, loaded\n    return Config()\n\n\n" for i in range(6))
    (repo / "app" / "main.py").write_text("from app.models import Config\n\n\n" + uses)
    build_index(repo, tmp_path / "idx", BuildOptions(embedder=None))
    assert Searcher(tmp_path / "idx").search("class Config", k=2).hits[0].path == "app/models.py"


DECODER = (
    "import re\n\n\n"
    + "".join(f"def scan_{i}(text):\n    return re.match('x{i}', text)\n\n\n" for i in range(6))
    + 'class DecodeError(ValueError):\n    """Raised when a document cannot be read."""\n\n'
    + "    def __init__(self, msg, doc, pos):\n" + "".join(f"        self.part_{i} = doc[{i}]\n" for i in range(8))
    + "".join(f"\n\ndef decode_{i}(text):\n    raise DecodeError('bad', text, {i})\n" for i in range(6))
)


def test_a_class_question_gets_the_chunk_where_the_class_starts_though_it_is_named_for_its_first_method(
    tmp_path: Path,
) -> None:
    searcher = small_index(tmp_path, {"pkg/decoder.py": DECODER}, 60)
    chunks = searcher.search("DecodeError", k=50, mode="lexical").hits
    assert any(h.symbol == "DecodeError.__init__" and "class DecodeError" in h.text for h in chunks)
    class_line = DECODER.splitlines().index("class DecodeError(ValueError):") + 1
    for question in ("class DecodeError", "DecodeError"):
        hit = searcher.search(question, k=1).hits[0]
        assert hit.start_line <= class_line <= hit.end_line, question
