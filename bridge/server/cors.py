"""Browser pages on origins the user names (`--allowed-origin`): CORS for the MCP endpoint.

A page on another origin may call the server only if the server says so: the browser first sends
a preflight (OPTIONS, without the token) asking which methods and headers it may use, and it lets
the page read a response only if that response names the page's origin. `BrowserAccess` answers
the preflight for the named origins and adds those headers to their responses. Every other origin
is refused as before: its preflight gets 403, and the SDK's DNS-rebinding check refuses its requests.
An origin is always named exactly, never `*`: a wildcard would let any web page the user opens read
the code (and, with a token, try it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from bridge.errors import ServeError

__all__ = ["BrowserAccess", "browser_origins"]

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# What an MCP client in a browser sends (Streamable HTTP: POST messages, GET the event stream,
# DELETE the session) and which headers it sets; Last-Event-ID resumes an event stream.
_METHODS = b"GET, POST, DELETE, OPTIONS"
_REQUEST_HEADERS = b"Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID"
# A page reads the session id from the initialize response and sends it back on every request.
_EXPOSED_HEADERS = b"Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def browser_origins(values: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Each `--allowed-origin` as a browser writes it (`http://host[:port]`, lower case, no default
    port, no slash), or a one-line error for anything that is not one origin."""
    origins: list[str] = []
    for value in values:
        text = value.strip().rstrip("/")
        if text in ("*", "null") or "*" in text:
            raise ServeError(
                f"--allowed-origin {value!r}: name each origin exactly, e.g. http://localhost:3000; "
                "a wildcard would let any web page read the code"
            )
        parts = urlsplit(text)
        try:
            port = parts.port
        except ValueError:
            port = -1
        if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname or parts.path or parts.query or parts.fragment \
                or parts.username or parts.password or port == -1:
            raise ServeError(f"--allowed-origin {value!r} is not an origin: pass scheme://host[:port], e.g. http://localhost:3000")
        scheme, host = parts.scheme.lower(), parts.hostname.lower()
        host = f"[{host}]" if ":" in host else host
        origin = f"{scheme}://{host}" if port in (None, _DEFAULT_PORTS[scheme]) else f"{scheme}://{host}:{port}"
        if origin not in origins:
            origins.append(origin)
    return tuple(origins)


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value)
    return None


class BrowserAccess:
    """ASGI middleware: CORS for exactly `origins`; requests without an Origin header pass untouched."""

    def __init__(self, app: ASGIApp, origins: tuple[str, ...]) -> None:
        self.app = app
        self._origins = frozenset(o.encode("ascii") for o in origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = _header(scope, b"origin") if scope["type"] == "http" else None
        if origin is None:
            await self.app(scope, receive, send)
            return
        allowed = origin in self._origins
        if scope["method"] == "OPTIONS" and _header(scope, b"access-control-request-method") is not None:
            await self._preflight(origin if allowed else None, send)
            return
        if not allowed:  # the SDK's Origin check answers (403), as for any foreign page
            await self.app(scope, receive, send)
            return

        async def send_with_cors(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", ()) if not k.lower().startswith(b"access-control-")]
                headers += [
                    (b"access-control-allow-origin", origin),
                    (b"access-control-expose-headers", _EXPOSED_HEADERS),
                    (b"vary", b"Origin"),
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_cors)

    @staticmethod
    async def _preflight(origin: bytes | None, send: Send) -> None:
        if origin is None:
            body = b"this origin may not call the server: start it with --allowed-origin ORIGIN to allow a page"
            headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"vary", b"Origin")]
            status = 403
        else:
            body = b""
            headers = [
                (b"access-control-allow-origin", origin),
                (b"access-control-allow-methods", _METHODS),
                (b"access-control-allow-headers", _REQUEST_HEADERS),
                (b"access-control-max-age", b"600"),
                (b"vary", b"Origin"),
            ]
            status = 204
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
