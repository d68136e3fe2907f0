"""The MCP server: seven code-search tools over Streamable HTTP or stdio, with auth and an audit log."""

from __future__ import annotations

from bridge.server.app import (
    RunningServer,
    ServeOptions,
    Service,
    build_server,
    open_service,
    serve_http,
    serve_stdio,
    start_background,
)
from bridge.server.client import connect
from bridge.server.errors import ServeError, ToolInputError
from bridge.server.repos import RepoSpec

__all__ = [
    "RepoSpec",
    "RunningServer",
    "ServeError",
    "ServeOptions",
    "Service",
    "ToolInputError",
    "build_server",
    "connect",
    "open_service",
    "serve_http",
    "serve_stdio",
    "start_background",
]
