"""`bridge config CLIENT` snippets, and the example files in examples/ that match them.

Each client's test names the documented fields it checks (and where they are documented).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bridge.cli import app
from bridge.server import clients
from bridge.server.clients import CLIENTS, client_config, installed_command, path_shadow, to_yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PLACEHOLDER_REPO = Path("/absolute/path/to/your/repository")
PLACEHOLDER_TOKEN = "PASTE-THE-VALUE-OF-BRIDGE_TOKEN"


def _config(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["config", *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def _snippet(*args: str) -> dict:
    code, out, err = _config(*args, env={"BRIDGE_TOKEN": "tok123"})
    assert code == 0, err
    return yaml.safe_load(out)  # JSON is YAML too, so one parser reads every client's snippet


def test_cline_gets_streamable_http_with_the_token_itself() -> None:
    """Cline's cline_mcp_settings.json (docs.cline.bot, MCP > Configuring MCP servers): `type`
    "streamableHttp", `url`, `headers`, `disabled`, `autoApprove`."""
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
    """Cursor's mcp.json (cursor.com/docs, MCP): `url` + `headers`, `${env:NAME}` expanded."""
    code, out, _ = _config("cursor", "--url", "http://127.0.0.1:9000/mcp", "--token-env", "T")
    assert json.loads(out) == {
        "mcpServers": {"code-search": {"url": "http://127.0.0.1:9000/mcp", "headers": {"Authorization": "Bearer ${env:T}"}}}
    }


def test_vscode_uses_servers_http_and_a_password_input() -> None:
    """VS Code's .vscode/mcp.json (code.visualstudio.com, MCP configuration reference): top-level
    `servers`, `type` "http", `headers`, and `inputs` of `type` "promptString" with `password`."""
    data = json.loads(_config("vscode", "--token-env", "T")[1])
    server = data["servers"]["code-search"]
    assert server["type"] == "http"
    assert server["headers"]["Authorization"] == "Bearer ${input:code-search-token}"
    assert data["inputs"][0]["id"] == "code-search-token" and data["inputs"][0]["password"] is True


def test_claude_desktop_launches_the_stdio_server(tmp_path: Path) -> None:
    """Claude Desktop's claude_desktop_config.json (modelcontextprotocol.io, local servers):
    `mcpServers` entries with `command` and `args`; stdio only."""
    data = json.loads(_config("claude", "--repo", str(tmp_path))[1])
    server = data["mcpServers"]["code-search"]
    assert server["args"][-4:] == ["serve", "--stdio", "--repo", str(tmp_path.resolve())]
    assert Path(server["command"]).is_absolute()


def test_lm_studio_takes_cursors_notation_with_the_token_itself() -> None:
    """LM Studio's mcp.json (lmstudio.ai/docs/app/mcp: "follows Cursor's mcp.json notation"): an
    `mcpServers` entry with `url` and `headers` {"Authorization": "Bearer <token>"}."""
    server = _snippet("lmstudio", "--token-env", "BRIDGE_TOKEN")["mcpServers"]["code-search"]
    assert server == {"url": "http://127.0.0.1:8765/mcp", "headers": {"Authorization": "Bearer tok123"}}


def test_continue_gets_a_yaml_block_with_headers_under_request_options() -> None:
    """Continue's config.yaml / .continue/mcpServers block (docs.continue.dev, deep dives > MCP):
    `name`, `version`, `schema`, and a list `mcpServers` of {`name`, `type` "streamable-http", `url`,
    `requestOptions`: {`headers`}}."""
    code, out, _ = _config("continue", "--token-env", "BRIDGE_TOKEN", env={"BRIDGE_TOKEN": "tok123"})
    assert code == 0 and not out.lstrip().startswith("{")  # YAML, not JSON
    block = yaml.safe_load(out)
    assert block["schema"] == "v1" and block["version"] and block["name"]
    assert block["mcpServers"] == [{
        "name": "code-search", "type": "streamable-http", "url": "http://127.0.0.1:8765/mcp",
        "requestOptions": {"headers": {"Authorization": "Bearer tok123"}},
    }]


def test_zed_puts_the_server_under_context_servers() -> None:
    """Zed's settings.json (zed.dev/docs/ai/mcp, "As Custom Servers"): `context_servers`, a remote
    server with `url` and `headers`, a local one with `command`, `args`, `env`."""
    remote = _snippet("zed", "--token-env", "BRIDGE_TOKEN")["context_servers"]["code-search"]
    assert remote == {"url": "http://127.0.0.1:8765/mcp", "headers": {"Authorization": "Bearer tok123"}}
    local = _snippet("zed", "--stdio")["context_servers"]["code-search"]
    assert set(local) == {"command", "args", "env"} and local["args"][:2] == ["serve", "--stdio"]


def test_roo_code_names_the_streamable_http_type() -> None:
    """Roo Code's mcp_settings.json / .roo/mcp.json (docs.roocode.com, Using MCP in Roo Code,
    Streamable HTTP transport): `type` "streamable-http", `url`, `headers`."""
    server = _snippet("roo", "--token-env", "BRIDGE_TOKEN")["mcpServers"]["code-search"]
    assert server == {"type": "streamable-http", "url": "http://127.0.0.1:8765/mcp",
                      "headers": {"Authorization": "Bearer tok123"}}


def test_goose_gets_a_streamable_http_extension_with_a_uri() -> None:
    """Goose's ~/.config/goose/config.yaml (block.github.io/goose, configuration files; the
    streamable_http ExtensionConfig): `extensions` entries with `enabled`, `type` "streamable_http",
    `name`, `uri`, `headers`, `timeout`; stdio ones with `type` "stdio", `cmd`, `args`."""
    extension = _snippet("goose", "--token-env", "BRIDGE_TOKEN")["extensions"]["code-search"]
    assert extension["enabled"] is True and extension["type"] == "streamable_http" and extension["name"] == "code-search"
    assert extension["uri"] == "http://127.0.0.1:8765/mcp" and extension["headers"] == {"Authorization": "Bearer tok123"}
    assert isinstance(extension["timeout"], int)
    stdio = _snippet("goose", "--stdio")["extensions"]["code-search"]
    assert stdio["type"] == "stdio" and Path(stdio["cmd"]).is_absolute() and stdio["args"][:2] == ["serve", "--stdio"]


def test_jan_gets_an_active_http_entry() -> None:
    """Jan's mcp_config.json (jan.ai/docs, MCP servers: Transport HTTP; the `type` "http" + `url`
    entries of Jan's default config, which also carry `command`, `args`, `env`, `active`)."""
    server = _snippet("jan", "--token-env", "BRIDGE_TOKEN")["mcpServers"]["code-search"]
    assert server["type"] == "http" and server["url"] == "http://127.0.0.1:8765/mcp" and server["active"] is True
    assert server["headers"] == {"Authorization": "Bearer tok123"}


def test_llama_server_gets_a_stdio_server_with_this_installations_executable(tmp_path: Path) -> None:
    """llama.cpp's llama-server (tools/server/README.md, "MCP servers"): a Cursor-compatible
    `mcpServers` file whose entries take `command` (required), `args`, `env`, `cwd`, `timeout_ms`;
    stdio only, `command` resolved on llama-server's PATH, hence an absolute path here."""
    data = _snippet("llama-server", "--repo", str(tmp_path), "--tools", "read_file,search_code")
    server = data["mcpServers"]["code-search"]
    assert set(server) <= {"command", "args", "env", "cwd", "timeout_ms"}
    assert Path(server["command"]).is_absolute() and Path(server["command"]).exists()
    assert server["args"][-6:] == ["serve", "--stdio", "--repo", str(tmp_path.resolve()), "--tools", "search_code,read_file"]


@pytest.mark.parametrize("client", ["lmstudio", "continue", "roo", "jan", "cursor"])
def test_clients_that_take_stdio_get_the_command_line_with_stdio(client: str, tmp_path: Path) -> None:
    text = json.dumps(_snippet(client, "--stdio", "--repo", str(tmp_path)))
    assert '"--stdio"' in text and json.dumps(str(tmp_path.resolve())) in text and "url" not in text


def test_a_client_without_stdio_refuses_it() -> None:
    code, _, err = _config("vscode", "--stdio")
    assert code == 1 and "vscode takes http servers only" in err


def test_an_unknown_tool_name_is_a_usage_error_that_lists_the_tools() -> None:
    code, _, err = _config("llama-server", "--tools", "search_code,grep")
    assert code == 2 and "'grep'" in err and "search_code, read_file, list_files" in err


def test_an_unknown_client_is_a_usage_error() -> None:
    code, _, err = _config("emacs")
    assert code == 2 and "cline, cursor, vscode, claude, lmstudio, continue, zed, roo, goose, jan, llama-server" in err


def test_without_a_token_the_snippets_carry_no_headers() -> None:
    for client, spec in CLIENTS.items():
        if "http" in spec.transports:
            assert "headers" not in json.dumps(client_config(client)), client


def test_every_client_that_needs_the_token_itself_refuses_an_unset_variable() -> None:
    for client, spec in CLIENTS.items():
        if spec.token == "literal":
            with pytest.raises(clients.ServeError, match="export BRIDGE_TOKEN"):
                client_config(client, token_env="BRIDGE_TOKEN", token=None)


def test_yaml_output_reads_back_as_the_same_data() -> None:
    data = {"a": [{"b": "c: d", "e": [1, True]}, "x"], "empty": {}, "none": [], "url": "http://h:1/mcp", "n": 300,
            "path": "/home/zoë/😀 repo", "tab": "a\tb"}
    assert yaml.safe_load(to_yaml(data)) == data


# The console script name and the `bridge` on PATH


def test_the_stdio_command_is_the_running_console_script_by_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "bin" / "bridge"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "mcp-retrieval-bridge").write_text("#!/bin/sh\n")
    monkeypatch.setattr("sys.argv", [str(script), "config", "claude"])
    assert installed_command() == (str(tmp_path / "bin" / "mcp-retrieval-bridge"), [])  # the unambiguous name


def test_without_a_console_script_the_command_is_this_python_with_dash_m(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.argv", [str(tmp_path / "bridge" / "__main__.py")])
    monkeypatch.setattr(clients, "_script_dirs", lambda: [tmp_path])
    command, prefix = installed_command()
    assert (command, prefix) == (sys.executable, ["-m", "bridge"])


def test_config_says_when_the_bridge_on_path_is_another_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On Debian and Ubuntu, iproute2 installs /usr/sbin/bridge: a host would run that instead."""
    other = tmp_path / "sbin" / "bridge"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\necho iproute2\n")
    other.chmod(0o755)
    monkeypatch.setenv("PATH", str(other.parent))
    note = path_shadow()
    assert note is not None and str(other) in note and "not this installation" in note
    code, _, err = _config("claude", env={"PATH": str(other.parent)})
    assert code == 0 and f"`bridge` on PATH is {other}, not this installation" in err


def test_config_says_nothing_when_the_bridge_on_path_is_this_installation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = tmp_path / "bin" / "bridge"
    own.parent.mkdir()
    own.write_text("#!/bin/sh\n")
    own.chmod(0o755)
    monkeypatch.setattr(clients, "_script_dirs", lambda: [own.parent])
    monkeypatch.setenv("PATH", str(own.parent))
    assert path_shadow() is None


def test_version_prints_the_distribution_name_and_version() -> None:
    from bridge import __version__

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"mcp-retrieval-bridge {__version__}\n"


def test_the_package_declares_both_console_scripts() -> None:
    import tomllib

    scripts = tomllib.loads((EXAMPLES.parent / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["bridge"] == scripts["mcp-retrieval-bridge"] == "bridge.cli:main"


# examples/: the same snippets, with placeholders for the token, the repository and the executable

EXAMPLE_FILES = [
    (".cursor/mcp.json", "cursor", "http"),
    (".vscode/mcp.json", "vscode", "http"),
    ("cline_mcp_settings.json", "cline", "http"),
    ("claude_desktop_config.json", "claude", "stdio"),
    ("lmstudio/mcp.json", "lmstudio", "http"),
    ("continue/code-search.yaml", "continue", "http"),
    ("zed/settings.json", "zed", "http"),
    (".roo/mcp.json", "roo", "http"),
    ("goose/config.yaml", "goose", "http"),
    ("jan/mcp_config.json", "jan", "http"),
    ("llama-server/mcp.json", "llama-server", "stdio"),
]


@pytest.mark.parametrize(("file", "client", "transport"), EXAMPLE_FILES)
def test_the_example_files_are_what_bridge_config_prints(
    file: str, client: str, transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clients, "installed_command", lambda: ("mcp-retrieval-bridge", []))
    expected = client_config(client, token_env="BRIDGE_TOKEN", token=PLACEHOLDER_TOKEN, repo=PLACEHOLDER_REPO,
                             transport=transport)  # type: ignore[arg-type]
    text = (EXAMPLES / file).read_text()
    assert (yaml.safe_load(text) if file.endswith(".yaml") else json.loads(text)) == expected


def test_no_example_or_doc_starts_a_bare_bridge_command() -> None:
    """A config that says `"command": "bridge"` runs iproute2's tool on Debian and Ubuntu."""
    for path in [*EXAMPLES.rglob("*"), *(EXAMPLES.parent / "docs").glob("*.md"), EXAMPLES.parent / "README.md"]:
        if path.is_file():
            text = path.read_text()
            assert '"command": "bridge"' not in text and "cmd: bridge" not in text, path


def test_serve_refuses_an_unknown_tool_name_in_one_line() -> None:
    result = CliRunner().invoke(app, ["serve", "--tools", "search_code,grep", "--stdio"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "'grep'" in result.stderr and "list_repos" in result.stderr
