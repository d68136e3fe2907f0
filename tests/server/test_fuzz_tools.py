"""Property-based fuzzing of every MCP tool's arguments (hypothesis).

Arguments of the right and wrong types, huge and tiny sizes, any Unicode (lone surrogates and
control characters too), path tricks and unknown keys. Whatever comes in: every call returns a
result or a tool error, the server keeps answering, and no answer carries a byte of a file
outside the root or of a file the secret rules keep out. The hostile-path tables of
tests/test_paths.py and tests/test_server_paths.py are replayed over real HTTP as well.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.hostile import HOSTILE as PATHS_TABLE
from support.hostile import HOSTILE_PATHS as SERVER_PATHS_TABLE
from support.server import make_repo

from bridge.server.app import ServeOptions, build_server, open_service
from bridge.server.connect import connect
from bridge.server.repos import RepoSpec
from bridge.server.tools import TOOL_NAMES
from bridge.server.transports import start_background

OUTSIDE = "OUTSIDE-MARK-41be"
LEAKS = (OUTSIDE, "hunter2", "BEGIN OPENSSH", "repositoryformatversion", "root:x:0:0", "generated = True", "log line")
FUZZ = settings(
    max_examples=int(os.environ.get("BRIDGE_FUZZ_EXAMPLES", "120")),
    deadline=None,
    database=None,  # no .hypothesis/ folder in the work tree
    derandomize=True,  # CI runs the same examples every time; raise BRIDGE_FUZZ_EXAMPLES to explore
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _fuzz_repo(base: Path) -> Path:
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text(f"def leaked():\n    return '{OUTSIDE}'\n")
    root = make_repo(base / "repo")
    for name, target in {
        "link_out.py": outside / "secret.py",
        "outdir": outside,
        "link_env.py": root / ".env",
        "link_git": root / ".git" / "config",
        "passwd.txt": Path("/etc/passwd"),
        "loop_a": root / "loop_b",
        "loop_b": root / "loop_a",
    }.items():
        (root / name).symlink_to(target)
    return root


@dataclass
class Fuzzed:
    """One MCP session over an in-memory server, callable from synchronous hypothesis tests."""

    portal: BlockingPortal
    client: Any
    root: Path
    indexed: frozenset[str]

    def call(self, tool: str, args: dict) -> Any:
        return self.portal.call(self.client.call_tool, tool, args)


@contextmanager
def _session(server: object) -> Iterator[tuple[BlockingPortal, Any]]:
    from mcp import Client

    with start_blocking_portal() as portal, portal.wrap_async_context_manager(Client(server)) as client:
        yield portal, client


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzed]:
    base = tmp_path_factory.mktemp("fuzz")
    root = _fuzz_repo(base)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BRIDGE_HOME", str(base / "home"))
        spec = RepoSpec(root, embedder="hash")
        svc = open_service(ServeOptions(repos=(spec,), watch=False, audit_log=base / "audit.jsonl"))
        try:
            indexed = frozenset(svc.repos.default.searcher.manifest.files)
            with _session(build_server(svc)) as (portal, client):
                yield Fuzzed(portal, client, root, indexed)
        finally:
            svc.close()


# --- strategies ----------------------------------------------------------------------------------

SEGMENTS = ["..", ".", "", "src", "config.py", "server.py", "docs", "guide.md", "README.md", ".env", ".git", "config",
            "HEAD", "id_rsa", "link_out.py", "outdir", "secret.py", "link_env.py", "link_git", "passwd.txt", "loop_a",
            "build", "out.py", "debug.log", "blob.bin", "%2e%2e", "\u2025", "\uff0e\uff0e", "~", "C:", "\\\\?\\C:",
            "file:", "\x00", "\n", "\r", "\t", " ", "\udcff", "\u202e", "\ufeff", "*", "?", "[", "**", "a" * 300]
paths = st.one_of(
    st.sampled_from(sorted(set(PATHS_TABLE) | set(SERVER_PATHS_TABLE))),
    st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=8).flatmap(
        lambda parts: st.sampled_from(["/", "\\", "//", "/./"]).map(lambda sep: sep.join(parts))
    ),
    st.sampled_from(["/", "\\"]).map(lambda lead: lead + "etc/passwd"),
    st.text(max_size=40),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=20),  # lone surrogates, controls
)
junk = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
ints = st.one_of(st.integers(-5, 60), st.integers(), st.sampled_from([0, -1, 2**31, 2**63, 10**30]), junk)
texts = st.one_of(
    st.text(max_size=60), st.sampled_from(["parse_config", "Loader load", "handler_7", "hunter2", OUTSIDE, "root:x"]),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=30),
    st.integers(0, 10_000).map(lambda n: "x" * n), junk,
)
globs = st.one_of(paths, st.sampled_from(["**", "*", "../**", "/**", "**/.env", ".git/**", "outdir/**", "link_*",
                                          "!**", "[", "[!", "\\", "**/" * 40, "{a,b}", "***"]), junk)
repos = st.one_of(st.none(), st.sampled_from(["repo", "", " ", "..", "/", "/etc", "other"]), paths, junk)
modes = st.one_of(st.sampled_from(["hybrid", "lexical", "vector"]), texts)

ARGS = {
    "search_code": {"query": texts, "k": ints, "max_tokens": ints, "path_glob": globs, "mode": modes, "repo": repos},
    "read_file": {"path": paths, "start_line": ints, "end_line": ints, "max_tokens": ints, "repo": repos},
    "list_files": {"path_glob": globs, "limit": ints, "repo": repos},
    "outline": {"path": paths, "repo": repos},
    "index_status": {"repo": repos},
    "refresh_index": {"repo": repos},
    "list_repos": {},
}


def arguments(tool: str) -> st.SearchStrategy[dict]:
    """Any subset of the tool's parameters (required ones may be missing), sometimes an unknown key."""
    fields = ARGS[tool]
    chosen = st.fixed_dictionaries({}, optional=fields) if fields else st.just({})
    extra = st.dictionaries(st.sampled_from(["bogus", "__proto__", "path/../x", "k "]), junk, max_size=1)
    return st.tuples(chosen, extra).map(lambda pair: {**pair[0], **pair[1]})


# --- invariants ------------------------------------------------------------------------------------


def _text_of(result: Any, args: dict) -> str:
    """Everything the caller gets back, less the echoes of its own string arguments."""
    text = " ".join(getattr(b, "text", "") for b in result.content)
    text += json.dumps(result.structured_content or {}, ensure_ascii=False)
    echoes = [v for v in args.values() if isinstance(v, str) and v]
    for echo in sorted(echoes, key=len, reverse=True):
        for form in (repr(echo), json.dumps(echo, ensure_ascii=False)[1:-1], echo):
            text = text.replace(form, "")
    return text


def _content_of(result: Any) -> str:
    data = result.structured_content or {}
    parts = [h.get("text", "") for h in data.get("hits", [])] + [data.get("text") or ""]
    parts += [str(s) for s in data.get("symbols", [])]
    return "\n".join(parts)


def check(result: Any, indexed: frozenset[str], tool: str, args: dict) -> None:
    """A result or a tool error; never a leak; only indexed paths in an answer."""
    assert type(result).__name__ == "CallToolResult", (tool, args)
    text = _text_of(result, args)
    assert not any(leak in text for leak in LEAKS), (tool, args, text[:500])
    content = _content_of(result)  # what came out of files: checked with no echo taken out
    assert not any(leak in content for leak in LEAKS), (tool, args, content[:500])
    if result.is_error:
        assert result.content and "Traceback" not in text, (tool, args, text[:500])
        return
    data = result.structured_content or {}
    named = {
        "search_code": lambda: [h["path"] for h in data["hits"]],
        "list_files": lambda: data["files"],
        "read_file": lambda: [data["path"]],
        "outline": lambda: [data["path"]],
    }.get(tool, lambda: [])()
    assert set(named) <= indexed, (tool, args, set(named) - indexed)


def test_every_tool_is_fuzzed() -> None:
    assert set(ARGS) == set(TOOL_NAMES)


@pytest.mark.parametrize("tool", ["search_code", "read_file", "list_files", "outline"])
def test_fuzzed_arguments_give_a_result_or_a_tool_error_and_never_a_leak(fuzzed: Fuzzed, tool: str) -> None:
    @FUZZ
    @given(args=arguments(tool))
    def run(args: dict) -> None:
        check(fuzzed.call(tool, args), fuzzed.indexed, tool, args)

    run()
    check(fuzzed.call("search_code", {"query": "parse_config"}), fuzzed.indexed, "search_code", {})


@pytest.mark.parametrize("tool", ["index_status", "refresh_index", "list_repos"])
def test_fuzzed_repo_arguments_of_the_status_tools_are_answered(fuzzed: Fuzzed, tool: str) -> None:
    @settings(FUZZ, max_examples=25 if tool == "refresh_index" else 60)
    @given(args=arguments(tool))
    def run(args: dict) -> None:
        check(fuzzed.call(tool, args), fuzzed.indexed, tool, args)

    run()


def test_the_hostile_path_tables_are_refused_over_http_too(fuzzed: Fuzzed, tmp_path: Path) -> None:
    table = sorted(set(PATHS_TABLE) | set(SERVER_PATHS_TABLE))
    assert len(table) >= 30
    with running_http(fuzzed.root, tmp_path) as (url, token):
        results = call_http(url, token, [(tool, {"path": p}) for p in table for tool in ("read_file", "outline")])
    for (tool, path), result in zip([(t, p) for p in table for t in ("read_file", "outline")], results):
        assert result.is_error, (tool, path)
        check(result, fuzzed.indexed, tool, {"path": path})


@contextmanager
def running_http(root: Path, home: Path) -> Iterator[tuple[str, str]]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BRIDGE_HOME", str(home / "home"))
        running = start_background([root], token="fuzz-token", no_vectors=True, watch=False)
        try:
            yield running.url, "fuzz-token"
        finally:
            running.stop()


def call_http(url: str, token: str, calls: list[tuple[str, dict]]) -> list[Any]:
    import anyio

    async def main() -> list[Any]:
        async with connect(url, token) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(main)


def test_fuzzed_calls_over_http_leave_the_server_answering(fuzzed: Fuzzed, tmp_path: Path) -> None:
    tools = st.sampled_from(["search_code", "read_file", "list_files", "outline", "index_status", "list_repos"])
    calls = st.lists(tools.flatmap(lambda t: arguments(t).map(lambda a: (t, a))), min_size=40, max_size=40)
    batches: list[list[tuple[str, dict]]] = []

    @settings(FUZZ, max_examples=5)
    @given(batch=calls)
    def collect(batch: list[tuple[str, dict]]) -> None:
        batches.append(batch)

    collect()
    with running_http(fuzzed.root, tmp_path) as (url, token):
        for batch in batches:
            for (tool, args), result in zip(batch, call_http(url, token, batch)):
                check(result, fuzzed.indexed, tool, args)
        (after,) = call_http(url, token, [("search_code", {"query": "parse_config"})])
    assert after.structured_content["hits"][0]["path"] == "src/config.py"
