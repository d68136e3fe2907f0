"""The write and read paths together: build, reuse, progressive vectors, freshness, errors."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from index.build.fill import fill_vectors
from index.build.pipeline import BuildOptions, build_index
from index.embed import HashEmbedder
from index.errors import BadQuery, EmptyRepository, IncompatibleIndex, IndexLocked, NoIndex
from index.search.searcher import Searcher
from index.store.layout import IndexDir

LEXICAL = BuildOptions(embedder=None)
HASHED = BuildOptions(embedder="hash")


def test_search_finds_a_function_by_an_identifier_in_it(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", LEXICAL)
    hit = Searcher(tmp_path / "idx").search("parse_port", k=3, mode="lexical").hits[0]
    assert hit.path == "src/server.py" and "def parse_port" in hit.text
    lines = (repo / hit.path).read_text().splitlines()[hit.start_line - 1 : hit.end_line]
    assert hit.text == "\n".join(lines)


def test_ignored_files_are_not_indexed(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", LEXICAL)
    files = Searcher(tmp_path / "idx").manifest.files
    assert "build/generated.py" not in files and "debug.log" not in files and "src/config.py" in files


def test_rebuilding_an_unchanged_repository_writes_no_new_generation(repo: Path, tmp_path: Path) -> None:
    first = build_index(repo, tmp_path / "idx", LEXICAL)
    second = build_index(repo, tmp_path / "idx", LEXICAL)
    assert second.changed is False and second.generation == first.generation


def test_changing_one_file_rechunks_only_that_file(repo: Path, tmp_path: Path) -> None:
    first = build_index(repo, tmp_path / "idx", LEXICAL)
    (repo / "src/server.py").write_text((repo / "src/server.py").read_text() + "\n\ndef shutdown_now():\n    pass\n")
    second = build_index(repo, tmp_path / "idx", LEXICAL)
    assert second.changed and second.new_chunks >= 1
    assert second.reused_chunks >= first.chunks - 3
    assert Searcher(tmp_path / "idx").search("shutdown_now", mode="lexical").hits[0].path == "src/server.py"


def test_lexical_search_works_before_any_vector_exists_and_hybrid_uses_vectors_once_filled(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", HASHED)
    searcher = Searcher(tmp_path / "idx")
    assert searcher.info().embedded_chunks == 0
    before = searcher.search("retry backoff", mode="hybrid")
    assert before.hits and all(h.vector_rank is None for h in before.hits)
    with pytest.raises(NoIndex, match="no vectors yet"):
        searcher.search("retry backoff", mode="vector")
    report = fill_vectors(tmp_path / "idx")
    assert report.complete and report.embedded_chunks == searcher.info().chunks
    after = searcher.search("retry backoff", mode="hybrid")
    assert any(h.vector_rank is not None for h in after.hits)


def test_the_first_hybrid_search_reports_the_query_model_load_apart_from_its_search_time(
    repo: Path, tmp_path: Path
) -> None:
    build_index(repo, tmp_path / "idx", HASHED)
    fill_vectors(tmp_path / "idx")
    loads: list[str] = []

    def loader(spec: str) -> HashEmbedder:
        loads.append(spec)
        return HashEmbedder()

    searcher = Searcher(tmp_path / "idx", embedder_loader=loader)
    lexical = searcher.search("retry backoff", mode="lexical")
    first = searcher.search("retry backoff", mode="hybrid")
    second = searcher.search("retry backoff", mode="hybrid")
    assert lexical.load_ms == 0.0 and loads == ["hash"]
    assert first.load_ms > 0.0 and second.load_ms == 0.0
    assert [h.path for h in first.hits] == [h.path for h in second.hits]


def test_embeddings_are_reused_from_the_cache_after_a_rebuild(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", HASHED)
    first = fill_vectors(tmp_path / "idx")
    build_index(repo, tmp_path / "idx", BuildOptions(embedder="hash", rebuild=True))
    second = fill_vectors(tmp_path / "idx")
    assert first.newly_embedded == first.chunks and second.newly_embedded == 0 and second.complete


def test_results_count_files_changed_on_disk_since_the_build(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", LEXICAL)
    (repo / "src/config.py").write_text("changed = True\n")
    (repo / "README.md").unlink()
    result = Searcher(tmp_path / "idx").search("config", mode="lexical")
    assert result.index.stale_files == 2


def test_a_search_reuses_the_stale_count_and_recounts_it_in_the_background(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_index(repo, tmp_path / "idx", LEXICAL)
    searcher = Searcher(tmp_path / "idx")
    assert searcher.info().stale_files == 0  # the first count of a generation is made at once
    (repo / "README.md").unlink()
    assert searcher.info().stale_files == 0  # younger than the reuse time: not counted again
    monkeypatch.setattr("index.search.stale.TTL", 0.0)
    assert searcher.info().stale_files == 0  # too old: returned as it is while a recount starts
    deadline = time.monotonic() + 10
    while searcher.info().stale_files != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert searcher.info().stale_files == 1


def test_a_fresh_status_counts_stale_files_now(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", LEXICAL)
    searcher = Searcher(tmp_path / "idx")
    assert searcher.info().stale_files == 0
    (repo / "README.md").unlink()
    assert searcher.info(fresh=True).stale_files == 1


def test_a_hit_whose_file_changed_or_went_since_the_build_says_so_and_what_to_run(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", LEXICAL)
    searcher = Searcher(tmp_path / "idx")
    assert not any(h.evidence for h in searcher.search("parse_port", k=3, mode="lexical").hits)
    server = repo / "src/server.py"
    server.write_text("# moved down\n" + server.read_text())
    hit = searcher.search("parse_port", k=1, mode="lexical").hits[0]
    assert hit.path == "src/server.py" and hit.evidence[-1].startswith("changed since indexing")
    assert "`bridge index`" in hit.evidence[-1]
    server.unlink()
    assert searcher.search("parse_port", k=1, mode="lexical").hits[0].evidence[-1].startswith("deleted since indexing")


def test_path_glob_keeps_only_matching_files(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", LEXICAL)
    hits = Searcher(tmp_path / "idx").search("session name greeting port", k=10, mode="lexical", path_glob="*.ts").hits
    assert hits and {h.path for h in hits} == {"web/app.ts"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": "  "}, "query is empty"),
        ({"query": "x", "k": 0}, "out of range"),
        ({"query": "x", "k": 51}, "out of range"),
        ({"query": "x" * 70000}, r"over the 65536-byte \(64 KB\) limit"),
        ({"query": "x", "mode": "fuzzy"}, "is unknown"),
        ({"query": "x", "max_tokens": 0}, "out of range"),
    ],
)
def test_bad_queries_fail_with_a_message_saying_what_to_change(repo: Path, tmp_path: Path, kwargs: dict, message: str) -> None:
    build_index(repo, tmp_path / "idx", LEXICAL)
    with pytest.raises(BadQuery, match=message):
        Searcher(tmp_path / "idx").search(**kwargs)


def test_max_tokens_bounds_the_code_returned(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", LEXICAL)
    result = Searcher(tmp_path / "idx").search("retry connection port config", k=10, mode="lexical", max_tokens=40)
    assert sum(h.tokens for h in result.hits) <= 40 and result.truncated


def test_an_empty_repository_is_refused_and_no_index_is_written(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmptyRepository, match="no indexable files"):
        build_index(tmp_path / "empty", tmp_path / "idx", LEXICAL)
    assert not IndexDir(tmp_path / "idx").exists()


def test_searching_where_no_index_exists_names_the_command_to_run(tmp_path: Path) -> None:
    with pytest.raises(NoIndex, match="bridge index"):
        Searcher(tmp_path / "nothing")


def test_an_index_of_another_format_version_is_refused_with_the_fix(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", LEXICAL)
    manifest = IndexDir(tmp_path / "idx").current() / "manifest.json"
    data = json.loads(manifest.read_text())
    data["format_version"] = 999
    manifest.write_text(json.dumps(data))
    with pytest.raises(IncompatibleIndex, match="--rebuild"):
        Searcher(tmp_path / "idx")


def test_a_second_writer_fails_clearly_while_the_first_holds_the_lock(repo: Path, tmp_path: Path) -> None:
    store = IndexDir(tmp_path / "idx")
    with store.writer_lock(), pytest.raises(IndexLocked, match="another `bridge index`"):
        build_index(repo, tmp_path / "idx", BuildOptions(embedder=None, lock_timeout=0.1))


def test_a_reader_keeps_answering_from_its_generation_while_a_new_one_is_published(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", LEXICAL)
    searcher = Searcher(tmp_path / "idx")
    (repo / "src/extra.py").write_text("def brand_new_function():\n    return 42\n")
    build_index(repo, tmp_path / "idx", LEXICAL)
    assert searcher.search("brand_new_function", mode="lexical").hits[0].path == "src/extra.py"
    assert len(list((tmp_path / "idx").glob("g*"))) <= 2


def _same_size_edit(path: Path, old: str, new: str, mtime_ns: int) -> None:
    text = path.read_text()
    assert len(old) == len(new) and old in text
    path.write_text(text.replace(old, new))
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_a_file_whose_size_and_old_mtime_are_unchanged_is_not_read_again(repo: Path, tmp_path: Path) -> None:
    path = repo / "src/server.py"
    past = path.stat().st_mtime_ns - 3_600 * 10**9  # an hour before the scan: no edit can share its tick
    os.utime(path, ns=(past, past))
    build_index(repo, tmp_path / "idx", LEXICAL)
    _same_size_edit(path, "def parse_port", "def parse_xort", past)  # size and mtime as recorded
    assert build_index(repo, tmp_path / "idx", LEXICAL).changed is False
    assert Searcher(tmp_path / "idx").search("parse_port", k=1, mode="lexical").hits[0].path == "src/server.py"


def test_a_file_changed_in_the_tick_it_was_read_is_read_again_though_its_stat_looks_the_same(
    repo: Path, tmp_path: Path
) -> None:
    path = repo / "src/server.py"
    build_index(repo, tmp_path / "idx", LEXICAL)
    recorded = Searcher(tmp_path / "idx").manifest.files["src/server.py"].mtime_ns  # just before that scan
    _same_size_edit(path, "def parse_port", "def parse_xort", recorded)
    report = build_index(repo, tmp_path / "idx", LEXICAL)
    assert report.changed and report.new_chunks >= 1
    assert Searcher(tmp_path / "idx").search("parse_xort", k=1, mode="lexical").hits[0].path == "src/server.py"


def test_files_with_invalid_utf8_are_still_counted_when_their_stat_lets_them_go_unread(
    repo: Path, tmp_path: Path
) -> None:
    path = repo / "src/latin1.py"
    path.write_bytes(b"name = 'caf\xe9'\n")
    past = path.stat().st_mtime_ns - 3_600 * 10**9
    os.utime(path, ns=(past, past))
    assert build_index(repo, tmp_path / "idx", LEXICAL).invalid_utf8 == 1
    (repo / "src/extra.py").write_text("def brand_new():\n    pass\n")
    again = build_index(repo, tmp_path / "idx", LEXICAL)
    assert again.changed and again.invalid_utf8 == 1
