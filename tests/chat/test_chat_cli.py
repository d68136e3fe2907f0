"""`bridge ask` and `bridge chat`: in process with a fake runtime, and once for real (slow) as a subprocess."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.chat import FakeRuntime, make_repo
from typer.testing import CliRunner

from bridge.cli import app

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeRuntime:
    """Every command in this test gets this fake instead of llama.cpp; BRIDGE_HOME is private."""
    fake = FakeRuntime()
    monkeypatch.setattr("bridge.chat.session.open_runtime", lambda settings: fake)
    monkeypatch.setenv("BRIDGE_HOME", str(tmp_path / "home"))
    for name in ("BRIDGE_SERVER", "BRIDGE_N_CTX", "BRIDGE_SNIPPET_TOKENS", "BRIDGE_MODE"):
        monkeypatch.delenv(name, raising=False)
    return fake


def run(*args: str, stdin: str | None = None) -> object:
    return CliRunner().invoke(app, list(args), input=stdin, catch_exceptions=False)


def test_ask_json_prints_exactly_one_report_on_stdout(runtime: FakeRuntime, chat_repo: Path) -> None:
    question = "how does parse_config split each line"
    result = run("ask", question, "--repo", str(chat_repo), "--json", "--mode", "lexical")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {"answer", "sources", "model", "budget", "notice", "timings", "checks", "grounding"}
    assert report["sources"][0]["path"] == "src/config.py"
    for source in report["sources"]:
        lines = (chat_repo / source["path"]).read_text().splitlines()
        assert 1 <= source["start_line"] <= source["end_line"] <= len(lines)
    assert report["answer"].startswith("See src/config.py:")
    assert report["model"]["path"] == "fake.gguf"
    assert runtime.closed


def test_ask_streams_the_answer_to_stdout_and_reports_on_stderr(runtime: FakeRuntime, chat_repo: Path) -> None:
    result = run("ask", "retry delay attempts", "--repo", str(chat_repo), "--mode", "lexical")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("See src/retry.py:")
    assert "fake runtime: 0 layers offloaded" in result.stderr
    assert re.search(r"sources:\n  src/retry\.py:\d+-\d+  \(0\.\d+\)", result.stderr)
    assert "budget: n_ctx 2048; prompt" in result.stderr
    assert re.search(r"retrieval \d+ ms; prefill 10 ms for \d+ tokens", result.stderr)


def test_ask_builds_a_missing_index_first_and_says_so(runtime: FakeRuntime, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "fresh")
    first = run("ask", "start_server port", "--repo", str(repo), "--index-dir", str(tmp_path / "idx"))
    assert first.exit_code == 0, first.stderr
    assert "has no index yet: building its BM25 index now (run `bridge index" in first.stderr
    assert "src/server.py" in first.stderr
    again = run("ask", "start_server port", "--repo", str(repo), "--index-dir", str(tmp_path / "idx"))
    assert "no index yet" not in again.stderr


def test_ask_can_search_through_a_running_server_with_a_token(
    runtime: FakeRuntime, live_server: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEMO_TOKEN", live_server.token)  # type: ignore[attr-defined]
    result = run("ask", "retry delay", "--server", live_server.url, "--token-env", "DEMO_TOKEN", "--json")  # type: ignore[attr-defined]
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["sources"][0]["path"] == "src/retry.py"


def test_a_wrong_server_token_is_one_line_and_exit_1(
    runtime: FakeRuntime, live_server: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bridge.cli import main

    monkeypatch.setenv("DEMO_TOKEN", "not-the-token")
    with pytest.raises(SystemExit) as exit_info:
        main(["ask", "retry", "--server", live_server.url, "--token-env", "DEMO_TOKEN"])  # type: ignore[attr-defined]
    assert exit_info.value.code == 1


def test_index_dir_with_a_server_is_a_usage_error(runtime: FakeRuntime, tmp_path: Path) -> None:
    result = run("ask", "x", "--server", "http://127.0.0.1:9/mcp", "--index-dir", str(tmp_path))
    assert result.exit_code == 2
    assert "--index-dir is for the in-process server" in result.stderr


def test_a_missing_repository_folder_is_reported(runtime: FakeRuntime, tmp_path: Path) -> None:
    result = run("ask", "x", "--repo", str(tmp_path / "nope"))
    assert result.exit_code == 1
    assert "no folder at" in result.stderr


def test_settings_come_from_bridge_environment_variables(
    runtime: FakeRuntime, chat_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRIDGE_SNIPPET_TOKENS", "0")
    result = run("ask", "retry", "--repo", str(chat_repo), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["sources"] == []


def test_show_budget_prints_the_plan_before_the_answer(runtime: FakeRuntime, chat_repo: Path) -> None:
    result = run("ask", "retry", "--repo", str(chat_repo), "--show-budget", "--mode", "lexical")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("budget: n_ctx 2048") == 1
    assert re.search(r"snippets \d+ \(\d\) \+ question \d+", result.stderr)
    assert "GPU: 0 of 30 layers offloaded" in result.stderr


def test_ask_ends_the_streamed_answer_with_the_sources_it_cites(runtime: FakeRuntime, chat_repo: Path) -> None:
    result = run("ask", "retry delay attempts", "--repo", str(chat_repo), "--mode", "lexical")
    assert result.exit_code == 0, result.stderr
    cited = re.match(r"See (src/retry\.py:\d+-\d+)", result.stdout)
    assert cited is not None
    assert result.stdout.rstrip().endswith(f"Sources: {cited.group(1)}")


def test_chat_answers_each_line_and_knows_its_commands(runtime: FakeRuntime, chat_repo: Path, chat_index: Path) -> None:
    lines = ["where is the settings file parsed", "/sources", "/budget", "/reset", "/what", "", "and retry?", "/quit",
             "never asked"]
    args = ("chat", "--repo", str(chat_repo), "--index-dir", str(chat_index), "--mode", "lexical")
    result = run(*args, stdin="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.stderr
    assert len(runtime.calls) == 2
    assert result.stdout.count("See src/") == 2
    assert "sources:\n  src/config.py:" in result.stderr
    assert "budget: n_ctx 2048" in result.stderr
    assert "history cleared" in result.stderr
    assert "unknown command /what" in result.stderr
    roles = [m.role for m in runtime.calls[1][0]]
    assert roles == ["system", "user"]  # /reset forgot the first turn


def test_chat_reports_a_failed_turn_and_goes_on_until_end_of_input(
    runtime: FakeRuntime, chat_repo: Path, chat_index: Path
) -> None:
    too_long = "why " * 3000
    args = ("chat", "--repo", str(chat_repo), "--index-dir", str(chat_index), "--mode", "lexical")
    result = run(*args, stdin=f"{too_long}\nretry\n")
    assert result.exit_code == 0, result.stderr
    assert "error: system prompt" in result.stderr and "shorten the question" in result.stderr
    assert len(runtime.calls) == 1


def test_chat_says_when_there_is_nothing_to_show_yet(runtime: FakeRuntime, chat_repo: Path, chat_index: Path) -> None:
    result = run("chat", "--repo", str(chat_repo), "--index-dir", str(chat_index), stdin="/sources\n/budget\n")
    assert result.stderr.count("no answer yet") == 2


# --- the real thing ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_bridge_ask_answers_with_the_bundled_model_from_sources_it_retrieved(tmp_path: Path) -> None:
    import os

    repo = make_repo(tmp_path / "demo")
    env = dict(os.environ, BRIDGE_HOME=str(tmp_path / "home"), PYTHONUNBUFFERED="1")
    env.pop("PYTHONWARNINGS", None)
    index = tmp_path / "index"

    def bridge(*args: str) -> str:
        command = [sys.executable, "-m", "bridge", *args]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=500, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    bridge("index", str(repo), "--index-dir", str(index), "--embedder", "hash", "--json")
    question = "How does retry wait between attempts?"
    report = json.loads(
        bridge("ask", question, "--repo", str(repo), "--index-dir", str(index), "--json", "--n-ctx", "2048",
               "--answer-reserve", "64")
    )
    search = ("search", question, "--index-dir", str(index), "-k", "5", "--max-tokens", "600", "--json")
    retrieved = json.loads(bridge(*search))
    hits = {(h["path"], h["start_line"], h["end_line"]) for h in retrieved["hits"]}

    assert report["answer"].strip()
    assert report["sources"] and {(s["path"], s["start_line"], s["end_line"]) for s in report["sources"]} <= hits
    assert report["sources"][0]["path"] == "src/retry.py"
    model = report["model"]
    assert model["path"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    assert (model["n_ctx"], model["trained_context"], model["cache_type"]) == (2048, 8192, "f16")
    assert isinstance(model["gpu_layers"], int)
    budget = report["budget"]
    assert budget["kv_bytes_per_token"] == 23_040
    assert budget["prompt_tokens"] + budget["answer_reserve"] <= budget["n_ctx"]
    assert budget["kv_bytes"] == (budget["prompt_tokens"] + 64) * 23_040
    assert all(v > 0 for k, v in budget["sections"].items() if k != "history")
    timings = report["timings"]
    assert all(timings[k] > 0 for k in ("prefill_ms", "prefill_tokens_per_s", "decode_tokens_per_s", "total_ms"))
    assert timings["retrieval_ms"] > 0 and timings["total_ms"] > timings["prefill_ms"]
    # The bundled model is small: its answer shows no code or citation that the retrieved snippets lack.
    from bridge.chat.answers import Span, check_citations
    from bridge.chat.grounding import KnownNames, ungrounded_code_lines, unknown_inline_names

    assert report["grounding"]["mode"] == "grounded"
    texts = [h["text"] for h in retrieved["hits"]]
    assert ungrounded_code_lines(report["answer"], texts) == 0
    symbols = [h["symbol"] for h in retrieved["hits"] if h.get("symbol")]
    known = KnownNames([*texts, *(h["path"] for h in retrieved["hits"]), question, *symbols])
    assert unknown_inline_names(report["answer"], known) == []
    spans = [Span(s["path"], s["start_line"], s["end_line"]) for s in report["sources"]]
    assert not check_citations(report["answer"], spans).unknown
