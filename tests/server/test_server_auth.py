"""Bearer token loading and checking, where the server may listen, and the Host/Origin settings."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from bridge.errors import ServeError
from bridge.server.auth import BearerAuth, check_bind, is_loopback, load_token
from bridge.server.cors import browser_origins
from bridge.server.transports import transport_security, url_for


def test_the_token_comes_from_an_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TOKEN", "  s3cret \n")
    assert load_token("MY_TOKEN") == "s3cret"
    assert load_token() is None


def test_the_token_comes_from_the_first_line_of_a_file(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("from-file\nignored\n")
    assert load_token(token_file=tmp_path / "t") == "from-file"


@pytest.mark.parametrize(
    ("env", "file_text", "message"),
    [
        ("UNSET_TOKEN_VAR", None, "UNSET_TOKEN_VAR is empty or unset"),
        (None, "", "is empty: write the token on its first line"),
        (None, "missing", "cannot read token file"),
        ("X", "x", "either --token-env or --token-file"),
    ],
)
def test_token_problems_are_one_line_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str | None, file_text: str | None, message: str
) -> None:
    monkeypatch.delenv("UNSET_TOKEN_VAR", raising=False)
    path = None
    if file_text is not None:
        path = tmp_path / "token"
        if file_text != "missing":
            path.write_text(file_text)
    with pytest.raises(ServeError, match=message):
        load_token(env, path)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"])
def test_loopback_needs_no_token(host: str) -> None:
    assert is_loopback(host)
    check_bind(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "example.org"])
def test_binding_beyond_loopback_without_a_token_is_refused(host: str) -> None:
    with pytest.raises(ServeError, match="without a token"):
        check_bind(host, None)
    check_bind(host, "token")


def test_loopback_accepts_the_loopback_names_with_and_without_a_port() -> None:
    settings = transport_security("127.0.0.1", ("http://app.example:3000",))
    assert settings.enable_dns_rebinding_protection
    for host in ("127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*"):
        assert host in settings.allowed_hosts
    assert "http://localhost:*" in settings.allowed_origins and "http://app.example:3000" in settings.allowed_origins


def test_a_wildcard_bind_checks_hosts_only_when_they_are_named() -> None:
    assert not transport_security("0.0.0.0").enable_dns_rebinding_protection
    named = transport_security("0.0.0.0", (), ("build-box",))
    assert named.enable_dns_rebinding_protection and {"build-box", "build-box:*"} <= set(named.allowed_hosts)
    assert "build-box" in transport_security("build-box").allowed_hosts


def test_urls_show_a_reachable_address() -> None:
    assert url_for("127.0.0.1", 8765) == "http://127.0.0.1:8765/mcp"
    assert url_for("::1", 9000, "/x") == "http://[::1]:9000/x"
    assert url_for("0.0.0.0", 1) == "http://127.0.0.1:1/mcp"


def _run(app: BearerAuth, scope: dict) -> list[dict]:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b""}

    async def send(message: dict) -> None:
        sent.append(message)

    anyio.run(app, scope, receive, send)
    return sent


def test_the_bearer_check_lets_lifespan_through_and_stops_requests_without_the_token() -> None:
    reached: list[str] = []

    async def inner(scope: dict, receive: object, send: object) -> None:
        reached.append(scope["type"])

    app = BearerAuth(inner, "tok")
    _run(app, {"type": "lifespan"})
    refused = _run(app, {"type": "http", "path": "/mcp", "headers": [(b"authorization", b"Bearer nope")]})
    _run(app, {"type": "http", "path": "/mcp", "headers": [(b"authorization", b"bearer tok")]})
    elsewhere = _run(app, {"type": "http", "path": "/.well-known/oauth-protected-resource", "headers": [(b"authorization", b"bearer tok")]})
    assert reached == ["lifespan", "http"]
    assert refused[0]["status"] == 401 and elsewhere[0]["status"] == 404


def test_allowed_origins_are_written_as_a_browser_sends_them() -> None:
    given = ("HTTP://LocalHost:80/", "https://app.example.org:443", "http://[::1]:3000", "http://localhost")
    assert browser_origins(given) == ("http://localhost", "https://app.example.org", "http://[::1]:3000")


@pytest.mark.parametrize("origin", ["*", "https://*.example.org", "null", "file:///tmp/x", "http://a.example/app", "http://a:99999"])
def test_an_allowed_origin_must_be_one_exact_origin(origin: str) -> None:
    with pytest.raises(ServeError, match="--allowed-origin"):
        browser_origins((origin,))
