"""A small git repository with history, made by the real git, for the history tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
           "HOME": str(repo), "PATH": os.environ.get("PATH", "")}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def printer_repo(root: Path) -> Path:
    """Three commits: the printer added, the parser added, the printer fixed (with a body)."""
    root.mkdir()
    git(root, "init", "-q")
    commit(root, {"pkg/printer.py": "def pretty(x):\n    return str(x)\n"}, "Add the pretty printer")
    commit(root, {"pkg/parser.py": "def parse(s):\n    return s\n"}, "Add the parser")
    commit(root, {"pkg/printer.py": "def pretty(x):\n    return repr(x)\n"},
           "Fix pretty printing of nested matrices\n\nThe printer lost brackets around nested matrices.")
    return root
