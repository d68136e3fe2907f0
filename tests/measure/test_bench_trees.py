"""bench/swebench_trees.py: sync_tree leaves the live folder holding the new tree; the fingerprint reads its code;
the history step fills the kept indexes that lack one, and only those."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.swebench_trees import TreeJob, content_sources, index_fingerprint, missing_history, prepare_history, sync_tree
from index.embed import HashEmbedder
from index.history.commits import History
from index.history.subjects import SubjectEncoder
from tests.support.git import git, printer_repo


def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            out[rel] = path.read_text()
    return out


def test_a_file_that_becomes_a_link_is_replaced_by_the_link(tmp_path: Path) -> None:
    old, new, live = tmp_path / "old", tmp_path / "new", tmp_path / "live"
    old.mkdir(), new.mkdir()
    (old / "CITATION").write_text("cite us\n")
    (new / "docs").mkdir()
    (new / "docs" / "citation.rst").write_text("cite us\n")
    (new / "CITATION").symlink_to("docs/citation.rst")
    sync_tree(old, live)
    sync_tree(new, live)
    assert _snapshot(live) == _snapshot(new)


def test_a_link_that_points_nowhere_becomes_a_file_again(tmp_path: Path) -> None:
    old, new, live = tmp_path / "old", tmp_path / "new", tmp_path / "live"
    old.mkdir(), new.mkdir()
    (old / "CITATION").symlink_to("missing/target")
    (new / "CITATION").write_text("cite us\n")
    sync_tree(old, live)
    assert sync_tree(new, live) == 1
    assert _snapshot(live) == {"CITATION": "cite us\n"}


def test_a_file_that_becomes_a_folder_and_back(tmp_path: Path) -> None:
    a, b, live = tmp_path / "a", tmp_path / "b", tmp_path / "live"
    (a / "pkg").mkdir(parents=True)
    (a / "pkg" / "mod.py").write_text("x = 1\n")
    b.mkdir()
    (b / "pkg").write_text("now a file\n")
    for tree in (a, b, a):
        sync_tree(tree, live)
        assert _snapshot(live) == _snapshot(tree)


def test_unchanged_files_are_not_written(tmp_path: Path) -> None:
    src, live = tmp_path / "src", tmp_path / "live"
    src.mkdir()
    (src / "a.py").write_text("a\n")
    sync_tree(src, live)
    assert sync_tree(src, live) == 0


def test_the_fingerprint_reads_every_index_module_and_package_it_names() -> None:
    import index

    home = Path(index.__file__).parent
    sources = content_sources(home)
    assert "build/pipeline.py" in sources and "embed/minilm.py" in sources and "embed/bulk.py" in sources
    assert all((home / s).is_file() for s in sources)
    assert index_fingerprint("static:a") != index_fingerprint("static:b")  # type: ignore[arg-type]


def test_a_moved_module_stops_the_fingerprint_with_a_message(tmp_path: Path) -> None:
    (tmp_path / "chunk.py").write_text("")
    (tmp_path / "embed").mkdir()
    (tmp_path / "embed" / "__init__.py").write_text("")
    (tmp_path / "embed" / "cache.py").write_text("")
    assert content_sources(tmp_path, ("chunk", "embed")) == ["chunk.py", "embed/__init__.py", "embed/cache.py"]
    with pytest.raises(FileNotFoundError, match="update _CONTENT_MODULES"):
        content_sources(tmp_path, ("chunk", "minilm"))


def test_the_history_step_fills_the_kept_indexes_without_history_and_then_does_nothing(tmp_path: Path) -> None:
    source = printer_repo(tmp_path / "printer")
    head = git(source, "rev-parse", "HEAD").strip()
    mirrors = tmp_path / "mirrors"
    git(tmp_path, "clone", "-q", "--bare", str(source), str(mirrors / "acme+printer" / "repo"))
    with_mirror = TreeJob("acme/printer", head, tmp_path / "corpora" / "printer@1", (), 0)
    without_mirror = TreeJob("acme/other", head, tmp_path / "corpora" / "other@1", (), 0)
    kept = {job.name: tmp_path / "indexes" / job.name for job in (with_mirror, without_mirror)}
    for folder in kept.values():
        folder.mkdir(parents=True)
    jobs = [with_mirror, without_mirror]
    subjects = SubjectEncoder("hash:32", loader=lambda spec: HashEmbedder(32))

    assert missing_history(jobs, kept, mirrors) == [with_mirror]  # a tree with no mirror has none to read
    assert prepare_history(jobs, kept, mirrors, lambda _message: None, subjects) == ["printer@1"]
    history = History.load(kept["printer@1"])
    assert history is not None and len(history.commits) == 3 and history.subjects is not None
    assert missing_history(jobs, kept, mirrors) == []
    assert prepare_history(jobs, kept, mirrors, lambda _message: None, subjects) == []
