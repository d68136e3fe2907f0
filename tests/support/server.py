"""Server test helpers: a small repository, an in-memory MCP client, and the CLI as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

FILES = {
    "src/config.py": (
        "import os\n\n\n"
        "def parse_config(path):\n"
        "    \"\"\"Read the settings file and return its key/value pairs.\"\"\"\n"
        "    pairs = {}\n"
        "    for line in open(path):\n"
        "        key, _, value = line.partition('=')\n"
        "        pairs[key.strip()] = value.strip()\n"
        "    return pairs\n\n\n"
        "class Loader:\n"
        "    def load(self, path):\n"
        "        return parse_config(path)\n"
    ),
    "src/server.py": "".join(f"def handler_{i}(request):\n    return 'response {i}'\n\n\n" for i in range(60)),
    "docs/guide.md": "# Guide\n\nThe loader reads settings.\n\n```python\nLoader().load('x')\n```\n",
    "README.md": "# Demo\n\nA small repository for the server tests.\n",
    "empty.txt": "",
}


def make_repo(root: Path) -> Path:
    """A small repository with code, docs, a secret, an ignored file and a .git folder."""
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / ".env").write_text("API_KEY=hunter2\n")
    (root / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("generated = True\n")
    (root / "debug.log").write_text("log line\n")
    (root / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def bridge_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "bridge", *args]


@dataclass
class Served:
    url: str
    proc: subprocess.Popen
    stderr: list[str]
    stdout: str = ""


@contextmanager
def bridge_serve(args: list[str], env: dict[str, str]) -> Iterator[Served]:
    """Start `bridge serve ... --port 0`, wait for the URL it prints, stop it afterwards."""
    proc = subprocess.Popen(
        bridge_command("serve", *args, "--port", "0"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    url = None
    for line in proc.stderr:  # ends when the process exits
        lines.append(line)
        if line.startswith("MCP endpoint: "):
            url = line.split(": ", 1)[1].strip()
            break
    drain = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    drain.start()
    served = Served(url or "", proc, lines)
    try:
        if url is None:
            proc.wait(10)
            pytest.fail("bridge serve did not start:\n" + "".join(lines))
        yield served
    finally:
        proc.terminate()
        proc.wait(20)
        drain.join(10)
        served.stdout = proc.stdout.read()
        proc.stdout.close()
        proc.stderr.close()


def subprocess_env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, BRIDGE_HOME=str(home), PYTHONUNBUFFERED="1", **extra)
    env.pop("PYTHONWARNINGS", None)
    return env


def call_tools(server: object, calls: list[tuple[str, dict]]) -> list[object]:
    """Call tools in order over one in-memory MCP session; returns the CallToolResults."""
    import anyio
    from mcp import Client

    async def main() -> list[object]:
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(main)


def call_tool(server: object, name: str, args: dict | None = None) -> object:
    return call_tools(server, [(name, args or {})])[0]


def text_of(result: object) -> str:
    (block,) = result.content  # type: ignore[attr-defined]
    return block.text
