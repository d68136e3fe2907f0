"""Settings snippets for MCP clients, as printed by `bridge config CLIENT` (examples/ holds copies).

How each client takes a bearer token differs, and the snippets follow what each one supports:
- Cline (`cline_mcp_settings.json`): `"type": "streamableHttp"` (a bare `url` means legacy SSE);
  `headers` are sent as written, with no variable expansion, so the token itself goes in.
- Cursor (`.cursor/mcp.json`): `url` + `headers`; `${env:NAME}` is expanded from Cursor's environment.
- VS Code (`.vscode/mcp.json`): top-level `servers`, `"type": "http"`; the token comes from a
  `promptString` input (`${input:...}`), asked once and stored by VS Code, because `${env:...}`
  is not expanded inside `headers` (microsoft/vscode#336232).
- Claude Desktop (`claude_desktop_config.json`): stdio servers only, so it launches
  `bridge serve --stdio` itself; no token is needed.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from bridge.errors import ServeError

__all__ = ["CLIENTS", "DEFAULT_URL", "client_config"]

CLIENTS = ("cline", "cursor", "vscode", "claude")
DEFAULT_URL = "http://127.0.0.1:8765/mcp"


def _stdio_command(repo: Path) -> tuple[str, list[str]]:
    exe = shutil.which("bridge")
    args = ["serve", "--stdio", "--repo", str(repo)]
    if exe:
        return str(Path(exe).resolve()), args
    return sys.executable, ["-m", "bridge", *args]


def client_config(
    client: str,
    url: str = DEFAULT_URL,
    token_env: str | None = None,
    token: str | None = None,
    repo: Path | None = None,
    name: str = "code-search",
) -> dict[str, Any]:
    """The JSON settings for `client`. `token` is the value of `token_env`, needed only for Cline."""
    if client == "cline":
        server: dict[str, Any] = {"type": "streamableHttp", "url": url, "disabled": False, "autoApprove": []}
        if token_env:
            if not token:
                raise ServeError(f"Cline needs the token itself and {token_env} is unset: export {token_env}=<token> first")
            server["headers"] = {"Authorization": f"Bearer {token}"}
        return {"mcpServers": {name: server}}
    if client == "cursor":
        server = {"url": url}
        if token_env:
            server["headers"] = {"Authorization": f"Bearer ${{env:{token_env}}}"}
        return {"mcpServers": {name: server}}
    if client == "vscode":
        server = {"type": "http", "url": url}
        config: dict[str, Any] = {"servers": {name: server}}
        if token_env:
            input_id = f"{name}-token"
            server["headers"] = {"Authorization": f"Bearer ${{input:{input_id}}}"}
            config["inputs"] = [
                {
                    "type": "promptString",
                    "id": input_id,
                    "description": f"Token of the code-search MCP server (the value of {token_env})",
                    "password": True,
                }
            ]
        return config
    if client == "claude":
        command, args = _stdio_command((repo or Path.cwd()).expanduser().resolve())
        return {"mcpServers": {name: {"command": command, "args": args}}}
    raise ServeError(f"unknown client {client!r}: use one of {', '.join(CLIENTS)}")
