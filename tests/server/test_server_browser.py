"""A real browser: headless Chromium loads a page that speaks MCP to `bridge serve` with the token.

The page is served by a tiny HTTP server of its own on another loopback port, so it is a foreign
origin to the MCP server, as a web UI is. From the origin named with `--allowed-origin` it
initializes, lists the tools and calls `search_code`; the same page from another origin is stopped
by the browser at the CORS preflight and never reaches the tools. The page posts what happened
back to its own server (same origin), which the test waits for.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support.server import bridge_serve, make_repo, subprocess_env

TOKEN = "browser-token-0123456789abcdef"

PAGE = """<!doctype html>
<html><body><pre id="out">running</pre><script>
const MCP = %(mcp)s, TOKEN = %(token)s;
let session = null, nextId = 1;

async function rpc(method, params, notify) {
  const headers = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"};
  if (session) { headers["Mcp-Session-Id"] = session; headers["MCP-Protocol-Version"] = "2025-06-18"; }
  const message = notify ? {jsonrpc: "2.0", method, params} : {jsonrpc: "2.0", id: nextId++, method, params};
  const response = await fetch(MCP, {method: "POST", headers, body: JSON.stringify(message)});
  if (!response.ok) throw new Error(method + ": HTTP " + response.status + " " + await response.text());
  session = response.headers.get("Mcp-Session-Id") || session;
  if (notify) return null;
  const text = await response.text();
  // A Streamable HTTP answer is JSON or an event stream whose data line is the JSON-RPC response.
  const json = (response.headers.get("Content-Type") || "").includes("text/event-stream")
    ? text.split("\\n").filter(l => l.startsWith("data:")).map(l => JSON.parse(l.slice(5))).find(m => m.id !== undefined)
    : JSON.parse(text);
  if (json.error) throw new Error(method + ": " + JSON.stringify(json.error));
  return json.result;
}

async function main() {
  const report = {};
  try {
    const init = await rpc("initialize", {protocolVersion: "2025-06-18", capabilities: {},
                                          clientInfo: {name: "browser-page", version: "1"}});
    report.server = init.serverInfo.name;
    report.session = session !== null;
    await rpc("notifications/initialized", {}, true);
    report.tools = (await rpc("tools/list", {})).tools.map(t => t.name);
    const found = await rpc("tools/call", {name: "search_code", arguments: {query: "parse_config", k: 2}});
    report.hit = found.structuredContent.hits[0].path;
  } catch (error) {
    report.error = String(error);
  }
  document.getElementById("out").textContent = JSON.stringify(report);
  await fetch("/result", {method: "POST", body: JSON.stringify(report)});
}
main();
</script></body></html>
"""


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    pytest.skip("Chromium is not installed (Debian: apt-get install chromium; .ci/run installs it as root)")


@contextmanager
def page_server(mcp: dict[str, str]) -> Iterator[tuple[str, list[dict], threading.Event]]:
    """Serve PAGE at http://127.0.0.1:PORT/ and collect the report it posts to /result.

    The page is rendered when requested, from `mcp["url"]`: the page server starts first, so the MCP
    server can name its origin with --allowed-origin."""
    reports: list[dict] = []
    done = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = (PAGE % {"mcp": json.dumps(mcp["url"]), "token": json.dumps(TOKEN)}).encode()
            found = self.path == "/"
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page) if found else 0))
            self.end_headers()
            if found:
                self.wfile.write(page)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            reports.append(json.loads(body))
            self.send_response(204)
            self.end_headers()
            done.set()

        def log_message(self, *args: object) -> None:  # keep the test output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", reports, done
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _visit(chromium: str, origin: str, done: threading.Event, profile: Path) -> None:
    """Open the page in headless Chromium until it has reported (at most 90 s)."""
    browser = subprocess.Popen(
        [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         f"--user-data-dir={profile}", origin + "/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        if not done.wait(90):
            browser.terminate()
            pytest.fail("the page did not report within 90 s:\n" + browser.communicate(timeout=30)[1][-2000:])
    finally:
        if browser.poll() is None:
            browser.terminate()
            try:
                browser.wait(30)
            except subprocess.TimeoutExpired:
                browser.kill()
                browser.wait(30)
        if browser.stderr is not None:
            browser.stderr.close()


def test_a_page_from_the_allowed_origin_searches_with_the_token_and_another_origin_is_refused(tmp_path: Path) -> None:
    chromium = _chromium()
    root = make_repo(tmp_path / "demo")
    env = subprocess_env(tmp_path / "home", BRIDGE_TEST_TOKEN=TOKEN)
    mcp: dict[str, str] = {}
    with page_server(mcp) as (allowed, allowed_reports, allowed_done), page_server(mcp) as (other, other_reports, other_done):
        args = ["--repo", str(root), "--no-vectors", "--token-env", "BRIDGE_TEST_TOKEN", "--audit-log", "off",
                "--allowed-origin", allowed]
        with bridge_serve(args, env) as served:
            mcp["url"] = served.url
            _visit(chromium, allowed, allowed_done, tmp_path / "profile-allowed")
            _visit(chromium, other, other_done, tmp_path / "profile-other")
    (report,) = allowed_reports
    assert "error" not in report, report
    assert report["server"] == "mcp-retrieval-bridge" and report["session"] is True
    assert {"search_code", "read_file", "list_files", "outline"} <= set(report["tools"])
    assert report["hit"] == "src/config.py"
    (refused,) = other_reports
    assert "Failed to fetch" in refused.get("error", ""), refused  # the browser's word for a CORS refusal
    assert "server" not in refused and "tools" not in refused
