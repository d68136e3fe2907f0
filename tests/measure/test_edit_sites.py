"""What bench/edit_sites.py counts: a hit in a gold file, over a line the fix edits, over a definition it touches."""

from __future__ import annotations

from pathlib import Path

from bench.edit_sites import gold_sites, judge, summarize
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
