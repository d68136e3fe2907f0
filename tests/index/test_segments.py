"""A delta re-index (base segment + delta + deletion mask) answers as a full rebuild does.

Scores may differ only by the base's average-length drift (index/store/segments.py), which bounds the
relative error of every base weight; rankings, hits and file lists must be the same; after a
compaction the index is a single segment again and equals a full rebuild."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from index.build.fill import fill_vectors
from index.build.pipeline import BuildOptions, build_index
from index.rank.question import extract_clues
from index.search.probe import file_ranking
from index.search.searcher import Searcher
from index.store.layout import IndexDir
from index.store.segments import SEGMENTS, load_segments

WORDS = ("parse config retry socket buffer token stream cache render session widget query index "
         "merge split commit branch tree node graph path route handler request response error").split()
QUERIES = ("parse the config file", "retry the socket request", "render_widget_7 session", "merge branch commit",
           "cache_token stream buffer", "route handler error response", "graph node path", "handler_12 widget")
LEXICAL = BuildOptions(embedder=None)


def _module(i: int, salt: str = "") -> str:
    rng = random.Random(f"{i}{salt}")
    parts = [f'"""Module {i}: {" ".join(rng.sample(WORDS, 5))}."""\n']
    for j in range(rng.randint(2, 4)):
        name = f"{rng.choice(WORDS)}_{rng.choice(WORDS)}_{i}"
        body = "\n".join(f"    {rng.choice(WORDS)} = {rng.choice(WORDS)}({rng.choice(WORDS)}, {j})" for _ in range(rng.randint(3, 12)))
        parts.append(f"\ndef {name}(request):\n    \"\"\"{' '.join(rng.sample(WORDS, 6))}.\"\"\"\n{body}\n    return request\n")
    parts.append(f"\n\nclass Handler{i}:\n    def handler_{i}(self):\n        return 'render_widget_{i} session'\n")
    return "".join(parts)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for i in range(80):
        path = root / f"pkg{i % 4}" / f"mod_{i:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_module(i))
    return root


def edit(root: Path) -> None:
    (root / "pkg1/mod_005.py").write_text(_module(5, "edited") + "\ndef cache_token_refresh():\n    return 'stream'\n")


def add(root: Path) -> None:
    (root / "pkg9").mkdir()
    (root / "pkg9/fresh.py").write_text(_module(500) + "\ndef merge_branch_commit_graph():\n    return 1\n")


def delete(root: Path) -> None:
    (root / "pkg2/mod_010.py").unlink()


def rename(root: Path) -> None:
    (root / "pkg3/mod_011.py").rename(root / "pkg0/renamed_011.py")


CHANGES: dict[str, Callable[[Path], None]] = {"edit": edit, "add": add, "delete": delete, "rename": rename}


def _drift(index_dir: Path) -> float:
    """|avgdl_live / avgdl_base - 1| of the live generation: the stated score tolerance."""
    gen = IndexDir(index_dir).current()
    if not (gen / SEGMENTS).is_file():
        return 0.0
    base = np.diff(np.load(gen / "lexical/terms.offsets.npy")).mean()
    live = json.loads((gen / "delta/lexical/lexical.json").read_text())["avgdl"]
    return abs(live / base - 1)


def _answers(index_dir: Path) -> tuple[list[list[tuple[str, int, int]]], list[list[float]], list[list[str]]]:
    searcher = Searcher(index_dir)
    hits, scores, files = [], [], []
    for q in QUERIES:
        result = searcher.search(q, k=8, mode="lexical")
        hits.append([(h.path, h.start_line, h.end_line) for h in result.hits])
        scores.append([h.score for h in result.hits])
        files.append([p for p, _ in file_ranking(searcher, q)[:13]])
    return hits, scores, files


def _lexical_scores(index_dir: Path, query: str) -> dict[tuple[str, int], float]:
    """BM25 score of every live chunk with one, keyed by (path, start line): ids differ by build."""
    searcher = Searcher(index_dir)
    searcher.refresh()
    gen = searcher._gen
    assert gen is not None
    from index.tokenize import terms

    scores = gen.bm25(terms(query), None)
    ids = np.flatnonzero(scores > 0).tolist()
    rows = gen.chunks(ids)
    return {(rows[i].path, rows[i].start_line): float(scores[i]) for i in ids if i in rows}


def _assert_same(delta_dir: Path, full_dir: Path, files_in_order: bool = True) -> None:
    """Same chunk hits, scores within the drift bound, same file lists; with `files_in_order`
    False the top files may swap places where the drift reorders near-tied files (the file
    ranking fuses per-signal ranks of all files, so a tie at 1e-3 flips with the drift): the
    same three first, and each of one side's ten best among the other's thirteen best."""
    tolerance = 2 * _drift(delta_dir) + 1e-6
    (hits, scores, files), (hits2, scores2, files2) = _answers(delta_dir), _answers(full_dir)
    assert hits == hits2
    if files_in_order:
        assert files == files2
    else:
        assert [f[:3] for f in files] == [f[:3] for f in files2]
        for ours, theirs in zip(files, files2):
            assert set(ours[:10]) <= set(theirs) and set(theirs[:10]) <= set(ours)
    for a, b in zip(scores, scores2):
        np.testing.assert_allclose(a, b, rtol=tolerance)
    for q in QUERIES:
        ours, theirs = _lexical_scores(delta_dir, q), _lexical_scores(full_dir, q)
        assert ours.keys() == theirs.keys()
        np.testing.assert_allclose([ours[k] for k in sorted(ours)], [theirs[k] for k in sorted(ours)], rtol=tolerance)


def _full(root: Path, where: Path) -> Path:
    build_index(root, where, BuildOptions(embedder=None, rebuild=True))
    return where


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_a_delta_reindex_answers_as_a_full_rebuild_of_the_same_tree(tree: Path, tmp_path: Path, change: str) -> None:
    build_index(tree, tmp_path / "idx", LEXICAL)
    CHANGES[change](tree)
    report = build_index(tree, tmp_path / "idx", LEXICAL)
    gen = IndexDir(tmp_path / "idx").current()
    info = load_segments(gen)
    assert info is not None, "a small change writes a delta generation"
    assert report.new_chunks == info.n_delta and report.chunks == info.n_live
    assert _drift(tmp_path / "idx") < 0.05
    _assert_same(tmp_path / "idx", _full(tree, tmp_path / "full"))


def test_successive_deltas_keep_answering_as_a_full_rebuild_and_a_compaction_equals_it(tree: Path, tmp_path: Path) -> None:
    build_index(tree, tmp_path / "idx", LEXICAL)
    base = (IndexDir(tmp_path / "idx").current() / "chunks.sqlite").stat().st_ino
    for change in (edit, add, delete, rename):
        change(tree)
        build_index(tree, tmp_path / "idx", LEXICAL)
        gen = IndexDir(tmp_path / "idx").current()
        assert (gen / "chunks.sqlite").stat().st_ino == base  # the same base file, hard-linked
        _assert_same(tmp_path / "idx", _full(tree, tmp_path / f"full-{change.__name__}"), files_in_order=False)
    (tree / "pkg1/mod_005.py").write_text(_module(5, "edited again"))  # a file edited twice: its delta is rewritten
    build_index(tree, tmp_path / "idx", LEXICAL)
    _assert_same(tmp_path / "idx", _full(tree, tmp_path / "full-twice"), files_in_order=False)
    for i in range(0, 80, 5):  # a fifth of the files: past the delta's share of the base
        path = next(tree.glob(f"pkg*/*_{i:03d}.py"), None)
        if path is not None:
            path.write_text(_module(i, "rewritten"))
    build_index(tree, tmp_path / "idx", LEXICAL)
    assert load_segments(IndexDir(tmp_path / "idx").current()) is None, "compacted into one segment"
    full = _full(tree, tmp_path / "full-compacted")
    assert _answers(tmp_path / "idx") == _answers(full)


def test_old_chunks_of_changed_and_removed_files_never_come_back(tree: Path, tmp_path: Path) -> None:
    build_index(tree, tmp_path / "idx", LEXICAL)
    before = Searcher(tmp_path / "idx")
    gone = [i for i, c in enumerate(before._gen.table.all()) if c.path in ("pkg1/mod_005.py", "pkg2/mod_010.py")]  # type: ignore[union-attr]
    old_text = (tree / "pkg1/mod_005.py").read_text()
    old = old_text.split("def ", 2)[1].split("(")[0]  # a function only the old version defines
    edit(tree)
    delete(tree)
    build_index(tree, tmp_path / "idx", LEXICAL)
    searcher = Searcher(tmp_path / "idx")
    assert load_segments(IndexDir(tmp_path / "idx").current()) is not None
    assert searcher.read_chunks(gone) == {}
    for mode_query in (old, "mod_010", "Module 10", "handler_10"):
        result = searcher.search(mode_query, k=20, mode="lexical")
        assert all(h.path != "pkg2/mod_010.py" for h in result.hits)
        assert all(old not in h.text or h.path != "pkg1/mod_005.py" for h in result.hits)
        assert all(p != "pkg2/mod_010.py" for p, _ in file_ranking(searcher, mode_query))
    assert "pkg2/mod_010.py" not in searcher.manifest.files
    gen = searcher._gen
    assert gen is not None  # the "definitions" signal no longer finds the removed function
    assert "pkg1/mod_005.py" not in [gen.files.paths[i] for i in gen.files.defining(extract_clues(f"{old}()"))]
    assert "pkg1/mod_005.py" in [before._gen.files.paths[i] for i in before._gen.files.defining(extract_clues(f"{old}()"))]  # type: ignore[union-attr]
    assert searcher.search("cache_token_refresh", k=1, mode="lexical").hits[0].path == "pkg1/mod_005.py"


def test_a_glob_filter_keeps_delta_chunks_and_drops_deleted_ones(tree: Path, tmp_path: Path) -> None:
    build_index(tree, tmp_path / "idx", LEXICAL)
    add(tree)
    delete(tree)
    build_index(tree, tmp_path / "idx", LEXICAL)
    searcher = Searcher(tmp_path / "idx")
    hits = searcher.search("merge branch commit graph", k=10, mode="lexical", path_glob="pkg9/**").hits
    assert hits and {h.path for h in hits} == {"pkg9/fresh.py"}
    assert searcher.search("handler_10", k=10, mode="lexical", path_glob="pkg2/**").hits == () or all(
        h.path != "pkg2/mod_010.py" for h in searcher.search("handler_10", k=10, mode="lexical", path_glob="pkg2/**").hits
    )


def test_vectors_fill_the_delta_and_never_hold_a_deleted_chunk(tree: Path, tmp_path: Path) -> None:
    options = BuildOptions(embedder="hash")
    build_index(tree, tmp_path / "idx", options)
    fill_vectors(tmp_path / "idx", batch_size=16)
    edit(tree)
    delete(tree)
    build_index(tree, tmp_path / "idx", options)
    report = fill_vectors(tmp_path / "idx", batch_size=16)
    searcher = Searcher(tmp_path / "idx")
    info = load_segments(IndexDir(tmp_path / "idx").current())
    assert info is not None and len(info.deleted) > 0
    assert report.complete and searcher.embedded_chunks() == searcher.manifest.chunks == info.n_live
    gen = searcher._gen
    assert gen is not None
    vectors = gen.vectors()
    assert vectors is not None
    near = vectors.top(np.ones(vectors.dim, dtype=np.float32), vectors.count)
    assert not set(info.deleted.tolist()) & {i for i, _ in near}
    assert {i for i, _ in near} >= set(range(info.n_base, info.n_ids))
    hits = searcher.search("cache_token_refresh stream", k=5, mode="hybrid").hits
    assert "pkg1/mod_005.py" in {h.path for h in hits}


def test_an_index_of_main_s_single_segment_format_opens_and_takes_a_delta(tree: Path, tmp_path: Path) -> None:
    build_index(tree, tmp_path / "idx", BuildOptions(embedder=None, max_delta=0))
    assert load_segments(IndexDir(tmp_path / "idx").current()) is None
    assert IndexDir(tmp_path / "idx").manifest().format_version == 1  # what a single-segment reader reads
    edit(tree)
    build_index(tree, tmp_path / "idx", LEXICAL)
    assert load_segments(IndexDir(tmp_path / "idx").current()) is not None
    assert IndexDir(tmp_path / "idx").manifest().format_version == 2  # refused, with the fix, by such a reader
    Searcher(tmp_path / "idx").verify()
    _assert_same(tmp_path / "idx", _full(tree, tmp_path / "full"))


def test_a_file_system_without_hard_links_gets_a_single_segment(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_index(tree, tmp_path / "idx", LEXICAL)
    edit(tree)

    def no_links(*_: object) -> None:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr("index.build.delta.os.link", no_links)
    build_index(tree, tmp_path / "idx", LEXICAL)
    assert load_segments(IndexDir(tmp_path / "idx").current()) is None
    assert Searcher(tmp_path / "idx").search("cache_token_refresh", k=1, mode="lexical").hits[0].path == "pkg1/mod_005.py"
