"""The CLI as a user runs it: a new process, JSON on stdout, one-line errors with exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def bridge(*args: str, cwd: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge", *args], capture_output=True, text=True, cwd=cwd, env=os.environ.copy(),
        timeout=120, input=stdin,
    )


def test_index_then_search_prints_the_promised_json(repo: Path, tmp_path: Path) -> None:
    idx = str(tmp_path / "idx")
    built = bridge("index", str(repo), "--index-dir", idx, "--embedder", "hash", "--json")
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["vectors"]["complete"] is True
    found = bridge("search", "retry policy backoff", "--index-dir", idx, "-k", "3", "--json")
    assert found.returncode == 0, found.stderr
    data = json.loads(found.stdout)
    assert set(data) == {"query", "mode", "took_ms", "load_ms", "hits", "truncated", "index", "note"}
    assert data["note"] is None
    assert data["mode"] == "hybrid" and data["truncated"] is False
    assert set(data["index"]) == {"root", "files", "chunks", "embedded_chunks", "built_at", "stale_files"}
    hit = data["hits"][0]
    assert set(hit) == {"path", "start_line", "end_line", "score", "lexical_rank", "vector_rank", "symbol",
                        "language", "text", "tokens", "evidence"}
    assert hit["path"] == "src/config.py"
    lines = (repo / hit["path"]).read_text().splitlines()
    assert hit["text"] == "\n".join(lines[hit["start_line"] - 1 : hit["end_line"]])


def test_the_default_index_location_is_found_again_from_the_repository_alone(repo: Path) -> None:
    assert bridge("index", str(repo), "--no-vectors").returncode == 0
    status = bridge("status", "--json", cwd=repo)
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["files"] == 5 and data["embedder"] is None and data["embedded_chunks"] == 0


def test_status_tells_how_many_past_commits_the_index_holds_and_whether_their_subjects_are_embedded(
    repo: Path, tmp_path: Path
) -> None:
    from tests.support.git import printer_repo

    git_repo, idx = printer_repo(tmp_path / "git"), str(tmp_path / "idx")
    assert bridge("index", str(git_repo), "--index-dir", idx, "--embedder", "hash").returncode == 0
    status = bridge("status", "--index-dir", idx, "--json")
    assert json.loads(status.stdout)["history"] == {"commits": 3, "subjects_embedded": True}
    assert "history: 3 past commits" in bridge("status", "--index-dir", idx).stderr
    plain = str(tmp_path / "plain")
    bridge("index", str(repo), "--index-dir", plain, "--no-vectors")
    assert json.loads(bridge("status", "--index-dir", plain, "--json").stdout)["history"] is None
    assert "history: none (not a git repository)" in bridge("status", "--index-dir", plain).stderr
    bridge("index", str(git_repo), "--index-dir", idx, "--no-vectors", "--no-history")
    assert "history: off (indexed with --no-history" in bridge("status", "--index-dir", idx).stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("search", "x", "--index-dir", "/nonexistent/idx"), 1, "run `bridge index"),
        (("index", "/nonexistent/repo"), 1, "no such folder"),
        (("search", "x", "--repo", "/nonexistent/repo"), 1, "no folder at /nonexistent/repo"),
        (("status", "--repo", "/nonexistent/repo"), 1, "no folder at /nonexistent/repo"),
        (("search", "x", "-k", "notanumber"), 2, "Invalid value"),
        (("frobnicate",), 2, "No such command"),
    ],
)
def test_errors_are_one_line_with_the_right_exit_code(args: tuple[str, ...], code: int, message: str) -> None:
    result = bridge(*args)
    assert result.returncode == code
    assert message in result.stderr and "Traceback" not in result.stderr


def test_out_of_range_flags_are_usage_errors_and_an_empty_query_a_one_line_error(repo: Path, tmp_path: Path) -> None:
    idx = str(tmp_path / "idx")
    bridge("index", str(repo), "--index-dir", idx, "--no-vectors")
    result = bridge("search", "", "--index-dir", idx)
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    for args, flag in ((("-k", "500"), "-k"), (("--max-tokens", "0"), "--max-tokens"), (("--mode", "fuzzy"), "--mode")):
        result = bridge("search", "x", *args, "--index-dir", idx)
        assert result.returncode == 2 and f"Invalid value for '{flag}'" in result.stderr, result.stderr


def test_index_says_what_it_did_with_the_history(tmp_path: Path) -> None:
    from tests.support.git import printer_repo

    git_repo, idx = printer_repo(tmp_path / "git"), str(tmp_path / "idx")
    assert "history: off (--no-history)" in bridge("index", str(git_repo), "--index-dir", idx, "--no-vectors", "--no-history").stderr
    again = bridge("index", str(git_repo), "--index-dir", idx, "--no-vectors")
    assert "index is up to date" in again.stderr and "history: 3 past commits (3 new)" in again.stderr
    data = json.loads(bridge("index", str(git_repo), "--index-dir", idx, "--no-vectors", "--json").stdout)
    assert data["build"]["history"]["commits"] == 3 and data["build"]["history"]["new_commits"] == 0


def test_index_names_the_secrets_and_lock_files_it_skipped(repo: Path, tmp_path: Path) -> None:
    (repo / "uv.lock").write_text("[[package]]\n")
    (repo / ".env").write_text("TOKEN=1\n")
    idx = str(tmp_path / "idx")
    shown = bridge("index", str(repo), "--index-dir", idx, "--no-vectors").stderr
    assert "skipped as lock file: uv.lock" in shown and "skipped as secret: .env" in shown
    data = json.loads(bridge("index", str(repo), "--index-dir", idx, "--no-vectors", "--json").stdout)
    assert data["skipped_by_name"] == {"lock_file": ["uv.lock"], "secret": [".env"]}


def test_status_counts_text_files_added_since_the_build_and_names_the_command(repo: Path, tmp_path: Path) -> None:
    idx = str(tmp_path / "idx")
    bridge("index", str(repo), "--index-dir", idx, "--no-vectors")
    assert json.loads(bridge("status", "--index-dir", idx, "--json").stdout)["new_files"] == 0
    (repo / "src" / "added.py").write_text("def added():\n    return 1\n")
    (repo / "src" / "logo.bin").write_bytes(b"\x00\x01" * 50)
    assert json.loads(bridge("status", "--index-dir", idx, "--json").stdout)["new_files"] == 1
    assert f"1 new file on disk not indexed yet: run `bridge index {repo.resolve()}`" in bridge(
        "status", "--index-dir", idx).stderr


def test_a_budget_too_small_for_any_hit_says_to_raise_it(repo: Path, tmp_path: Path) -> None:
    idx = str(tmp_path / "idx")
    bridge("index", str(repo), "--index-dir", idx, "--no-vectors")
    result = bridge("search", "parse_config settings file", "--max-tokens", "2", "--index-dir", idx)
    assert result.returncode == 1 and "no hit fits in --max-tokens 2: raise it" in result.stderr


def test_a_search_from_inside_an_indexed_repository_searches_the_repository(repo: Path) -> None:
    assert bridge("index", str(repo), "--no-vectors").returncode == 0
    found = bridge("search", "retry policy backoff", "--json", cwd=repo / "src")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["index"]["root"] == str(repo.resolve())


def test_a_search_of_a_repository_without_an_index_names_the_command_that_builds_it(repo: Path) -> None:
    result = bridge("search", "retry", "--repo", str(repo))
    assert result.returncode == 1
    assert f"run `bridge index {repo.resolve()}` first" in result.stderr


def test_a_file_passed_to_index_is_refused_with_what_to_pass_instead(repo: Path) -> None:
    result = bridge("index", str(repo / "src" / "config.py"))
    assert result.returncode == 1 and "is a file: pass the folder of the repository" in result.stderr


def test_a_dash_reads_the_query_from_standard_input(repo: Path, tmp_path: Path) -> None:
    idx = str(tmp_path / "idx")
    bridge("index", str(repo), "--index-dir", idx, "--no-vectors")
    report = "Retries never back off\n\nThe retry policy ignores its backoff setting.\n" + "log line\n" * 2000
    found = bridge("search", "-", "--index-dir", idx, "--json", stdin=report)
    assert found.returncode == 0, found.stderr
    data = json.loads(found.stdout)
    assert data["query"] == report and data["hits"][0]["path"] == "src/config.py"


def test_a_report_in_another_encoding_is_searched_with_its_odd_bytes_replaced(repo: Path, tmp_path: Path) -> None:
    idx = str(tmp_path / "idx")
    bridge("index", str(repo), "--index-dir", idx, "--embedder", "hash")
    latin1 = "Retries never back off (café)\n\nThe retry policy ignores its backoff.\n".encode("latin-1")
    found = subprocess.run([sys.executable, "-m", "bridge", "search", "-", "--index-dir", idx, "--json"],
                           capture_output=True, input=latin1, env=os.environ.copy(), timeout=120)
    assert found.returncode == 0, found.stderr
    data = json.loads(found.stdout)
    assert data["query"].startswith("Retries never back off (caf\ufffd)") and data["hits"]


def test_help_is_available_for_every_command() -> None:
    for command in ("index", "search", "status"):
        result = bridge(command, "-h")
        assert result.returncode == 0 and "Usage" in result.stdout


def test_status_says_how_to_finish_subjects_an_interrupted_index_left_unembedded() -> None:
    from bridge.cli.index_cmds import _history_line

    assert "`bridge index` embeds them" in _history_line({"commits": 3, "subjects_embedded": False}, True)
    assert _history_line({"commits": 3, "subjects_embedded": False}, False) == "history: 3 past commits"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_index_and_status_say_which_minilm_path_makes_the_vectors_and_why(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    idx = str(tmp_path / "idx")
    monkeypatch.setenv("BRIDGE_MINILM_PRECISION", "int8")
    built = bridge("index", str(repo), "--index-dir", idx)
    assert built.returncode == 0, built.stderr
    said = "embedder: minilm-int8 (int8 on ONNX Runtime, a stream per core; set by BRIDGE_MINILM_PRECISION)"
    assert said in " ".join(built.stderr.split())  # human output goes to stderr, and the console wraps long lines
    status = bridge("status", "--index-dir", idx, "--json")
    assert json.loads(status.stdout)["embedder"] == "minilm-int8"
    assert json.loads(status.stdout)["embedder_path"].startswith("int8 on ONNX Runtime")
    found = bridge("search", "retry policy backoff", "--index-dir", idx, "--mode", "vector", "--json")
    assert found.returncode == 0, found.stderr  # the int8 index answers vector searches with int8 queries
