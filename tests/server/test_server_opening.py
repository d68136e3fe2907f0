"""The indexes opening behind the stdio server's handshake: uses wait for them, failures reach every use."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bridge.errors import ServeError
from bridge.server.opening import OpeningRepos
from bridge.server.spec import RepoSpec, served_names


class _Opened:
    def __init__(self) -> None:
        self.repos = ["first"]
        self.default = "first"
        self.closed = False

    def get(self, name: str | None) -> str:
        return f"repo {name}"

    def close(self) -> None:
        self.closed = True


def test_a_use_waits_until_the_repositories_are_open_and_then_sees_them() -> None:
    release, opened = threading.Event(), _Opened()
    seen: list[object] = []
    opening = OpeningRepos(lambda: (release.wait(10), opened)[1], on_open=lambda: seen.append("open"))  # type: ignore[arg-type, return-value]
    opening.start()
    waiter = threading.Thread(target=lambda: seen.append(opening.get("demo")))
    waiter.start()
    assert not seen  # still opening
    release.set()
    waiter.join(10)
    assert sorted(map(str, seen)) == ["open", "repo demo"]
    assert opening.repos == ["first"] and opening.default == "first"
    opening.close()
    assert opened.closed


def test_a_failure_to_open_is_raised_to_every_use_and_reported_once() -> None:
    reported: list[BaseException] = []

    def fail() -> object:
        raise ServeError("index at X belongs to Y: pass that repository or another --index-dir")

    opening = OpeningRepos(fail, on_error=reported.append)  # type: ignore[arg-type]
    opening.start()
    for _ in range(2):
        with pytest.raises(ServeError, match="belongs to Y"):
            opening.get(None)
    assert len(reported) == 1
    opening.close()


def test_served_names_are_the_folder_names_made_unique_and_a_root_twice_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a" / "app").mkdir(parents=True)
    (tmp_path / "b" / "app").mkdir(parents=True)
    specs = (RepoSpec(tmp_path / "a" / "app"), RepoSpec(tmp_path / "b" / "app"))
    assert [name for name, _ in served_names(specs)] == ["app", "app-2"]
    with pytest.raises(ServeError, match="given twice"):
        served_names((RepoSpec(tmp_path / "a" / "app"), RepoSpec(tmp_path / "a" / "app" / ".." / "app")))
