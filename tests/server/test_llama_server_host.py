"""llama.cpp's own llama-server as the MCP host, with the config `bridge config llama-server` prints.

The real llama-server (built by `bash scripts/setup.sh --llama-server` from the llama.cpp that
llama-cpp-python vendors; scripts/test.sh builds it) spawns `serve --stdio`, lists its tools at
`GET /tools` and runs them at `POST /tools`, the loop its Web UI drives (tools/server/README-dev.md).
The bundled SmolLM2-135M is only loaded: its chat template takes no tools, so no model calls them.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.server import bridge_command, make_repo, subprocess_env

from bench.tool_tokens import _http, default_llama_server, llama_server
from bridge.llm.gguf import bundled_model_path

EXE = default_llama_server()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        EXE is None or not EXE.is_file(),
        reason="llama-server is not built: run `bash scripts/setup.sh --llama-server` (scripts/test.sh does)",
    ),
]


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-server hosting `bridge serve --stdio` over a small repository with a BM25 index."""
    work = tmp_path_factory.mktemp("llama-host")
    repo = make_repo(work / "demo")
    env = subprocess_env(work / "home")
    subprocess.run(bridge_command("index", str(repo), "--no-vectors"), env=env, check=True, capture_output=True, timeout=120)
    printed = subprocess.run(bridge_command("config", "llama-server", "--repo", str(repo)), env=env, check=True,
                             capture_output=True, text=True, timeout=60)
    config = json.loads(printed.stdout)
    assert EXE is not None
    with llama_server(EXE, bundled_model_path(), config, work, env=env) as url:  # env reaches the MCP server too
        yield url


def _call(url: str, tool: str, params: dict) -> dict:
    answer: dict = _http(f"{url}/tools", {"tool": f"code-search_{tool}", "params": params})
    return answer


def test_llama_server_lists_the_bridge_tools_at_start_up(host: str) -> None:
    listed = {t["tool"]: t for t in _http(f"{host}/tools") if t.get("type") == "mcp"}
    assert {"code-search_search_code", "code-search_read_file", "code-search_outline"} <= set(listed), (
        f"llama-server discovered {sorted(listed)}: the stdio server must answer tools/list within its 10 s"
    )
    definition = listed["code-search_search_code"]["definition"]["function"]
    assert definition["parameters"]["required"] == ["query"] and definition["description"]


def test_llama_server_runs_search_code_read_file_and_outline(host: str) -> None:
    search = _call(host, "search_code", {"query": "parse_config settings file", "k": 2})
    assert "src/config.py" in search["plain_text_response"], search
    read = _call(host, "read_file", {"path": "src/config.py", "start_line": 4, "end_line": 6})
    assert "def parse_config(path):" in read["plain_text_response"], read
    outline = _call(host, "outline", {"path": "src/config.py"})
    assert "parse_config" in outline["plain_text_response"] and "Loader" in outline["plain_text_response"], outline


def test_a_hostile_path_comes_back_as_a_readable_tool_error(host: str) -> None:
    answer = _call(host, "read_file", {"path": "../../etc/passwd"})
    assert "plain_text_response" not in answer and "root:" not in json.dumps(answer)
    error = answer["error"]
    assert "\n" not in error and "../../etc/passwd" in error, error


def test_the_config_names_an_executable_llama_server_can_start(tmp_path: Path) -> None:
    printed = subprocess.run(bridge_command("config", "llama-server", "--repo", str(tmp_path)), check=True,
                             capture_output=True, text=True, timeout=60, env=subprocess_env(tmp_path / "home"))
    server = json.loads(printed.stdout)["mcpServers"]["code-search"]
    assert Path(server["command"]).is_absolute()
    prefix = server["args"][: server["args"].index("serve")]  # `-m bridge` when no console script is installed
    version = subprocess.run([server["command"], *prefix, "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.startswith("mcp-retrieval-bridge "), version.stderr
