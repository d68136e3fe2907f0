"""Settings snippets for MCP clients, as printed by `bridge config CLIENT` (examples/ holds copies).

Each client is one `Client` row: where its settings live, the transports it takes, how it wants a
bearer token written, and a function that shapes one server entry. Fields checked against each
client's documentation (tests/server/test_server_config.py names them per client):
- Cline (`cline_mcp_settings.json`): `"type": "streamableHttp"` (a bare `url` means legacy SSE);
  `headers` are sent as written, with no variable expansion, so the token itself goes in.
- Cursor (`.cursor/mcp.json`): `url` + `headers`; `${env:NAME}` is expanded from Cursor's environment.
- VS Code (`.vscode/mcp.json`): top-level `servers`, `"type": "http"`; the token comes from a
  `promptString` input (`${input:...}`), asked once and stored by VS Code, because `${env:...}`
  is not expanded inside `headers` (microsoft/vscode#336232).
- Claude Desktop (`claude_desktop_config.json`): stdio servers only, so it launches
  `serve --stdio` itself; no token is needed.
- LM Studio (`mcp.json`): Cursor's notation, `url` + `headers` (or `command` + `args`).
- Continue (a `.continue/mcpServers/*.yaml` block, or `config.yaml`): a list under `mcpServers`,
  each with `name`, `type: streamable-http` + `url`, headers under `requestOptions.headers`.
- Zed (`settings.json`): `context_servers`, each `url` + `headers` or `command` + `args` + `env`.
- Roo Code (`.roo/mcp.json` or `mcp_settings.json`): `"type": "streamable-http"` + `url` + `headers`.
- Goose (`~/.config/goose/config.yaml`): `extensions`, each `enabled`, `type: streamable_http`,
  `name`, `uri`, `headers`, `timeout` (stdio: `type: stdio`, `cmd`, `args`).
- Jan (`mcp_config.json`): `mcpServers`, `"type": "http"` + `url` + `headers`, `active`, and the
  empty `command`/`args`/`env` Jan's own HTTP entries carry.
- llama.cpp's llama-server (`--mcp-servers-config FILE`): Cursor-style `mcpServers` with `command`,
  `args` (also `env`, `cwd`, `timeout_ms`); stdio only.
Only Cursor and VS Code expand a variable in `headers`; every other client gets the token itself.

Stdio snippets name the running installation's own executable by absolute path: on Debian and
Ubuntu a bare `bridge` is iproute2's network tool (/usr/sbin/bridge), which a host would run instead.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bridge.errors import ServeError

__all__ = [
    "CLIENTS",
    "DEFAULT_URL",
    "SCRIPT_NAMES",
    "Client",
    "client_config",
    "installed_command",
    "path_shadow",
    "to_yaml",
]

DEFAULT_URL = "http://127.0.0.1:8765/mcp"
SCRIPT_NAMES = ("mcp-retrieval-bridge", "bridge")  # the unambiguous name first
Transport = Literal["http", "stdio"]
TokenStyle = Literal["literal", "cursor-env", "vscode-input", "none"]


@dataclass(frozen=True)
class Server:
    """What one entry connects to: the HTTP endpoint, or the command line of a stdio server."""

    name: str
    url: str
    auth: str | None  # the Authorization header value as this client writes it; None: no token
    command: str
    args: tuple[str, ...]
    token_env: str | None = None


@dataclass(frozen=True)
class Client:
    name: str
    where: str  # the settings file, for the line printed beside the snippet
    transports: tuple[Transport, ...]  # the first is the default
    token: TokenStyle
    entry: Callable[[Server, Transport], dict[str, Any]]  # one server's settings
    wrap: Callable[[Server, dict[str, Any]], dict[str, Any]]  # the whole snippet around it
    format: Literal["json", "yaml"] = "json"


def _headers(server: Server) -> dict[str, Any]:
    return {"headers": {"Authorization": server.auth}} if server.auth else {}


def _command(server: Server) -> dict[str, Any]:
    return {"command": server.command, "args": list(server.args)}


def _mcp_servers(server: Server, entry: dict[str, Any]) -> dict[str, Any]:
    return {"mcpServers": {server.name: entry}}


def _cline(s: Server, t: Transport) -> dict[str, Any]:
    return {"type": "streamableHttp", "url": s.url, "disabled": False, "autoApprove": [], **_headers(s)}


def _url_headers(s: Server, t: Transport) -> dict[str, Any]:  # Cursor's notation: Cursor, LM Studio
    return {"url": s.url, **_headers(s)} if t == "http" else _command(s)


def _vscode(s: Server, t: Transport) -> dict[str, Any]:
    return {"type": "http", "url": s.url, **_headers(s)}


def _vscode_wrap(s: Server, entry: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {"servers": {s.name: entry}}
    if s.auth:
        config["inputs"] = [
            {
                "type": "promptString",
                "id": f"{s.name}-token",
                "description": f"Token of the code-search MCP server (the value of {s.token_env})",
                "password": True,
            }
        ]
    return config


def _continue(s: Server, t: Transport) -> dict[str, Any]:
    if t == "stdio":
        return {"name": s.name, "type": "stdio", **_command(s)}
    entry: dict[str, Any] = {"name": s.name, "type": "streamable-http", "url": s.url}
    if s.auth:
        entry["requestOptions"] = {"headers": {"Authorization": s.auth}}
    return entry


def _continue_wrap(s: Server, entry: dict[str, Any]) -> dict[str, Any]:
    # A block file's header (`name`, `version`, `schema`), so the snippet is a whole file.
    return {"name": s.name, "version": "0.0.1", "schema": "v1", "mcpServers": [entry]}


def _zed(s: Server, t: Transport) -> dict[str, Any]:
    return {"url": s.url, **_headers(s)} if t == "http" else {**_command(s), "env": {}}


def _roo(s: Server, t: Transport) -> dict[str, Any]:
    return {"type": "streamable-http", "url": s.url, **_headers(s)} if t == "http" else {"type": "stdio", **_command(s)}


def _goose(s: Server, t: Transport) -> dict[str, Any]:
    base = {"enabled": True, "name": s.name, "description": "Code search over a repository", "timeout": 300}
    if t == "stdio":
        return {**base, "type": "stdio", "cmd": s.command, "args": list(s.args), "envs": {}}
    return {**base, "type": "streamable_http", "uri": s.url, **_headers(s)}


def _jan(s: Server, t: Transport) -> dict[str, Any]:
    if t == "stdio":
        return {**_command(s), "env": {}, "active": True}
    return {"type": "http", "url": s.url, **_headers(s), "command": "", "args": [], "env": {}, "active": True}


CLIENTS: dict[str, Client] = {
    c.name: c
    for c in (
        Client("cline", "Cline's cline_mcp_settings.json (MCP Servers icon > Configure > Configure MCP Servers)",
               ("http",), "literal", _cline, _mcp_servers),
        Client("cursor", ".cursor/mcp.json in the project (or ~/.cursor/mcp.json)",
               ("http", "stdio"), "cursor-env", _url_headers, _mcp_servers),
        Client("vscode", ".vscode/mcp.json in the workspace", ("http",), "vscode-input", _vscode, _vscode_wrap),
        Client("claude", "claude_desktop_config.json (Claude Desktop > Settings > Developer > Edit Config)",
               ("stdio",), "none", lambda s, t: _command(s), _mcp_servers),
        Client("lmstudio", "LM Studio's mcp.json (Program tab > Install > Edit mcp.json)",
               ("http", "stdio"), "literal", _url_headers, _mcp_servers),
        Client("continue", ".continue/mcpServers/code-search.yaml in the workspace (or the mcpServers list of "
               "~/.continue/config.yaml)", ("http", "stdio"), "literal", _continue, _continue_wrap, "yaml"),
        Client("zed", "Zed's settings.json (zed: open settings), merged into its context_servers",
               ("http", "stdio"), "literal", _zed, lambda s, e: {"context_servers": {s.name: e}}),
        Client("roo", ".roo/mcp.json in the project (or Roo Code's mcp_settings.json)",
               ("http", "stdio"), "literal", _roo, _mcp_servers),
        Client("goose", "~/.config/goose/config.yaml, merged into its extensions",
               ("http", "stdio"), "literal", _goose, lambda s, e: {"extensions": {s.name: e}}, "yaml"),
        Client("jan", "Jan's mcp_config.json (Settings > MCP Servers), merged into its mcpServers",
               ("http", "stdio"), "literal", _jan, _mcp_servers),
        Client("llama-server", "a file for `llama-server --mcp-servers-config FILE`",
               ("stdio",), "none", lambda s, t: _command(s), _mcp_servers),
    )
}


def _running_script() -> Path | None:
    """The console script this process was started as, when it was (not `python -m bridge`)."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is None or argv0.name not in SCRIPT_NAMES:
        return None
    path = Path(shutil.which(str(argv0)) or argv0) if argv0.parent == Path() else argv0
    return path.absolute() if path.is_file() else None


def _script_dirs() -> list[Path]:
    """Where this installation's console scripts are: beside its interpreter (a virtualenv), then the
    interpreter's scripts folders (a system or `--user` install)."""
    dirs = [Path(sys.executable).parent]
    for scheme in (None, f"{os.name}_user"):
        try:
            found = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        if found:
            dirs.append(Path(found))
    return list(dict.fromkeys(dirs))


def _own_scripts() -> list[Path]:
    """This installation's console scripts that exist, the unambiguous name first."""
    running = _running_script()
    dirs = ([running.parent] if running else []) + _script_dirs()
    found = [d / name for d in dict.fromkeys(dirs) for name in SCRIPT_NAMES if (d / name).is_file()]
    return list(dict.fromkeys(found))


def installed_command() -> tuple[str, list[str]]:
    """The command line that starts this installation: the absolute path of its console script
    (`mcp-retrieval-bridge` when installed), else this interpreter with `-m bridge`."""
    scripts = _own_scripts()
    if scripts:
        return str(scripts[0]), []
    return sys.executable, ["-m", "bridge"]


def path_shadow() -> str | None:
    """A one-line note when `bridge` on PATH is not this installation (or is missing); None when it is."""
    on_path = shutil.which("bridge")
    own = {p.resolve() for p in _own_scripts() if p.name == "bridge"}
    if on_path and Path(on_path).resolve() in own:
        return None
    exe, prefix = installed_command()
    command = " ".join([exe, *prefix])
    if on_path is None:
        return f"`bridge` is not on PATH; this installation runs as {command}"
    return f"`bridge` on PATH is {on_path}, not this installation: run {command} instead"


def client_config(
    client: str,
    url: str = DEFAULT_URL,
    token_env: str | None = None,
    token: str | None = None,
    repo: Path | None = None,
    name: str = "code-search",
    transport: Transport | None = None,
    serve_args: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The settings for `client`. `token` is the value of `token_env`, needed by clients that take
    the token itself (all but Cursor and VS Code). `transport` defaults to the client's first one;
    a stdio server serves `repo` (default: the current folder) with `serve_args` added."""
    spec = CLIENTS.get(client)
    if spec is None:
        raise ServeError(f"unknown client {client!r}: use one of {', '.join(CLIENTS)}")
    chosen = transport or spec.transports[0]
    if chosen not in spec.transports:
        raise ServeError(f"{client} takes {' or '.join(spec.transports)} servers only: drop --{chosen}")
    auth = None
    if token_env and chosen == "http":
        if spec.token == "cursor-env":
            auth = f"Bearer ${{env:{token_env}}}"
        elif spec.token == "vscode-input":
            auth = f"Bearer ${{input:{name}-token}}"
        elif not token:
            raise ServeError(f"{client} needs the token itself and {token_env} is unset: export {token_env}=<token> first")
        else:
            auth = f"Bearer {token}"
    command, prefix = installed_command()
    root = (repo or Path.cwd()).expanduser().resolve()
    args = (*prefix, "serve", "--stdio", "--repo", str(root), *serve_args)
    server = Server(name, url, auth, command, args, token_env)
    return spec.wrap(server, spec.entry(server, chosen))


def to_yaml(data: Any, indent: int = 0) -> str:
    """YAML for the plain data of a snippet (dicts, lists, strings, numbers, booleans).

    Strings are written as JSON strings, which YAML reads as double-quoted scalars, so no value
    (a URL, a token, a Windows path) can be misread as another type."""
    import json

    pad = " " * indent
    if isinstance(data, dict):
        if not data:
            return "{}"
        lines = []
        for key, value in data.items():
            if isinstance(value, (dict, list)) and value:
                lines.append(f"{pad}{key}:\n{to_yaml(value, indent + 2)}")
            else:
                lines.append(f"{pad}{key}: {to_yaml(value)}")
        return "\n".join(lines)
    if isinstance(data, list):
        if not data:
            return "[]"
        items = []
        for value in data:
            if isinstance(value, dict) and value:
                body = to_yaml(value, indent + 2)
                items.append(f"{pad}- {body[indent + 2:]}")
            else:
                items.append(f"{pad}- {to_yaml(value)}")
        return "\n".join(items)
    return json.dumps(data, ensure_ascii=False)  # YAML has no escape for a surrogate pair
