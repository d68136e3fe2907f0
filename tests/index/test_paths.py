from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.hostile import HOSTILE

from index.errors import PathNotAllowed
from index.files.discovery import resolve_path
from index.types import Selection

SELECTION = Selection(max_file_bytes=1000, exclude=("vendor/",))
SECRET_MARK = "SECRET-hunter2"
OUTSIDE_MARK = "OUTSIDE-the-root"

FILES: dict[str, str | bytes] = {
    "README.md": "# readme\n",
    "src/app.py": "print('app')\n",
    "src/pkg/mod.py": "x = 1\n",
    "docs/guide.md": "guide\n",
    ".gitignore": "*.log\nbuild/\n",
    "ignored.log": "log\n",
    "build/out.js": "out\n",
    ".env": f"TOKEN={SECRET_MARK}\n",
    "config/.env.local": f"TOKEN={SECRET_MARK}\n",
    "keys/id_rsa": SECRET_MARK,
    "server.pem": SECRET_MARK,
    "big.txt": "x" * 1001,
    "image.bin": b"\x89PNG\x00\x00\x00",
    "vendor/lib.py": "vendored\n",
    ".bridge-index/manifest.json": "{}\n",
}


def git(cwd: Path, *args: str) -> None:
    identity = ["-c", "user.name=Test", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", *identity, *args], cwd=cwd, check=True, capture_output=True)


def build(base: Path, kind: str) -> Path:
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(OUTSIDE_MARK)
    repo = base / "repo"
    repo.mkdir()
    if kind == "git":
        git(repo, "init", "-q")
    for name, content in FILES.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    os.symlink(outside / "secret.txt", repo / "link_out")
    os.symlink(outside, repo / "link_out_dir")
    os.symlink("loop_b", repo / "loop_a")
    os.symlink("loop_a", repo / "loop_b")
    os.symlink("src/app.py", repo / "link_in")
    os.symlink(".env", repo / "link_to_env")
    os.symlink("src", repo / "src_link")
    if kind == "git":
        os.symlink(".git/config", repo / "link_to_git")
        (repo / "deleted.py").write_text("gone\n")
        git(repo, "add", "README.md", "src", "deleted.py")
        git(repo, "commit", "-q", "-m", "first")
        (repo / "deleted.py").unlink()
    return repo


@pytest.fixture(scope="module", params=["git", "plain"])
def repo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp(f"paths-{request.param}")
    with pytest.MonkeyPatch.context() as patch:
        # The machine's own git config must not change what is selected.
        patch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        patch.setenv("GIT_CEILING_DIRECTORIES", str(base))
        yield build(base, request.param)


def resolve(repo: Path, user_path: str) -> Path:
    return resolve_path(repo, user_path, SELECTION, exclude_dirs=(repo / ".bridge-index",))


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_path_is_refused_with_a_message_naming_it(repo: Path, hostile: str) -> None:
    try:
        resolved = resolve(repo, hostile)
    except PathNotAllowed as error:
        message = str(error)
        assert message.startswith(f"path {hostile!r} ")
        assert "\n" not in message and ": " in message  # one line that says what to do
    else:
        assert resolved.is_relative_to(repo.resolve()), f"{hostile!r} escaped to {resolved}"
        text = resolved.read_text(errors="replace")
        assert SECRET_MARK not in text and OUTSIDE_MARK not in text, f"{hostile!r} exposed {resolved}"
        pytest.fail(f"{hostile!r} resolved to {resolved}")


@pytest.mark.parametrize(
    ("user_path", "expected"),
    [
        ("src/app.py", "src/app.py"),
        ("./src/app.py", "src/app.py"),
        ("src\\pkg\\mod.py", "src/pkg/mod.py"),
        (".\\README.md", "README.md"),
        ("src//pkg/./mod.py", "src/pkg/mod.py"),
        ("docs/guide.md", "docs/guide.md"),
        ("link_in", "src/app.py"),
    ],
)
def test_a_selected_file_resolves_to_its_real_path_inside_the_root(
    repo: Path, user_path: str, expected: str
) -> None:
    assert resolve(repo, user_path) == (repo / expected).resolve()


def test_refusals_say_why(repo: Path) -> None:
    reasons = {
        "../x": "leaves the repository",
        "/etc/passwd": "is absolute",
        ".env": "looks like a secret",
        "ignored.log": "is ignored",
        "src": "is a directory",
        "big.txt": "larger than the 1000-byte limit",
        "image.bin": "is a binary file",
        "link_out": "leaves the repository",
        "missing.py": "does not exist",
        ".bridge-index/manifest.json": "index directory",
    }
    for user_path, reason in reasons.items():
        with pytest.raises(PathNotAllowed, match=reason):
            resolve(repo, user_path)


def test_a_secret_resolves_when_the_selection_includes_it(repo: Path) -> None:
    selection = Selection(include=(".env",))
    assert resolve_path(repo, ".env", selection) == (repo / ".env").resolve()


def test_paths_an_index_listed_skip_the_ignore_check_but_no_other_check(repo: Path) -> None:
    known = {"ignored.log", ".env", "link_out", "big.txt", "image.bin", "../x"}
    # An index only lists selected files; trusting its list spares a git process per read.
    assert resolve_path(repo, "ignored.log", SELECTION, known=known) == (repo / "ignored.log").resolve()
    for user_path, reason in {".env": "looks like a secret", "link_out": "leaves the repository",
                              "big.txt": "larger than", "image.bin": "is a binary file",
                              "../x": "leaves the repository"}.items():
        with pytest.raises(PathNotAllowed, match=reason):
            resolve_path(repo, user_path, SELECTION, known=known)
