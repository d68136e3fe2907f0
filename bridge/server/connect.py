"""An MCP client for this server over Streamable HTTP, with the bearer token attached."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

__all__ = ["connect"]


@asynccontextmanager
async def connect(url: str, token: str | None = None, timeout: float = 30.0) -> AsyncIterator[Any]:
    """`async with connect(url, token) as client:` yields an initialised `mcp.Client`."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    # The read timeout stays long: the server may hold a response stream open.
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(timeout, read=300.0)) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client
