"""Server tests: BRIDGE_HOME in tmp_path, a small repository, and an open lexical-only service."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.server import make_repo


@pytest.fixture
def bridge_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("BRIDGE_HOME", str(home))
    return home


@pytest.fixture
def repo(tmp_path: Path, bridge_home: Path) -> Path:
    return make_repo(tmp_path / "demo")


@pytest.fixture
def service(repo: Path, tmp_path: Path) -> Iterator[object]:
    """A lexical-only service over `repo`, not watching, auditing to tmp_path/audit.jsonl."""
    from bridge.server.app import ServeOptions, open_service
    from bridge.server.repos import RepoSpec

    options = ServeOptions(repos=(RepoSpec(repo, no_vectors=True),), watch=False, audit_log=tmp_path / "audit.jsonl")
    svc = open_service(options)
    try:
        yield svc
    finally:
        svc.close()
