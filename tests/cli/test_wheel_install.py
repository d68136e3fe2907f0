"""The wheel a user installs: built with `python -m build`, installed without extras into a fresh
virtualenv (no compiler: binary wheels only), then indexing, searching and serving over stdio from it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from support.chat import make_repo

ROOT = Path(__file__).resolve().parents[2]
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}


def _source_copy(target: Path) -> Path:
    """The working tree without what is not part of a source tree, so building writes nothing into it."""
    top = {".git", ".venv", "build", "dist", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"}

    def skip(folder: str, names: list[str]) -> set[str]:
        here = Path(folder).resolve()
        left = {n for n in names if n == "__pycache__" or n.endswith(".egg-info")}
        if here == ROOT:
            left |= top & set(names)
        if here == ROOT / "bench":
            left |= {"out"} & set(names)
        return left

    shutil.copytree(ROOT, target, ignore=skip, symlinks=True)
    return target


def _run(*command: str | Path, env: dict[str, str] | None = None, timeout: int = 300) -> str:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=timeout, check=False, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_wheel_installs_without_extras_and_indexes_searches_and_serves(tmp_path: Path) -> None:
    source = _source_copy(tmp_path / "source")
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "build", "--outdir", dist, source)
    wheel, = dist.glob("*.whl")
    sdist, = dist.glob("*.tar.gz")
    names = zipfile.ZipFile(wheel).namelist()
    assert {"prompts/system.txt", "prompts/question.txt", "index/rank/ranker.json", "index/rank/chunker.json",
            "index/build/__init__.py", "bridge/cli/__init__.py"} <= set(names)
    with tarfile.open(sdist) as tar:
        sdist_names = tar.getnames()
    assert any(n.endswith("/prompts/system.txt") for n in sdist_names)
    assert any(n.endswith("/index/rank/ranker.json") for n in sdist_names)

    # Nothing of this checkout on the path: pip and bridge see only the fresh virtualenv.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONWARNINGS")}
    env.update(BRIDGE_HOME=str(tmp_path / "home"), PYTHONUNBUFFERED="1")
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    # Binary wheels only: an install that needed a compiler would fail here instead of building.
    _run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--only-binary", ":all:", wheel, env=env, timeout=600)
    installed = _run(venv / "bin" / "python", "-m", "pip", "list", "--format=freeze", env=env)
    assert "\nmcp-retrieval-bridge==0.1.0" in f"\n{installed}".replace("_", "-")
    for heavy in ("torch", "llama_cpp_python", "llama-cpp-python", "openvino", "pymilvus", "onnxruntime", "faiss-cpu"):
        assert f"\n{heavy}==" not in f"\n{installed}", heavy

    bridge = venv / "bin" / "bridge"
    repo = make_repo(tmp_path / "demo")
    index = tmp_path / "index"
    said = _run(bridge, "index", repo, "--index-dir", index, env=env)
    assert "vectors: skipped, the dense extra is not installed" in said
    hits = json.loads(_run(bridge, "search", "parse_config settings file", "--index-dir", index, "--json", env=env))["hits"]
    assert hits[0]["path"] == "src/config.py"

    # An index with vectors, made by a full install (this checkout's), searched and served by this one: BM25
    # with one note, and the vectors left for an install with the dense extra.
    vectors = tmp_path / "vectors"
    full = dict(env, PYTHONPATH=str(ROOT))
    _run(sys.executable, "-m", "bridge", "index", repo, "--index-dir", vectors, "--embedder", "hash", env=full)
    searched = subprocess.run([str(bridge), "search", "parse_config settings file", "--index-dir", str(vectors), "--json"],
                              capture_output=True, text=True, timeout=60, env=env, check=False)
    assert searched.returncode == 0, searched.stderr[-3000:]
    note = ("lexical only: the index has vectors, but this install cannot read them "
            "(faiss is not installed; pip install 'mcp-retrieval-bridge[dense]' adds it)")
    assert searched.stderr.splitlines() == [f"note: {note}"]
    assert json.loads(searched.stdout)["note"] == note
    assert json.loads(searched.stdout)["hits"][0]["path"] == "src/config.py"

    ask = subprocess.run([str(bridge), "ask", "what reads the settings?", "--repo", str(repo), "--index-dir", str(index)],
                         capture_output=True, text=True, timeout=60, env=env, check=False)
    assert ask.returncode == 1
    assert ask.stderr.strip().splitlines()[-1] == (
        "error: bridge ask needs the chat extra: pip install 'mcp-retrieval-bridge[chat]', "
        "or pass --llm-url URL of an OpenAI-compatible server"
    )

    serve = [str(bridge), "serve", "--stdio", "--repo", str(repo), "--index-dir", str(index), "--audit-log", "off"]
    with subprocess.Popen(serve, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          env=env) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(INIT) + "\n")
            proc.stdin.flush()
            assert json.loads(proc.stdout.readline())["result"]["serverInfo"]
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) + "\n")
            proc.stdin.flush()
            listed = json.loads(proc.stdout.readline())
            assert listed["id"] == 2
            assert "search_code" in {t["name"] for t in listed["result"]["tools"]}
            proc.stdin.close()
            assert proc.wait(60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()

    served = [str(bridge), "serve", "--stdio", "--repo", str(repo), "--index-dir", str(vectors), "--audit-log", "off"]
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "search_code", "arguments": {"query": "parse_config settings file"}}}
    with subprocess.Popen(served, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        try:
            for request in (INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}):
                proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            assert json.loads(proc.stdout.readline())["id"] == 1
            proc.stdin.write(json.dumps(call) + "\n")
            proc.stdin.flush()
            answer = json.loads(proc.stdout.readline())["result"]
            proc.stdin.close()
            assert proc.wait(60) == 0
            said = proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
    assert not answer["isError"] and answer["structuredContent"]["note"] == note
    assert said.count(note) == 1  # said once, when the repository opened
    assert "embedded 100%" in _run(sys.executable, "-m", "bridge", "status", "--index-dir", vectors, env=full)
