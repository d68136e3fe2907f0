"""What bench/edit_sites.py counts: a hit in a gold file, over a line the fix edits, over a definition it touches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.small_index import small_index

from bench import edit_sites
from bench.edit_sites import gold_sites, judge, summarize
from bench.swebench_trees import TreeJob
from bridge.measure.evaluate import Question
from index.rank import CHUNK_FEATURES, FEATURES
from index.search import Searcher
from index.types import Hit

SOURCE = "import os\n\n\ndef load(path):\n    return open(path).read()\n\n\nclass Store:\n    def save(self, data):\n        return data\n"


def hit(path: str, start: int, end: int) -> Hit:
    return Hit(path, start, end, 1.0, None, None, None, "python", "x", 10)


def test_a_hit_counts_only_where_it_overlaps_the_edited_lines_and_the_touched_definitions(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "store.py").write_text(SOURCE)
    raw = {"gold_files": ["pkg/store.py"], "edit_lines": {"pkg/store.py": [10]},
           "gold_spans": {"pkg/store.py": ["Store.save", "imports"]}}
    gold = gold_sites(raw, tmp_path)
    assert gold.spans["pkg/store.py"] == ((9, 10), (1, 3))
    assert judge([hit("pkg/store.py", 4, 5)], gold).__dict__ | {"hits": ()} == {
        "gold_file": True, "edit_site": False, "gold_span": False, "tokens": 10, "hits": ()}
    on_the_edit = judge([hit("other.py", 1, 20), hit("pkg/store.py", 8, 10)], gold)
    assert on_the_edit.gold_file and on_the_edit.edit_site and on_the_edit.gold_span
    assert judge([hit("pkg/store.py", 1, 2)], gold).gold_span and not judge([hit("other.py", 9, 10)], gold).gold_file


def test_the_summary_gives_each_repository_and_their_macro_average() -> None:
    def row(repo: str, edit: bool) -> dict[str, object]:
        return {"repo": repo, "answers": {"hybrid@600": {"gold_file": True, "edit_site": edit, "gold_span": edit}}}

    summary = summarize([row("a", True), row("a", False), row("b", True)])
    assert summary["overall"]["hybrid@600"]["edit_site"] == round(2 / 3, 4)
    assert summary["per_repo"]["a"]["hybrid@600"]["edit_site"] == 0.5
    assert summary["macro"]["hybrid@600"]["edit_site"] == 0.75


def test_a_held_out_run_searches_each_repository_with_the_stages_fitted_without_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small_index(tmp_path, {"pkg/store.py": SOURCE}, 40)  # its index: tmp_path / "idx"
    used: list[Searcher] = []

    class Remembered(Searcher):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            used.append(self)

    monkeypatch.setattr(edit_sites, "Searcher", Remembered)
    question = Question("q1", "Store.save drops the data\nCalling save on a Store returns nothing useful.\n",
                        ("pkg/store.py",), repo="owner/store")
    job = TreeJob("owner/store", "abc", tmp_path / "repo", (question,), 0)
    raw = {"q1": {"gold_files": ["pkg/store.py"], "edit_lines": {"pkg/store.py": [10]}, "gold_spans": {}}}
    files = {"store": {f: 0.5 for f in FEATURES}, "other": {f: 0.0 for f in FEATURES}}
    chunks = {"store": {f: 0.25 for f in CHUNK_FEATURES}}
    rows = edit_sites.measure_job(job, tmp_path / "idx", None, raw, ["hybrid"], [600], 5, chunks, files)
    (held,) = used
    assert held.ranker is not None and held.ranker.trained_on == "held out"
    assert held.ranker.weights.tolist() == [0.5] * len(FEATURES)
    assert held.chunk_stage is not None and held.chunk_stage.weights.tolist() == [0.25] * len(CHUNK_FEATURES)
    assert rows[0]["answers"]["hybrid@600"]["gold_file"]
