"""Bearer-token check for the HTTP transport, and the rules for where the server may listen.

The check is a plain ASGI wrapper around the SDK's Starlette app: HTTP requests to the MCP endpoint
without `Authorization: Bearer TOKEN` get 401 before any MCP code runs, with a body that says what to
send, and the lifespan messages pass through untouched, so the SDK's session manager still starts and
stops with the server. Every other path is 404, token or not: there is no OAuth here, and a client
that meets 401 at `/.well-known/oauth-protected-resource` or `/register` takes it for an OAuth server
and starts a login flow, instead of telling its user that the token is missing or wrong.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bridge.errors import ServeError

__all__ = ["BearerAuth", "load_token", "is_loopback", "check_bind"]

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


def load_token(token_env: str | None = None, token_file: Path | None = None) -> str | None:
    """The token from an environment variable or a file (first line), or None when neither is given."""
    if token_env and token_file:
        raise ServeError("pass either --token-env or --token-file, not both")
    if token_env:
        token = os.environ.get(token_env, "").strip()
        if not token:
            raise ServeError(f"environment variable {token_env} is empty or unset: export {token_env}=<a long random token>")
        return token
    if token_file:
        try:
            lines = Path(token_file).expanduser().read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ServeError(f"cannot read token file {token_file} ({exc.strerror}): check the path") from None
        token = lines[0].strip() if lines else ""
        if not token:
            raise ServeError(f"token file {token_file} is empty: write the token on its first line")
        return token
    return None


def is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond this machine without a token."""
    if token is None and not is_loopback(host):
        raise ServeError(
            f"refusing to serve on {host} without a token: anyone who can reach it could read the code; "
            "pass --token-env NAME or --token-file PATH, or bind to 127.0.0.1"
        )


class BearerAuth:
    """ASGI middleware: requests to `path` must carry `Authorization: Bearer <token>`; others are 404."""

    def __init__(self, app: ASGIApp, token: str, path: str = "/mcp") -> None:
        self.app = app
        self._token = token.encode("utf-8")
        self._path = path.rstrip("/") or "/"

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", ()):
            if name.lower() == b"authorization":
                scheme, _, given = value.partition(b" ")
                # compare_digest takes time independent of where the tokens differ
                return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._token)
        return False

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[dict]], send: Callable[[dict], Awaitable[None]]) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            if self._authorized(scope):
                await self.app(scope, receive, send)
            else:
                await send({"type": "websocket.close", "code": 1008})
            return
        if (scope.get("path", "").rstrip("/") or "/") != self._path:
            await _reply(send, 404, "not_found", f"no OAuth here: send the server's token as 'Authorization: Bearer TOKEN' to {self._path}")
        elif self._authorized(scope):
            await self.app(scope, receive, send)
        elif any(name.lower() == b"authorization" for name, _ in scope.get("headers", ())):
            await _reply(send, 401, "invalid_token", "wrong token: send the server's token as 'Authorization: Bearer TOKEN'")
        else:
            await _reply(send, 401, "unauthorized", "missing token: send the server's token as 'Authorization: Bearer TOKEN'")


async def _reply(send: Callable[[dict], Awaitable[None]], status: int, error: str, description: str) -> None:
    body = json.dumps({"error": error, "error_description": description}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:  # RFC 6750: no error code when no token came, invalid_token for a wrong one
        challenge = 'Bearer realm="bridge"' + (', error="invalid_token"' if error == "invalid_token" else "")
        headers.append((b"www-authenticate", challenge.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
