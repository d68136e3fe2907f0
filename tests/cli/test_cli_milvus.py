"""`--milvus-uri` on the CLI: index, search, status and eval through embedded Milvus Lite."""

from __future__ import annotations

import json
from pathlib import Path

from support.milvus import free_port
from test_cli_index import bridge


def test_index_search_status_and_eval_run_on_milvus_with_no_local_index(repo: Path, tmp_path: Path, bridge_home: Path) -> None:
    uri = str(tmp_path / "milvus")
    built = bridge("index", str(repo), "--milvus-uri", uri, "--embedder", "hash", "--json")
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["changed"] is True
    assert not (bridge_home / "indexes").exists()  # nothing of the index lives in a local folder
    found = bridge("search", "parse_port", "--repo", str(repo), "--milvus-uri", uri, "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["hits"][0]["path"] == "src/server.py"
    status = bridge("status", "--repo", str(repo), "--milvus-uri", uri, "--json")
    assert json.loads(status.stdout)["embedded_chunks"] == json.loads(status.stdout)["chunks"] > 0
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "1", "query": "parse the port number", "gold_files": ["src/server.py"]}) + "\n")
    scored = bridge("eval", str(questions), "--repo", str(repo), "--milvus-uri", uri, "--json")
    assert scored.returncode == 0, scored.stderr


def test_an_unreachable_milvus_is_one_line_naming_the_uri(repo: Path) -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    result = bridge("search", "x", "--repo", str(repo), "--milvus-uri", uri)
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and uri in result.stderr and "--milvus-uri" in result.stderr
