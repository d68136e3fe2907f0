"""Shared fixtures: a small real git repository, and an isolated BRIDGE_HOME for every test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SAMPLE = {
    "src/config.py": '''"""Configuration loading."""

import json


def load_config(path):
    """Read a JSON configuration file and return it as a dict."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class RetryPolicy:
    """How often and how long to retry a failed connection."""

    def __init__(self, attempts=3, backoff=0.5):
        self.attempts = attempts
        self.backoff = backoff

    def delays(self):
        return [self.backoff * 2**i for i in range(self.attempts)]
''',
    "src/server.py": '''import socket


def serve_forever(host, port):
    """Accept TCP connections and echo what they send."""
    sock = socket.create_server((host, port))
    while True:
        conn, _ = sock.accept()
        conn.sendall(conn.recv(4096))


def parse_port(text):
    value = int(text)
    if not 0 < value < 65536:
        raise ValueError(f"invalid port number: {value}")
    return value
''',
    "web/app.ts": '''export function renderGreeting(name: string): string {
  return `Hello, ${name}!`;
}

export class SessionStore {
  private sessions = new Map<string, number>();
  touch(id: string): void { this.sessions.set(id, Date.now()); }
}
''',
    "README.md": "# Sample\n\nA tiny service with a retry policy and a port parser.\n",
    ".gitignore": "build/\n*.log\n",
    "build/generated.py": "def generated():\n    return 1\n",
    "debug.log": "noise\n",
}


def make_repo(root: Path, files: dict[str, str] = SAMPLE, git: bool = True) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if git:
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture(autouse=True)
def bridge_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "bridge-home"
    monkeypatch.setenv("BRIDGE_HOME", str(home))
    return home
