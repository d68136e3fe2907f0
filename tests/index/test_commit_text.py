"""index/history/commit_text.py: every file's commit text, ranked against a question."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from index.history.commit_text import CommitText
from index.history.commits import History, update_history
from index.store.lexical import CorpusBuilder
from index.tokenize import terms
from tests.support.git import printer_repo

MESSAGES = [
    ("Fix blueprint names that contain a dot", ("src/blueprints.py",)),
    ("Raise an error for a dotted blueprint name", ("src/blueprints.py", "tests/test_blueprints.py")),
    ("Speed up the helpers", ("src/helpers.py",)),
]


def commit_text(messages: list[tuple[str, tuple[str, ...]]] = MESSAGES) -> CommitText:
    builder = CorpusBuilder()
    for message, _ in messages:
        builder.add_terms(terms(message))
    return CommitText.build([files for _, files in messages], builder.build())


def test_the_file_whose_past_commits_speak_of_the_question_scores_highest() -> None:
    text = commit_text()
    numbers = {"src/helpers.py": 0, "src/blueprints.py": 1, "src/app.py": 2, "tests/test_blueprints.py": 3}
    scores = text.scores(terms("blueprint name with a dot is accepted"), numbers, len(numbers))
    assert int(np.argmax(scores)) == 1
    assert scores[1] > scores[3] > 0  # two commits on blueprints.py speak of it, one on the test
    assert scores[0] == 0 and scores[2] == 0  # helpers' commit says none of it; no commit touched app.py


def test_files_the_index_no_longer_has_are_left_out_and_empty_input_scores_nothing() -> None:
    text = commit_text()
    numbers = {"src/helpers.py": 0}  # blueprints.py was deleted since its commits
    assert text.scores(terms("blueprint dot"), numbers, 1).tolist() == [0.0]
    assert text.scores([], numbers, 1).tolist() == [0.0]
    assert commit_text([]).scores(terms("blueprint"), numbers, 1).tolist() == [0.0]


def test_a_history_builds_its_commit_text_from_the_stored_messages_bodies_included(tmp_path: Path) -> None:
    update_history(printer_repo(tmp_path / "repo"), tmp_path / "idx")
    history = History.load(tmp_path / "idx")
    assert history is not None
    text = history.commit_text()
    assert text is not None and set(text.paths) == {"pkg/printer.py", "pkg/parser.py"}
    assert history.commit_text() is text  # built once
    numbers = {"pkg/parser.py": 0, "pkg/printer.py": 1}
    scores = text.scores(terms("brackets are lost"), numbers, 2)  # words of a commit body only
    assert scores[1] > 0 and scores[0] == 0
