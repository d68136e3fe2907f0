from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from pathspec import GitIgnoreSpec

import index.files.discovery as discover_module
from index.errors import NotARepository, PathNotAllowed
from index.files.discovery import discover, list_candidate_paths, resolve_path, stat_signature
from index.files.ignore import any_of, matcher
from index.files.languages import language_for
from index.files.name_rules import SECRET_PATTERNS
from index.types import Selection


@pytest.fixture(autouse=True)
def _isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The machine's own git config (a global excludesFile, say) must not change what is selected.
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    yield


def git(cwd: Path, *args: str) -> None:
    identity = ["-c", "user.name=Test", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", *identity, *args], cwd=cwd, check=True, capture_output=True)


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def git_repo(root: Path, files: dict[str, str | bytes], commit: tuple[str, ...] = ()) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    write(root, files)
    if commit:
        git(root, "add", "-f", "--", *commit)
        git(root, "commit", "-q", "-m", "first")
    return root


def paths(
    root: Path, selection: Selection = Selection(), exclude_dirs: tuple[Path, ...] = ()
) -> list[str]:
    return [source.path for source in discover(root, selection, exclude_dirs).files]


def test_gitignore_negation_brings_a_file_back(tmp_path: Path) -> None:
    files = {".gitignore": "*.log\n!keep.log\n", "debug.log": "x", "keep.log": "y"}
    repo = git_repo(tmp_path / "repo", files)
    assert paths(repo) == [".gitignore", "keep.log"]


def test_a_nested_gitignore_applies_only_below_its_folder(tmp_path: Path) -> None:
    files = {"sub/.gitignore": "*.tmp\n", "sub/a.tmp": "x", "top.tmp": "y", "sub/a.py": "z"}
    repo = git_repo(tmp_path / "repo", files)
    assert paths(repo) == ["sub/.gitignore", "sub/a.py", "top.tmp"]


def test_git_info_exclude_is_honoured(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"notes.md": "mine", "main.py": "print()"})
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("notes.md\n")
    assert paths(repo) == ["main.py"]


def test_untracked_files_that_are_not_ignored_are_included(tmp_path: Path) -> None:
    files = {"tracked.py": "a", "untracked.py": "b", ".gitignore": "*.o\n", "x.o": "c"}
    repo = git_repo(tmp_path / "repo", files, commit=("tracked.py",))
    assert paths(repo) == [".gitignore", "tracked.py", "untracked.py"]


def test_a_tracked_file_that_is_gitignored_stays_selected_like_git_tracks_it(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {".gitignore": "*.cfg\n", "app.cfg": "k=v"}, commit=("app.cfg",))
    assert paths(repo) == [".gitignore", "app.cfg"]


def test_a_root_below_the_top_of_a_repository_lists_paths_relative_to_it(tmp_path: Path) -> None:
    files = {".gitignore": "*.log\n", "pkg/a.py": "a", "pkg/b.log": "b", "other.py": "c"}
    repo = git_repo(tmp_path / "repo", files)
    assert paths(repo / "pkg") == ["a.py"]


def test_a_root_its_enclosing_repository_ignores_is_read_as_a_plain_folder(tmp_path: Path) -> None:
    files = {
        ".gitignore": "vendored/\n",
        "vendored/lib.py": "x",
        "vendored/.gitignore": "*.tmp\n",
        "vendored/a.tmp": "y",
    }
    repo = git_repo(tmp_path / "repo", files)
    assert paths(repo / "vendored") == [".gitignore", "lib.py"]


def test_binary_files_are_skipped_and_counted(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00"
    files = {"image.png": png, "late.bin": b"a" * 9000 + b"\x00", "a.py": "x = 1\n"}
    repo = git_repo(tmp_path / "repo", files)
    found = discover(repo)
    # Only the first 8 KiB are sniffed, so a NUL past them does not make a file binary.
    assert [source.path for source in found.files] == ["a.py", "late.bin"]
    assert found.skipped == {"binary": 1}


def test_files_over_the_size_limit_are_skipped_and_counted(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"big.txt": "x" * 101, "edge.txt": "y" * 100})
    found = discover(repo, Selection(max_file_bytes=100))
    assert [source.path for source in found.files] == ["edge.txt"]
    assert found.skipped == {"too_large": 1}


def test_the_default_size_limit_is_one_mebibyte(tmp_path: Path) -> None:
    mebibyte = 1024 * 1024
    repo = git_repo(tmp_path / "repo", {"big.txt": "x" * (mebibyte + 1), "fits.txt": "y" * mebibyte})
    assert paths(repo) == ["fits.txt"]


SECRETS = {
    ".env": "A=1",
    ".env.local": "A=2",
    "config/.env.production": "A=3",
    "server.pem": "-----BEGIN",
    "tls/private.key": "k",
    "id_rsa": "k",
    "home/.ssh/id_rsa.pub": "k",
    "id_ed25519": "k",
    "cert.p12": "k",
    "cert.pfx": "k",
    "credentials.json": "{}",
    ".aws/credentials": "[default]",
    ".netrc": "machine x",
    ".pgpass": "h:5432:*:u:p",
    "release.keystore": "k",
    ".git-credentials": "https://u:p@x",
}


def test_likely_secrets_are_skipped_by_default(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {**SECRETS, "main.py": "print()"})
    found = discover(repo)
    assert [source.path for source in found.files] == ["main.py"]
    assert found.skipped == {"secret": len(SECRETS)}
    assert list_candidate_paths(repo) == ["main.py"]


def test_include_patterns_override_the_secret_rules(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {".env.example": "A=", ".env": "A=1", "main.py": "print()"})
    assert paths(repo, Selection(include=(".env.example",))) == [".env.example", "main.py"]


def test_secrets_can_be_indexed_when_the_rule_is_off(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {".env": "A=1", "server.pem": "k"})
    assert paths(repo, Selection(skip_secrets=False)) == [".env", "server.pem"]


def test_dependency_lock_files_are_skipped_and_counted_unless_included(tmp_path: Path) -> None:
    files = {"uv.lock": "[[package]]", "web/package-lock.json": "{}", "go.sum": "x h1:", "main.py": "print()",
             "lock.py": "import threading"}
    repo = git_repo(tmp_path / "repo", files)
    found = discover(repo)
    assert [source.path for source in found.files] == ["lock.py", "main.py"]
    assert found.skipped == {"lock_file": 3}
    assert paths(repo, Selection(include=("uv.lock",))) == ["lock.py", "main.py", "uv.lock"]


def test_a_lock_file_is_refused_by_name_with_the_flag_that_indexes_it(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"poetry.lock": "[[package]]", "main.py": "print()"})
    with pytest.raises(PathNotAllowed, match="lock file.*--include"):
        resolve_path(repo, "poetry.lock")


def test_exclude_patterns_skip_matching_files(tmp_path: Path) -> None:
    files = {"vendor/lib.py": "v", "app.min.js": "m", "app.js": "a", "src/vendor.py": "s"}
    repo = git_repo(tmp_path / "repo", files)
    found = discover(repo, Selection(exclude=("vendor/", "*.min.js")))
    assert [source.path for source in found.files] == ["app.js", "src/vendor.py"]
    assert found.skipped == {"excluded": 2}


@pytest.mark.parametrize("kind", ["git", "plain"])
def test_a_symlink_loop_does_not_stop_discovery(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "repo"
    if kind == "git":
        git_repo(root, {})
    write(root, {"a.py": "x", "sub/b.py": "y"})
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    os.symlink("..", root / "sub" / "up")
    os.symlink(root / "sub", root / "sub_again")
    found = discover(root)
    assert [source.path for source in found.files] == ["a.py", "sub/b.py"]
    assert found.skipped == {"broken_symlink": 2, "directory": 2}


@pytest.mark.parametrize("kind", ["git", "plain"])
def test_a_symlink_out_of_the_root_is_skipped_and_one_inside_is_followed(
    tmp_path: Path, kind: str
) -> None:
    outside = tmp_path / "outside"
    write(outside, {"secret.txt": "OUTSIDE"})
    root = tmp_path / "repo"
    if kind == "git":
        git_repo(root, {})
    write(root, {"a.py": "x = 1\n"})
    os.symlink(outside / "secret.txt", root / "leak.txt")
    os.symlink(outside, root / "leak_dir")
    os.symlink("a.py", root / "alias.py")
    os.symlink(".env", root / "innocent.txt")
    write(root, {".env": "TOKEN=1"})
    found = discover(root)
    assert [source.path for source in found.files] == ["a.py", "alias.py"]
    assert found.files[1].text == "x = 1\n"
    assert found.skipped == {"secret": 2, "symlink_outside_root": 2}


def test_a_symlink_into_the_git_directory_is_skipped(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"a.py": "x"})
    os.symlink(".git/config", repo / "config")
    found = discover(repo)
    assert [source.path for source in found.files] == ["a.py"]
    assert found.skipped == {"git_dir": 1}


def test_invalid_utf8_is_counted_and_decoded_with_replacement(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"latin1.txt": "caf\xe9".encode("latin-1"), "ok.txt": "café"})
    found = discover(repo)
    assert found.invalid_utf8 == 1
    latin1, ok = found.files
    assert (latin1.text, latin1.invalid_utf8) == ("caf\ufffd", True)
    assert (ok.text, ok.invalid_utf8) == ("café", False)


@pytest.mark.parametrize("kind", ["git", "plain"])
def test_the_index_directory_inside_the_root_is_never_indexed(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "repo"
    if kind == "git":
        git_repo(root, {})
    write(root, {"a.py": "x", ".bridge/index/manifest.json": "{}", ".bridge/notes.md": "kept"})
    assert paths(root, exclude_dirs=(root / ".bridge" / "index",)) == [".bridge/notes.md", "a.py"]
    assert paths(root, exclude_dirs=(Path(".bridge"),)) == ["a.py"]


def test_an_index_directory_outside_the_root_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root, {"a.py": "x"})
    assert paths(root, exclude_dirs=(tmp_path / "elsewhere", tmp_path)) == ["a.py"]


def test_a_tracked_file_deleted_from_disk_is_skipped(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"gone.py": "x", "here.py": "y"}, commit=("gone.py", "here.py"))
    (repo / "gone.py").unlink()
    found = discover(repo)
    assert [source.path for source in found.files] == ["here.py"]
    assert found.skipped == {"missing": 1}


def test_a_file_that_vanishes_or_cannot_be_read_is_counted_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    write(root, {"a.py": "x", "vanishes.py": "y", "locked.py": "z"})
    real_open = os.open

    def flaky_open(path: str, flags: int) -> int:
        if path.endswith("vanishes.py"):
            raise FileNotFoundError(path)
        if path.endswith("locked.py"):
            raise PermissionError(path)
        return real_open(path, flags)

    monkeypatch.setattr(discover_module.os, "open", flaky_open)
    found = discover(root)
    assert [source.path for source in found.files] == ["a.py"]
    assert found.skipped == {"missing": 1, "unreadable": 1}


def test_a_folder_outside_git_honours_its_gitignore_files(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    write(root, {
        ".gitignore": "*.log\n!keep.log\nbuild/\n/top_only.txt\n",
        "a.log": "x", "keep.log": "k", "build/out.js": "b",
        "top_only.txt": "t", "sub/top_only.txt": "s",
        "sub/.gitignore": "*.py\n!main.py\n", "sub/x.py": "x", "sub/main.py": "m", "x.py": "root py",
        ".git": "gitdir: ../elsewhere\n",
    })
    expected = [".gitignore", "keep.log", "sub/.gitignore", "sub/main.py", "sub/top_only.txt", "x.py"]
    assert paths(root) == expected


TRICKY_IGNORES = {
    ".gitignore": "/build\n*.o\nlogs/\n!logs/important.log\n"
    "docs/**/*.tmp\n!docs/keep.tmp\na/**/b\n\\#hash.txt\n",
    "build/x.c": "1", "src/build/y.c": "2", "main.o": "3", "src/main.c": "4",
    "logs/important.log": "5", "logs/other.log": "6", "docs/x/y.tmp": "7", "docs/keep.tmp": "8",
    "a/b": "9", "a/x/y/b": "10", "a/c": "11", "#hash.txt": "12",
    "src/.gitignore": "!*.o\n", "src/kept.o": "13",
}


def test_the_walk_selects_what_git_would_select(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", TRICKY_IGNORES)
    plain = tmp_path / "plain"
    write(plain, TRICKY_IGNORES)
    assert paths(plain) == paths(repo)
    assert "src/kept.o" in paths(plain) and "logs/important.log" not in paths(plain)


@pytest.mark.parametrize("kind", ["git", "plain"])
def test_an_empty_repository_has_no_files(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    if kind == "git":
        git(root, "init", "-q")
    assert discover(root).files == ()


def test_a_missing_root_raises_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(NotARepository, match=r"no directory at .*nope: check the path"):
        discover(tmp_path / "nope")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(NotARepository):
        list_candidate_paths(tmp_path / "file.txt")


def test_discovered_files_are_sorted_and_describe_their_bytes(tmp_path: Path) -> None:
    files = {"z.rs": "fn main() {}\n", "a/b.ts": "let x = 1;\n", "m.go": "package m\n"}
    repo = git_repo(tmp_path / "repo", files)
    found = discover(repo)
    assert [source.path for source in found.files] == ["a/b.ts", "m.go", "z.rs"]
    first = found.files[0]
    raw = (repo / "a" / "b.ts").read_bytes()
    assert first.sha == hashlib.sha1(raw).hexdigest()
    assert (first.size, first.mtime_ns) == (len(raw), (repo / "a" / "b.ts").stat().st_mtime_ns)
    assert [source.language for source in found.files] == ["typescript", "go", "rust"]


def test_list_candidate_paths_applies_the_rules_without_reading_contents(tmp_path: Path) -> None:
    files = {"a.py": "x", "blob.bin": b"\x00\x01", ".env": "A=1", "v/x.py": "y"}
    repo = git_repo(tmp_path / "repo", files)
    assert list_candidate_paths(repo, Selection(exclude=("v/",))) == ["a.py", "blob.bin"]


def test_stat_signature_reports_size_and_mtime_or_none_when_gone(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root, {"a.py": "abc"})
    source = discover(root).files[0]
    assert stat_signature(root, "a.py") == (source.size, source.mtime_ns)
    assert stat_signature(root, "missing.py") is None


def test_discovering_the_python_standard_library_is_fast(tmp_path: Path) -> None:
    import sysconfig
    import time

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    copy = tmp_path / "stdlib"
    skip = shutil.ignore_patterns("site-packages", "__pycache__", "test", "idlelib")
    shutil.copytree(stdlib, copy, ignore=skip)
    started = time.perf_counter()
    found = discover(copy)
    elapsed = time.perf_counter() - started
    assert len(found.files) > 500
    assert elapsed < 2.0


@pytest.mark.parametrize(
    ("path", "language"),
    [("a/b.py", "python"), ("x.JS", "javascript"), ("c.tsx", "tsx"), ("Makefile", "make"),
     ("notes", None), ("lib.h", "c"), ("lib.hpp", "cpp"), ("doc.rst", "rst"), ("a\\b.toml", "toml"),
     ("run.sh", "shell")],
)
def test_language_is_named_from_the_file_name(path: str, language: str | None) -> None:
    assert language_for(path) == language


NAMES = ["a/.env", ".env.local", "x/y.pem", "k.key", "id_rsa", "a/id_rsa.pub", "credentials.json", "a/b/.netrc",
         "foo.py", "env", "a.pem/b", "x.keystore", "pem", "a/_netrc", ".pgpassx", "b/.npmrc/c", "notid_rsa",
         "src/a/b.py", "src/b.py", "docs/x.md", "build/", "build/x.o", "a/build", "keep.log", "x.log"]


@pytest.mark.parametrize("patterns", [SECRET_PATTERNS, ("src/**/*.py", "*.md"), ("*.log", "!keep.log"), ("build/",)])
def test_the_one_regex_matcher_decides_every_name_as_pathspec_does(patterns: tuple[str, ...]) -> None:
    spec = GitIgnoreSpec.from_lines(patterns)
    decides = matcher(patterns)
    alternation = any_of(spec)
    assert decides is not None and alternation is not None
    for name in NAMES:
        assert decides.match_file(name) == spec.match_file(name), name
        if alternation.search(name) is None:  # the walk's shortcut: no pattern matches, no verdict
            assert spec.check_file(name).include is None, name
