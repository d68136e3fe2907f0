"""bench/nl_bench.py: the bridge questions read the code they were written against, and a stale
gold file stops the run instead of counting as a miss."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench.nl_bench import BRIDGE_COMMIT, REPO, BenchError, check_gold, index_selection, installed_package, load_sets, pinned_checkout
from index.types import Selection
from tests.support.git import commit, git, printer_repo


def test_a_pinned_checkout_holds_the_commit_and_only_its_ancestors(tmp_path: Path) -> None:
    repo = printer_repo(tmp_path / "repo")
    first = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    clone = pinned_checkout(repo, first, tmp_path / "pinned")
    assert git(clone, "rev-parse", "HEAD").strip() == first
    assert git(clone, "rev-list", "--count", "HEAD").strip() == "1"
    assert sorted(p.name for p in (clone / "pkg").iterdir()) == ["printer.py"]


def test_a_pinned_checkout_is_reused_at_the_same_commit_and_replaced_at_another(tmp_path: Path) -> None:
    repo = printer_repo(tmp_path / "repo")
    head = git(repo, "rev-parse", "HEAD").strip()
    clone = pinned_checkout(repo, head, tmp_path / "pinned")
    (clone / "marker").write_text("kept")
    assert (pinned_checkout(repo, head, clone) / "marker").is_file()
    newer = commit(repo, {"pkg/extra.py": "X = 1\n"}, "Add extra")
    again = pinned_checkout(repo, newer, clone)
    assert not (again / "marker").exists() and (again / "pkg" / "extra.py").is_file()


def test_an_unknown_commit_is_a_one_line_error_that_says_what_to_do(tmp_path: Path) -> None:
    repo = printer_repo(tmp_path / "repo")
    with pytest.raises(BenchError, match="full history, or --root bridge=PATH"):
        pinned_checkout(repo, "0" * 40, tmp_path / "pinned")


def test_a_gold_file_the_codebase_lacks_is_an_error_naming_it() -> None:
    questions = [{"codebase": "demo", "gold_files": ["pkg/a.py"]}, {"codebase": "demo", "gold_files": ["pkg/gone.py"]},
                 {"codebase": "other", "gold_files": ["elsewhere.py"]}]
    check_gold(questions, "demo", {"pkg/a.py", "pkg/gone.py"})
    with pytest.raises(BenchError, match="demo lacks gold file\\(s\\) pkg/gone.py"):
        check_gold(questions, "demo", {"pkg/a.py"})


def test_a_codebase_without_a_root_is_the_installed_package_of_that_name() -> None:
    assert (installed_package("json") / "decoder.py").is_file()
    assert (installed_package("httpx") / "_client.py").is_file()


def test_a_codebase_that_is_no_installed_package_is_an_error_that_says_what_to_do() -> None:
    for name in ("no_such_package_here", "json.decoder", "not a name"):
        with pytest.raises(BenchError, match=f"install it, or point --root {name}=PATH"):
            installed_package(name)


def test_every_bridge_gold_file_exists_at_the_pinned_commit() -> None:
    listed = subprocess.run(["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", BRIDGE_COMMIT],
                            capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("a shallow clone: the pinned commit is not in this checkout's history")
    tree = set(listed.stdout.split())
    lines = (REPO / "bench" / "data" / "nl_questions.jsonl").read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line) for line in lines if line.strip()]
    check_gold(questions, "bridge", tree)


@pytest.mark.parametrize("name", ["nl_questions.jsonl", "nl_questions_2.jsonl", "nl_questions_3.jsonl", "nl_questions_4.jsonl"])
def test_every_natural_language_set_names_one_readable_codebase_and_python_gold_files_per_question(name: str) -> None:
    lines = (REPO / "bench" / "data" / name).read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line) for line in lines if line.strip()]
    assert len(questions) >= 60
    assert len({q["id"] for q in questions}) == len(questions)
    for q in questions:
        assert q["id"].startswith(q["codebase"] + "-") and q["query"].strip()
        assert q["gold_files"] and all(g.endswith(".py") and not g.startswith("/") for g in q["gold_files"])
    for codebase in {q["codebase"] for q in questions} - {"bridge"}:
        assert installed_package(codebase).is_dir()


def test_several_sets_are_read_as_one_and_an_id_asked_twice_is_an_error(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text('{"id": "x-1", "codebase": "x", "query": "q", "gold_files": ["a.py"]}\n\n', encoding="utf-8")
    second.write_text('{"id": "y-1", "codebase": "y", "query": "q", "gold_files": ["b.py"]}\n', encoding="utf-8")
    assert [q["id"] for q in load_sets([first, second])] == ["x-1", "y-1"]
    with pytest.raises(BenchError, match="x-1 asked more than once"):
        load_sets([first, second, first])


def test_the_questions_files_inside_a_codebase_are_left_out_of_its_index(tmp_path: Path) -> None:
    (tmp_path / "sets").mkdir()
    inside, outside = tmp_path / "sets" / "q.jsonl", REPO / "bench" / "data" / "nl_questions.jsonl"
    assert index_selection("demo", tmp_path, [inside, outside]).exclude == ("sets/q.jsonl", "bench/out/")
    assert index_selection("demo", tmp_path / "sets", [outside]) == Selection()
    assert "bench/data/nl_questions.jsonl" in index_selection("bridge", tmp_path, [outside]).exclude
