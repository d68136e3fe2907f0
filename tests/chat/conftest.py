"""Chat tests: a small repository, its lexical index, and a live MCP server over it (one per module)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.chat import make_repo


@pytest.fixture(scope="module")
def chat_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repo(tmp_path_factory.mktemp("chat") / "demo")


@pytest.fixture(scope="module")
def chat_index(chat_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lexical-only index of chat_repo (no embedder is loaded by anything that opens it)."""
    from index.build.pipeline import BuildOptions, build_index

    index_dir = tmp_path_factory.mktemp("index") / "demo"
    build_index(chat_repo, index_dir, BuildOptions(embedder=None))
    return index_dir


@pytest.fixture(scope="module")
def live_server(chat_repo: Path, chat_index: Path) -> Iterator[object]:
    """An MCP server over HTTP on a free loopback port, with a token."""
    from bridge.server.transports import start_background

    with start_background([chat_repo], "chat-test-token", index_dir=chat_index, watch=False) as server:
        yield server
