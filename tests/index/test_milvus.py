"""The index on Milvus, against a real Milvus Lite gRPC server (and the embedded form)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.milvus import MilvusLiteServer, free_port

from index.build.fill import fill_vectors
from index.build.pipeline import BuildOptions, build_index
from index.errors import NoIndex, StoreUnavailable
from index.milvus import MilvusStore, build_milvus, encode_terms
from index.search.searcher import Searcher


def make_repo(root: Path, files: dict[str, str] | None = None) -> Path:
    """A folder of files (default: one small module); `repo` fixtures elsewhere hold the richer sample."""
    for rel, text in (files or {"src/app.py": "def main():\n    return 0\n"}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


QUERIES = ["load the json config", "retry backoff delays", "invalid port number", "SessionStore touch", "greeting"]


@pytest.fixture(scope="module")
def milvus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusLiteServer]:
    server = MilvusLiteServer(tmp_path_factory.mktemp("milvus")).start()
    try:
        yield server
    finally:
        server.stop()


def _paths(searcher: Searcher, query: str, mode: str = "hybrid") -> list[tuple[str, int]]:
    return [(h.path, h.start_line) for h in searcher.search(query, k=5, mode=mode).hits]  # type: ignore[arg-type]


def test_terms_stay_one_analyzer_token_each() -> None:
    assert encode_terms(["os.path.join", "max_tokens", "x"]).split() == ["osǀpathǀjoin", "max_tokens", "x"]


def test_a_chunk_longer_than_a_milvus_text_field_is_stored_whole(tmp_path: Path, milvus: MilvusLiteServer) -> None:
    line = "var " + ",".join(f"a{i}=b{i}(c{i})" for i in range(12000)) + ";\n"  # one minified line, > 64 KB
    root = make_repo(tmp_path / "minified", {"dist/app.min.js": line, "src/app.py": "def main():\n    return 0\n"})
    store = MilvusStore(milvus.uri, root)
    build_milvus(root, store, embedder=None)
    searcher = Searcher(store=store)
    texts = [c.text for c in searcher.read_chunks(list(range(searcher.manifest.chunks))).values()]
    assert line.rstrip("\n") in texts
    assert searcher.search("a5 b5 c5", k=1, mode="lexical").hits[0].path == "dist/app.min.js"


def test_a_search_through_milvus_answers_as_the_local_store_does(repo: Path, tmp_path: Path, milvus: MilvusLiteServer) -> None:
    store = MilvusStore(milvus.uri, repo)
    name, changed, manifest, _ = build_milvus(repo, store, embedder="hash")
    assert changed and store.live() == name
    build_index(repo, tmp_path / "local", BuildOptions(embedder="hash"))
    fill_vectors(tmp_path / "local")
    remote, local = Searcher(store=store), Searcher(tmp_path / "local")
    for query in QUERIES:
        for mode in ("lexical", "hybrid"):
            assert _paths(remote, query, mode) == _paths(local, query, mode), (query, mode)
        # the hash embedder gives many chunks the same cosine, and ties may come in any order
        assert _paths(remote, query, "vector")[0] == _paths(local, query, "vector")[0], query
    assert remote.info().chunks == local.info().chunks == manifest.chunks
    assert remote.info().embedded_chunks == manifest.chunks


def test_glob_filters_reach_milvus(repo: Path, milvus: MilvusLiteServer) -> None:
    store = MilvusStore(milvus.uri, repo)
    build_milvus(repo, store, embedder="hash")
    hits = Searcher(store=store).search("port config greeting", k=5, path_glob="web/**").hits
    assert hits and all(h.path.startswith("web/") for h in hits)


def test_an_unchanged_repository_keeps_its_build(repo: Path, milvus: MilvusLiteServer) -> None:
    store = MilvusStore(milvus.uri, repo)
    first = build_milvus(repo, store, embedder=None)[0]
    again, changed, _, _ = build_milvus(repo, store, embedder=None)
    assert (again, changed) == (first, False)


def test_a_rebuild_moves_the_alias_and_readers_follow_it(repo: Path, milvus: MilvusLiteServer) -> None:
    store = MilvusStore(milvus.uri, repo)
    old = build_milvus(repo, store, embedder=None, rebuild=True)[0]
    reader = Searcher(store=MilvusStore(milvus.uri, repo))
    (repo / "src" / "quota.py").write_text("def enforce_quota_limit(user):\n    return user.quota\n", encoding="utf-8")
    new = build_milvus(repo, store, embedder=None)[0]
    assert store.live() == new != old
    assert reader.search("enforce_quota_limit", k=1, mode="lexical").hits[0].path == "src/quota.py"
    assert old in store.builds()  # within the grace period the old build still answers a slow reader
    assert old in store.prune(keep={new}, grace=0.0)
    assert store.builds()[-1] == new and old not in store.builds()


def test_a_missing_index_names_the_uri_and_the_command(tmp_path: Path, milvus: MilvusLiteServer) -> None:
    root = make_repo(tmp_path / "never-indexed")
    with pytest.raises(NoIndex, match=f"on Milvus at {milvus.uri}.*bridge index"):
        Searcher(store=MilvusStore(milvus.uri, root))


def test_an_unreachable_milvus_is_one_clear_error(repo: Path) -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(StoreUnavailable, match=f"Milvus at {uri}"):
        MilvusStore(uri, repo).live()


def test_the_embedded_form_stores_a_local_file(repo: Path, tmp_path: Path) -> None:
    store = MilvusStore(str(tmp_path / "lite"), repo)
    build_milvus(repo, store, embedder=None)
    assert (tmp_path / "lite" / "bridge.db").exists()
    assert Searcher(store=store).search("parse_port", k=1, mode="lexical").hits[0].path == "src/server.py"


def test_a_reader_recovers_when_milvus_returns(repo: Path, tmp_path: Path) -> None:
    server = MilvusLiteServer(tmp_path / "data").start()
    try:
        store = MilvusStore(server.uri, repo)
        build_milvus(repo, store, embedder=None)
        searcher = Searcher(store=store)
        server.stop()
        with pytest.raises(StoreUnavailable, match=server.uri):
            searcher.search("parse_port", k=1, mode="lexical")
        server.start()
        deadline, answer = time.monotonic() + 30, None
        while answer is None and time.monotonic() < deadline:
            try:
                answer = searcher.search("parse_port", k=1, mode="lexical")
            except StoreUnavailable:
                time.sleep(0.2)  # polling for recovery, bounded
        assert answer is not None and answer.hits[0].path == "src/server.py"
    finally:
        server.stop()


_KILLED_BUILD = """
import sys
from pathlib import Path
from index.milvus import MilvusStore, build_milvus
build_milvus(Path(sys.argv[1]), MilvusStore(sys.argv[2], Path(sys.argv[1])), embedder=None, rebuild=True)
"""


def test_kill_9_of_the_indexer_leaves_the_alias_on_the_previous_build(tmp_path: Path, milvus: MilvusLiteServer) -> None:
    files = {f"pkg/mod{i}.py": "".join(f"def func_{i}_{j}(x):\n    return x + {j}\n\n" for j in range(200)) for i in range(60)}
    root = make_repo(tmp_path / "big", files)
    store = MilvusStore(milvus.uri, root)
    live = build_milvus(root, store, embedder=None)[0]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", _KILLED_BUILD, str(root), milvus.uri], env=env)
    try:
        deadline = time.monotonic() + 120
        while len(store.builds()) < 2 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # polling for the child's new collection, bounded
        assert child.poll() is None, "the child finished before it could be killed"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert store.live() == live
    assert Searcher(store=store).search("func_7_3", k=1, mode="lexical").hits[0].path == "pkg/mod7.py"
    orphan = [b for b in store.builds() if b != live]
    assert orphan and store.prune(keep={live}, grace=0.0) == orphan
