"""A hostile repository: binaries, broken UTF-8, a 50 MB file, endless lines, odd names, pipes,
symlink loops and escapes, files that vanish or cannot be read while indexing.

Indexing must finish and count what it skipped; searching and every MCP tool must answer (or
refuse with a tool error) for every path; nothing outside the root or matching the secret rules
may come back; and a hit's lines must be what `read_file` returns for the same range.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.hostile import BIG, OUTSIDE, SECRET, hostile_repo, write_file
from support.server import call_tools

import index.files.discovery as discover_module
from bridge.server.app import ServeOptions, build_server, open_service
from bridge.server.models import SearchCodeResult
from bridge.server.repos import RepoSpec
from index.build.pipeline import BuildOptions, BuildReport, build_index
from index.errors import BadQuery
from index.search.searcher import Searcher


def _flaky_open(root: Path) -> object:
    """os.open for discovery: `vanishes.py` is deleted just before it is opened, `locked.py` is
    unreadable (tests run as root here, where chmod 000 would not stop a read)."""
    real_open = os.open

    def flaky(path: str, flags: int, *args: int) -> int:
        if str(path).endswith("vanishes.py") and os.path.exists(path):
            os.unlink(path)
        if str(path).endswith("locked.py"):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, *args)

    return flaky


@pytest.fixture(scope="module", params=["git", "plain"])
def hostile(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, BuildReport, float]]:
    base = tmp_path_factory.mktemp(f"hostile-{request.param}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BRIDGE_HOME", str(base / "home"))
        mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        root = hostile_repo(base, request.param == "git")
        mp.setattr(discover_module.os, "open", _flaky_open(root))
        index_dir = base / "index"
        started = time.perf_counter()
        report = build_index(root, index_dir, BuildOptions(embedder=None))
        seconds = time.perf_counter() - started
        mp.undo()
        mp.setenv("BRIDGE_HOME", str(base / "home"))
        yield root, index_dir, report, seconds


def test_indexing_a_hostile_repository_finishes_quickly_and_counts_what_it_skipped(hostile: tuple) -> None:
    _, _, report, seconds = hostile
    assert seconds < 60
    for reason in ("binary", "too_large", "symlink_outside_root", "broken_symlink", "secret", "unreadable", "missing",
                   "undecodable_name", "control_name"):
        assert report.skipped.get(reason, 0) >= 1, (reason, report.skipped)
    assert report.invalid_utf8 >= 2


def test_only_text_files_inside_the_root_and_outside_the_secret_rules_are_indexed(hostile: tuple) -> None:
    root, index_dir, _, _ = hostile
    files = set(Searcher(index_dir).manifest.files)
    assert {"src/normal.py", "src/latin1.py", "src/minified.js", "src/separators.py", "name with spaces.py",
            "-rf.py", "link_in.py", "a" * 200 + ".py"} <= files
    refused = {".env", "keys/id_rsa", "huge.log.py", "pipe.py", "link_out.py", "outdir/secret.txt", "passwd.txt",
               "zero.py", "loop_a", "dangling.py", "link_env.py", "img/logo.png", "bin/tool", "data/random.bin",
               "vanishes.py", "locked.py", "newline\nname.py"}
    assert not refused & files
    assert not any(f.startswith("self/") or "\udcff" in f for f in files)
    for path in files:
        assert (root / path).resolve().is_relative_to(root.resolve()), path


def test_every_chunk_stays_within_its_file_and_the_token_bound(hostile: tuple) -> None:
    _, index_dir, _, _ = hostile
    searcher = Searcher(index_dir)
    chunks = list(searcher.read_chunks(list(range(searcher.manifest.chunks))).values())
    assert chunks
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line, c.path
        assert c.tokens <= 400 or c.start_line == c.end_line, (c.path, c.tokens)


def test_searches_over_hostile_text_answer_with_json_safe_results(hostile: tuple) -> None:
    _, index_dir, _, _ = hostile
    searcher = Searcher(index_dir)
    for query in ("encoded_badly", "lone_surrogate", "windows_lines", "after_cr", "form_feed tail", "Party ligature",
                  "text_first", "var a", "\x1b[31m", "a" * 4000):
        result = searcher.search(query, k=10, mode="lexical", max_tokens=2000)
        json.dumps(SearchCodeResult.from_result(result).model_dump(mode="json"))
    for nothing in ("\x00", "🎉", "\ud800"):  # no word to search for: a one-line refusal, not a crash
        with pytest.raises(BadQuery, match="has no letters or digits"):
            searcher.search(nothing, mode="lexical")
    for blank in ("\u2028", " \t\n", "\u3000"):
        with pytest.raises(BadQuery, match="query is empty"):
            searcher.search(blank, mode="lexical")
    hits = searcher.search("encoded_badly", k=1, mode="lexical").hits
    assert hits[0].path == "src/latin1.py" and "\ufffd" in hits[0].text


@pytest.fixture(scope="module")
def served(hostile: tuple) -> Iterator[object]:
    root, index_dir, _, _ = hostile
    svc = open_service(ServeOptions(repos=(RepoSpec(root, index_dir, no_vectors=True),), watch=False, audit_log=None))
    try:
        yield build_server(svc)
    finally:
        svc.close()


def _all_text(result: object) -> str:
    blocks = " ".join(getattr(b, "text", "") for b in result.content)  # type: ignore[attr-defined]
    return blocks + json.dumps(result.structured_content or {})  # type: ignore[attr-defined]


def test_read_file_and_outline_answer_every_indexed_file(hostile: tuple, served: object) -> None:
    _, index_dir, _, _ = hostile
    files = sorted(Searcher(index_dir).manifest.files)
    calls = [(tool, {"path": p}) for p in files for tool in ("read_file", "outline")]
    for (tool, args), result in zip(calls, call_tools(served, calls)):
        assert not result.is_error, (tool, args, _all_text(result)[:300])
        assert OUTSIDE not in _all_text(result) and SECRET not in _all_text(result)


def test_every_skipped_or_outside_path_is_a_tool_error_that_leaks_nothing(served: object) -> None:
    paths = [".env", "keys/id_rsa", "huge.log.py", "pipe.py", "link_out.py", "outdir/secret.txt", "passwd.txt",
             "zero.py", "loop_a", "loop_b", "self/src/normal.py", "dangling.py", "link_env.py", "img/logo.png",
             "bin/tool", "data/random.bin", "vanishes.py", "bad\udcffname.py", "newline\nname.py",
             "../outside/secret.txt"]
    calls = [(tool, {"path": p}) for p in paths for tool in ("read_file", "outline")]
    for (tool, args), result in zip(calls, call_tools(served, calls)):
        assert result.is_error, (tool, args)
        assert OUTSIDE not in _all_text(result) and SECRET not in _all_text(result) and "root:x:0" not in _all_text(result)


def test_a_hit_has_the_same_lines_as_read_file_returns_for_its_range(hostile: tuple, served: object) -> None:
    _, index_dir, _, _ = hostile
    queries = ["windows_lines more", "lone_cr after_cr", "form_feed tail separator", "with_bom", "encoded_badly",
               "controls", "spaced", "deep"]
    searches = call_tools(served, [("search_code", {"query": q, "k": 3, "mode": "lexical", "max_tokens": 20000}) for q in queries])
    hits = [h for r in searches for h in r.structured_content["hits"]]
    assert {h["path"] for h in hits} >= {"src/crlf.py", "src/old_mac.py", "src/separators.py", "src/bom.py"}
    reads = call_tools(served, [
        ("read_file", {"path": h["path"], "start_line": h["start_line"], "end_line": h["end_line"], "max_tokens": 20000})
        for h in hits
    ])
    for hit, read in zip(hits, reads):
        assert not read.is_error, _all_text(read)
        assert read.structured_content["text"] == hit["text"], hit["path"]


def test_a_very_long_line_is_cut_to_the_budget_by_read_file(served: object) -> None:
    (result,) = call_tools(served, [("read_file", {"path": "src/minified.js", "max_tokens": 50})])
    assert not result.is_error
    data = result.structured_content
    assert data["truncated"] and data["tokens"] <= 50 and data["text"].startswith("var a=1;")


def test_list_files_with_hostile_globs_lists_only_indexed_files(hostile: tuple, served: object) -> None:
    _, index_dir, _, _ = hostile
    files = set(Searcher(index_dir).manifest.files)
    globs = ["**", "*", "../**", "/**", "**/.env", "outdir/**", "self/**", "**/*\n*", "[", "!**", "\\", "**/" * 50]
    for result in call_tools(served, [("list_files", {"path_glob": g, "limit": 10_000}) for g in globs]):
        if not result.is_error:
            assert set(result.structured_content["files"]) <= files


@pytest.mark.slow
def test_a_hundred_thousand_tiny_files_index_and_search(tmp_path: Path) -> None:
    root = tmp_path / "many"
    for d in range(100):
        folder = root / f"pkg{d:03d}"
        folder.mkdir(parents=True)
        for i in range(1000):
            (folder / f"m{i:04d}.py").write_text(f"def f_{d}_{i}():\n    return {i}\n")
    started = time.perf_counter()
    report = build_index(root, tmp_path / "index", BuildOptions(embedder=None))
    seconds = time.perf_counter() - started
    assert report.files == 100_000 and report.chunks == 100_000
    hits = Searcher(tmp_path / "index").search("f_42_777", k=1, mode="lexical").hits
    assert hits[0].path == "pkg042/m0777.py"
    assert seconds < 600, seconds


@pytest.mark.slow
def test_a_50_mb_text_file_indexes_when_the_size_limit_allows_it(tmp_path: Path) -> None:
    from index.types import Selection

    root = tmp_path / "big"
    line = "def step_{0}(value):\n    return value * {0} + 1\n\n"
    write_file(root, "big.py", "".join(line.format(i) for i in range(BIG // 50)))
    assert (root / "big.py").stat().st_size >= BIG
    options = BuildOptions(embedder=None, selection=Selection(max_file_bytes=2 * BIG))
    report = build_index(root, tmp_path / "index", options)
    assert report.files == 1 and report.chunks > 1000
    assert Searcher(tmp_path / "index").search("step_777777", k=1, mode="lexical").hits
