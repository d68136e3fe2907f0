"""`bridge config CLIENT` snippets, and the example files in examples/ that match them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bridge.cli import app
from bridge.server.clients import client_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _config(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["config", *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_cline_gets_streamable_http_with_the_token_itself() -> None:
    code, out, err = _config("cline", "--token-env", "BRIDGE_TOKEN", env={"BRIDGE_TOKEN": "tok123"})
    assert code == 0
    server = json.loads(out)["mcpServers"]["code-search"]
    assert server["type"] == "streamableHttp" and server["url"] == "http://127.0.0.1:8765/mcp"
    assert server["headers"] == {"Authorization": "Bearer tok123"}
    assert "keep the file private" in err


def test_cline_without_the_variable_set_is_an_error() -> None:
    code, _, err = _config("cline", "--token-env", "BRIDGE_TOKEN", env={"BRIDGE_TOKEN": ""})
    assert code == 1 and "export BRIDGE_TOKEN" in err


def test_cursor_reads_the_token_from_its_environment() -> None:
    code, out, _ = _config("cursor", "--url", "http://127.0.0.1:9000/mcp", "--token-env", "T")
    assert json.loads(out) == {
        "mcpServers": {"code-search": {"url": "http://127.0.0.1:9000/mcp", "headers": {"Authorization": "Bearer ${env:T}"}}}
    }


def test_vscode_uses_servers_http_and_a_password_input() -> None:
    data = json.loads(_config("vscode", "--token-env", "T")[1])
    server = data["servers"]["code-search"]
    assert server["type"] == "http"
    assert server["headers"]["Authorization"] == "Bearer ${input:code-search-token}"
    assert data["inputs"][0]["id"] == "code-search-token" and data["inputs"][0]["password"] is True


def test_claude_desktop_launches_the_stdio_server(tmp_path: Path) -> None:
    data = json.loads(_config("claude", "--repo", str(tmp_path))[1])
    server = data["mcpServers"]["code-search"]
    assert server["args"][-4:] == ["serve", "--stdio", "--repo", str(tmp_path.resolve())]
    assert Path(server["command"]).is_absolute()


def test_an_unknown_client_is_a_usage_error() -> None:
    code, _, err = _config("emacs")
    assert code == 2 and "cline, cursor, vscode, claude" in err


def test_without_a_token_the_snippets_carry_no_headers() -> None:
    for client in ("cline", "cursor", "vscode"):
        assert "headers" not in json.dumps(client_config(client))


@pytest.mark.parametrize(
    ("file", "client"),
    [(".cursor/mcp.json", "cursor"), (".vscode/mcp.json", "vscode")],
)
def test_the_example_files_are_what_bridge_config_prints(file: str, client: str) -> None:
    assert json.loads((EXAMPLES / file).read_text()) == client_config(client, token_env="BRIDGE_TOKEN")


def test_the_cline_example_differs_from_bridge_config_only_in_the_token() -> None:
    example = json.loads((EXAMPLES / "cline_mcp_settings.json").read_text())
    token = example["mcpServers"]["code-search"]["headers"]["Authorization"].removeprefix("Bearer ")
    assert example == client_config("cline", token_env="BRIDGE_TOKEN", token=token)


def test_the_claude_example_runs_bridge_serve_stdio() -> None:
    server = json.loads((EXAMPLES / "claude_desktop_config.json").read_text())["mcpServers"]["code-search"]
    assert server["command"] == "bridge" and server["args"][:3] == ["serve", "--stdio", "--repo"]
