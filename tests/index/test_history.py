"""index/history/commits.py: past commits like the question vote for the files they touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from index.build.pipeline import BuildOptions, build_index
from index.history.commits import History, LiveHistory, update_from_git, update_history
from index.history.git_log import MAX_FILES
from index.tokenize import terms
from tests.support.git import commit, git, printer_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return printer_repo(tmp_path / "repo")


def _similar_subjects(history: History, query: str) -> list[str]:
    return [history.commits[i].subject for i, _ in history.similar(terms(query))]


def test_commits_like_the_question_vote_for_the_files_they_touched(repo: Path, tmp_path: Path) -> None:
    report = update_history(repo, tmp_path / "idx")
    history = History.load(tmp_path / "idx")
    assert report.commits == 3 and history is not None
    votes = history.votes(terms("nested matrices print without brackets"))
    assert set(votes) == {"pkg/printer.py"}
    assert history.describe(votes["pkg/printer.py"]).startswith("1 similar past commit: ")
    assert "Fix pretty printing of nested matrices" in history.describe(votes["pkg/printer.py"])


def test_evidence_of_more_commits_than_it_names_says_it_names_the_best(repo: Path, tmp_path: Path) -> None:
    update_history(repo, tmp_path / "idx")
    history = History.load(tmp_path / "idx")
    assert history is not None
    line = history.describe([(0, 0.2), (1, 0.9), (2, 0.5)], shown=2)
    assert line.startswith("3 similar past commits, the best 2: ")
    assert line.count(";") == 1 and history.commits[1].subject in line.split(";")[0]


def test_a_reindex_reads_only_the_new_commits(repo: Path, tmp_path: Path) -> None:
    update_history(repo, tmp_path / "idx")
    commit(repo, {"pkg/parser.py": "def parse(s):\n    return s.strip()\n"}, "Strip whitespace in the parser")
    report = update_history(repo, tmp_path / "idx")
    assert (report.commits, report.new_commits) == (4, 1)
    history = History.load(tmp_path / "idx")
    assert history is not None
    assert _similar_subjects(history, "parser whitespace")[0] == "Strip whitespace in the parser"
    assert _similar_subjects(history, "nested matrices") == ["Fix pretty printing of nested matrices"]


def test_history_at_an_old_commit_holds_none_of_the_later_ones(repo: Path, tmp_path: Path) -> None:
    old = git(repo, "rev-parse", "HEAD~1").strip()
    git_dir = Path(git(repo, "rev-parse", "--absolute-git-dir").strip())
    update_from_git(git_dir, old, tmp_path / "idx")
    history = History.load(tmp_path / "idx")
    assert history is not None
    assert [c.subject for c in history.commits] == ["Add the parser", "Add the pretty printer"]


def test_mass_changes_and_merges_are_left_out(repo: Path, tmp_path: Path) -> None:
    commit(repo, {f"gen/f{i}.py": f"x = {i}\n" for i in range(MAX_FILES + 1)}, "Reformat everything")
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, {"pkg/side.py": "y = 1\n"}, "Side work")
    git(repo, "checkout", "-q", "-")
    commit(repo, {"pkg/main.py": "z = 1\n"}, "Main work")
    git(repo, "merge", "-q", "--no-edit", "side")
    update_history(repo, tmp_path / "idx")
    history = History.load(tmp_path / "idx")
    assert history is not None
    subjects = {c.subject for c in history.commits}
    assert "Reformat everything" not in subjects and not any(s.startswith("Merge") for s in subjects)
    assert {"Side work", "Main work"} <= subjects


def test_an_index_of_a_subfolder_sees_paths_relative_to_it(repo: Path, tmp_path: Path) -> None:
    update_history(repo / "pkg", tmp_path / "idx")
    history = History.load(tmp_path / "idx")
    assert history is not None and history.commits[0].files == ("printer.py",)


def test_outside_git_or_with_no_history_there_is_none(repo: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.py").write_text("a = 1\n")
    assert update_history(plain, tmp_path / "idx1").head is None and History.load(tmp_path / "idx1") is None
    build_index(repo, tmp_path / "idx2", BuildOptions(embedder=None))
    assert History.load(tmp_path / "idx2") is not None
    build_index(repo, tmp_path / "idx2", BuildOptions(embedder=None, history=False))
    assert History.load(tmp_path / "idx2") is None


def test_a_live_history_reloads_after_a_reindex_and_is_none_without_one(repo: Path, tmp_path: Path) -> None:
    live = LiveHistory(tmp_path / "idx")
    assert live.get() is None
    update_history(repo, tmp_path / "idx")
    first = live.get()
    assert first is not None and len(first.commits) == 3 and live.get() is first
    commit(repo, {"pkg/parser.py": "def parse(s):\n    return s.strip()\n"}, "Strip whitespace in the parser")
    update_history(repo, tmp_path / "idx")
    again = live.get()
    assert again is not None and len(again.commits) == 4


def test_commits_made_before_a_file_was_renamed_vote_for_it_under_its_new_name(repo: Path, tmp_path: Path) -> None:
    git(repo, "mv", "pkg", "src")
    git(repo, "commit", "-q", "-m", "Move the package to src")
    update_history(repo, tmp_path / "idx")
    history = History.load(tmp_path / "idx")
    assert history is not None
    assert {f for c in history.commits for f in c.files} == {"src/printer.py", "src/parser.py"}
    assert set(history.votes(terms("nested matrices print without brackets"))) == {"src/printer.py"}


def test_a_reindex_renames_the_paths_of_the_commits_it_had_already_read(repo: Path, tmp_path: Path) -> None:
    update_history(repo, tmp_path / "idx")
    git(repo, "mv", "pkg/printer.py", "pkg/pretty.py")
    git(repo, "commit", "-q", "-m", "Rename the printer")
    commit(repo, {"pkg/printer.py": "PRINTER = 1\n"}, "A new module under the old name")
    report = update_history(repo, tmp_path / "idx")
    history = History.load(tmp_path / "idx")
    assert report.new_commits == 2 and history is not None
    by_subject = {c.subject: c.files for c in history.commits}
    assert by_subject["Fix pretty printing of nested matrices"] == ("pkg/pretty.py",)
    assert by_subject["A new module under the old name"] == ("pkg/printer.py",)  # not the renamed file


def test_a_history_written_by_an_earlier_version_is_read_again(repo: Path, tmp_path: Path) -> None:
    update_history(repo, tmp_path / "idx")
    current = tmp_path / "idx" / "history" / (tmp_path / "idx" / "history" / "CURRENT").read_text().strip()
    meta = json.loads((current / "commits.json").read_text())
    meta["settings"]["format"] = 1
    (current / "commits.json").write_text(json.dumps(meta))
    assert History.load(tmp_path / "idx") is None
    assert update_history(repo, tmp_path / "idx").new_commits == 3
    assert History.load(tmp_path / "idx") is not None
