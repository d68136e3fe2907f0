"""`bridge serve` (MCP over Streamable HTTP or stdio) and `bridge config` (client settings)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import typer

from bridge.cli.common import MilvusOpt, MilvusTokenOpt, ProgressBars, console, fail, milvus_token
from bridge.errors import ServeError

__all__ = ["register"]


class _StartupOutput:
    """Progress bars for an initial build, closed once the server is ready; then one line per event."""

    def __init__(self) -> None:
        self._bars: ProgressBars | None = None

    def progress(self, name: str, p: Any) -> None:
        if self._bars is None:
            console.print(f"{name}: no index yet, building it (vectors follow in the background)")
            self._bars = ProgressBars()
            self._bars.__enter__()
        self._bars(p)

    def ready(self) -> None:
        if self._bars is not None:
            self._bars.__exit__(None, None, None)
            self._bars = None

    def event(self, name: str, kind: str, value: Any) -> None:
        if kind == "build" and value.changed:
            console.print(f"{name}: re-indexed {value.files} files ({value.new_chunks} new chunks)")
        elif kind == "fill" and value.newly_embedded:
            console.print(f"{name}: vectors {value.embedded_chunks}/{value.chunks} chunks")
        elif kind == "error":
            console.print(f"[red]{name}: {value}[/]", markup=True)
        elif kind == "notice":
            console.print(f"{name}: {value}", markup=False)


def _audit_path(value: str) -> Path | None:
    from bridge.server.audit import default_audit_path

    if value == "off":
        return None
    if value == "default":
        return default_audit_path()
    return Path(value).expanduser().resolve()


def serve_cmd(
    repo: list[Path] = typer.Option([], "--repo", help="Repository to serve (repeatable; default: the current folder)."),
    index_dir: Path | None = typer.Option(None, "--index-dir", help="Index folder (only with a single --repo)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; other than loopback needs a token."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port (0: any free port; the URL is printed)."),
    path: str = typer.Option("/mcp", "--path", help="URL path of the MCP endpoint."),
    token_env: str | None = typer.Option(
        None, "--token-env",
        help="Require 'Authorization: Bearer' with the token in this environment variable.",
    ),
    token_file: Path | None = typer.Option(
        None, "--token-file",
        help="Require 'Authorization: Bearer' with the token on this file's first line.",
    ),
    allowed_origin: list[str] = typer.Option(
        [], "--allowed-origin",
        help="Origin of a browser page allowed to call the server (CORS), e.g. http://localhost:3000 (repeatable; never *).",
    ),
    allowed_host: list[str] = typer.Option([], "--allowed-host", help="Extra Host header to accept, e.g. myhost:8765 (repeatable)."),
    stdio: bool = typer.Option(False, "--stdio", help="Serve over stdin/stdout instead of HTTP (for Claude Desktop)."),
    no_watch: bool = typer.Option(False, "--no-watch", help="Do not re-index when files change (use the refresh_index tool)."),
    embedder: str | None = typer.Option(
        None, "--embedder",
        help="For a new index: minilm (default; int8 where the CPU has no AMX), minilm-int8, static or hash; "
             "an existing index keeps its own.",
    ),
    no_vectors: bool = typer.Option(False, "--no-vectors", help="Lexical (BM25) only."),
    tools: str | None = typer.Option(
        None, "--tools", help="Offer only these tools, e.g. search_code,read_file (each costs prompt tokens)."
    ),
    audit_log: str = typer.Option("default", "--audit-log", help="off, default (BRIDGE_HOME/audit/audit.jsonl) or a file path."),
    audit_max_bytes: int = typer.Option(10 * 1024 * 1024, "--audit-max-bytes", min=1024, help="Rotate the audit log past this size."),
    milvus_uri: str | None = MilvusOpt,
    milvus_token_env: str | None = MilvusTokenOpt,
) -> None:
    """Serve the code index of one or more repositories to MCP clients (http://HOST:PORT/mcp)."""
    from bridge.server.app import ServeOptions
    from bridge.server.auth import load_token
    from bridge.server.spec import RepoSpec
    from bridge.server.transports import serve_http, serve_stdio

    roots = repo or [Path.cwd()]
    offered = _tool_names(tools)
    if index_dir is not None and len(roots) != 1:
        fail("--index-dir works with a single --repo: drop it to use each repository's default index")
    if not path.startswith("/"):
        fail(f"--path {path!r} must start with '/', e.g. /mcp")
    specs = tuple(RepoSpec(r, index_dir, embedder, no_vectors) for r in roots)
    if milvus_uri:  # stateless replicas: read from Milvus, never watch (one writer: docs/milvus.md)
        token = milvus_token(milvus_token_env)
        specs = tuple(replace(spec, milvus_uri=milvus_uri, milvus_token=token) for spec in specs)
        no_watch = True
    options = ServeOptions(
        repos=specs,
        host=host,
        port=port,
        path=path,
        token=load_token(token_env, token_file),
        allowed_origins=tuple(allowed_origin),
        allowed_hosts=tuple(allowed_host),
        watch=not no_watch,
        audit_log=_audit_path(audit_log),
        audit_max_bytes=audit_max_bytes,
        tools=offered,
    )
    out = _StartupOutput()
    if stdio:
        serve_stdio(options, out.event, out.progress, lambda service: _ready(out, "stdio", service, options))
    else:
        serve_http(options, out.event, out.progress, lambda url, service: _ready(out, url, service, options))


def _tool_names(text: str | None) -> tuple[str, ...]:
    from bridge.server.catalog import TOOL_NAMES, parse_tool_names

    if text is None:
        return TOOL_NAMES
    try:
        return parse_tool_names(text)
    except ServeError as exc:
        fail(str(exc), code=2)


def _ready(out: _StartupOutput, where: str, service: Any, options: Any) -> None:
    out.ready()
    names = ", ".join(f"{r.name} ({r.root})" for r in service.repos.repos)
    auth = "bearer token required" if options.token else "no token"
    audit = f"audit log {options.audit_log}" if options.audit_log else "no audit log"
    console.print(f"serving {names}\n{auth}; {audit}; {'watching for changes' if options.watch else 'not watching'}")
    console.print(f"MCP endpoint: {where}" if where != "stdio" else "MCP over stdio")


def config_cmd(
    client: str = typer.Argument(
        ..., help="cline, cursor, vscode, claude, lmstudio, continue, zed, roo, goose, jan or llama-server."
    ),
    url: str = typer.Option("http://127.0.0.1:8765/mcp", "--url", help="The server's MCP endpoint."),
    token_env: str | None = typer.Option(None, "--token-env", help="Environment variable holding the server's token."),
    stdio: bool = typer.Option(
        False, "--stdio", help="Let the client start `serve --stdio` itself (claude and llama-server always do)."
    ),
    repo: Path | None = typer.Option(None, "--repo", help="Repository a stdio server serves (default: the current folder)."),
    tools: str | None = typer.Option(None, "--tools", help="Tools a stdio server offers, e.g. search_code,read_file."),
    name: str = typer.Option("code-search", "--name", help="Server name shown by the client."),
) -> None:
    """Print the settings snippet that connects CLIENT to `bridge serve`."""
    from bridge.server.clients import CLIENTS, client_config, path_shadow, to_yaml

    spec = CLIENTS.get(client)
    if spec is None:
        fail(f"unknown client {client!r}: use one of {', '.join(CLIENTS)}", code=2)
    transport: Literal["http", "stdio"] = "stdio" if stdio or spec.transports == ("stdio",) else "http"
    serve_args: tuple[str, ...] = ()
    if tools:
        from bridge.server.catalog import parse_tool_names

        try:
            serve_args = ("--tools", ",".join(parse_tool_names(tools)))
        except ServeError as exc:
            fail(str(exc), code=2)
    token = os.environ.get(token_env, "").strip() if token_env else None
    try:
        data = client_config(client, url, token_env, token or None, repo, name, transport, serve_args)
    except ServeError as exc:
        fail(str(exc))
    sys.stdout.write((to_yaml(data) if spec.format == "yaml" else json.dumps(data, indent=2)) + "\n")
    console.print(f"put this in {spec.where}")
    if transport == "http" and token_env and spec.token == "literal":
        console.print(f"it contains the token from {token_env}: keep the file private")
    if note := path_shadow():
        console.print(f"note: {note}" + ("; the snippet names it by its absolute path" if transport == "stdio" else ""))


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
    app.command("config")(config_cmd)
