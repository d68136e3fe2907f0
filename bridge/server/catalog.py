"""The names of the MCP tools, and choosing which of them a server offers (`serve --tools`).

Kept apart from `tools` (which imports the MCP SDK) so the CLI can check a `--tools` list quickly.
Every tool definition a host offers a model costs prompt tokens (bench/tool_tokens.py): a small
context is better served by a few tools than by all of them.
"""

from __future__ import annotations

from bridge.errors import ServeError

__all__ = ["TOOL_NAMES", "parse_tool_names"]

TOOL_NAMES = ("search_code", "read_file", "list_files", "outline", "index_status", "refresh_index", "list_repos")


def parse_tool_names(text: str) -> tuple[str, ...]:
    """`search_code,read_file` as a tuple of known tool names, in the server's order, each once."""
    asked = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in asked if name not in TOOL_NAMES]
    if unknown or not asked:
        what = f"unknown tool {', '.join(map(repr, unknown))}" if unknown else "no tool named"
        raise ServeError(f"--tools: {what}: use a comma-separated list of {', '.join(TOOL_NAMES)}")
    return tuple(name for name in TOOL_NAMES if name in asked)
