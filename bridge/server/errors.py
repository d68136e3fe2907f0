"""Errors of the MCP server; both are `BridgeError`s, so the CLI prints them as one line."""

from __future__ import annotations

from bridge.errors import BridgeError

__all__ = ["ServeError", "ToolInputError"]


class ServeError(BridgeError):
    """The server cannot start as configured (no repository, unsafe bind, missing token, busy port)."""


class ToolInputError(BridgeError):
    """A tool was called with an argument out of range or naming an unknown repository."""
