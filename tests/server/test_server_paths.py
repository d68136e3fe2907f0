"""read_file, outline and list_files never leave the repository or show what the index would not.

Table-driven: each hostile path must come back as a tool error that names the path, and nothing
of the protected files' contents may appear in any answer.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.hostile import HOSTILE_PATHS
from support.server import call_tool, call_tools, make_repo, text_of

from bridge.server.app import ServeOptions, build_server, open_service
from bridge.server.repos import RepoSpec

SECRETS = ("hunter2", "TOPSECRET", "BEGIN OPENSSH", "repositoryformatversion", "generated = True", "log line")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, Path]]:
    base = tmp_path_factory.mktemp("paths")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOPSECRET\n")
    root = make_repo(base / "repo")
    (root / "big.txt").write_text("x" * (1024 * 1024 + 1))
    os.mkfifo(root / "pipe")
    links = {
        "link_out": outside / "secret.txt",
        "outdir": outside,
        "link_env": root / ".env",
        "link_git": root / ".git" / "config",
        "link_dir_inside": root / "src",
        "broken_link": root / "does-not-exist",
        "loop_a": root / "loop_b",
        "loop_b": root / "loop_a",
        "link_abs_passwd": Path("/etc/passwd"),
    }
    for name, target in links.items():
        (root / name).symlink_to(target)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BRIDGE_HOME", str(base / "home"))
        svc = open_service(ServeOptions(repos=(RepoSpec(root, no_vectors=True),), watch=False, audit_log=None))
        try:
            yield build_server(svc), root
        finally:
            svc.close()


def test_there_are_at_least_thirty_hostile_paths() -> None:
    assert len(set(HOSTILE_PATHS)) >= 30


@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_hostile_path_is_refused_by_read_file_and_outline_with_the_path_named(
    hostile: tuple[object, Path], path: str
) -> None:
    server, _ = hostile
    for tool in ("read_file", "outline"):
        result = call_tool(server, tool, {"path": path})
        assert result.is_error, f"{tool} served {path!r}"
        message = text_of(result)
        assert repr(path) in message, message
        assert not any(secret in message for secret in SECRETS)


def test_an_absolute_path_to_a_real_repository_file_is_refused_too(hostile: tuple[object, Path]) -> None:
    server, root = hostile
    path = str(root / "README.md")
    result = call_tool(server, "read_file", {"path": path})
    assert result.is_error and "absolute" in text_of(result)


@pytest.mark.parametrize("glob", ["**", "../**", "/etc/*", ".git/**", "**/.env", "*", "outdir/**", "link_*", "build/**"])
def test_list_files_never_lists_what_the_index_excludes(hostile: tuple[object, Path], glob: str) -> None:
    server, _ = hostile
    files = call_tool(server, "list_files", {"path_glob": glob}).structured_content["files"]
    forbidden = {".env", "id_rsa", "build/out.py", "debug.log", "blob.bin", "big.txt", "pipe", "outdir/secret.txt"}
    assert not forbidden & set(files)
    assert not any(f.startswith((".git/", "..", "/")) or f.startswith("link_") for f in files)


def test_legitimate_paths_still_read_in_any_harmless_spelling(hostile: tuple[object, Path]) -> None:
    server, _ = hostile
    results = call_tools(
        server,
        [("read_file", {"path": p}) for p in ("src/config.py", "./src/config.py", "src//config.py", "src\\config.py")],
    )
    assert all(not r.is_error for r in results)
    assert {r.structured_content["path"] for r in results} == {"src/config.py"}
