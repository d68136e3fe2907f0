"""`bridge eval` as a user runs it: a questions file in, metrics per mode out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def bridge(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge", *args], capture_output=True, text=True, env=os.environ.copy(), timeout=timeout
    )


def questions(tmp_path: Path) -> Path:
    lines = [
        {"id": "retry", "query": "how long does the retry policy back off between attempts",
         "gold_files": ["src/config.py"], "gold_spans": [{"path": "src/config.py", "start_line": 12, "end_line": 20}],
         "answer_contains": ["backoff"]},
        {"id": "port", "query": "invalid port number error", "gold_files": ["src/server.py"]},
        {"id": "nowhere", "query": "kubernetes helm chart", "gold_files": ["deploy/chart.yaml"]},
    ]
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def index(repo: Path, tmp_path: Path, *options: str) -> str:
    idx = str(tmp_path / "idx")
    built = bridge("index", str(repo), "--index-dir", idx, *options)
    assert built.returncode == 0, built.stderr
    return idx


def test_eval_json_scores_files_spans_and_latency(repo: Path, tmp_path: Path) -> None:
    idx = index(repo, tmp_path, "--no-vectors")
    done = bridge("eval", str(questions(tmp_path)), "--repo", str(repo), "--index-dir", idx, "--mode", "lexical",
                  "-k", "3", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["questions"] == 3 and data["k"] == 3 and data["answers"] is None
    metrics = data["modes"]["lexical"]
    # Two of three gold files come first; the third is not in the repository at all.
    assert metrics["recall_at_1"] == pytest.approx(2 / 3) and metrics["mrr"] == pytest.approx(2 / 3)
    assert metrics["span_recall"] == pytest.approx(1.0) and metrics["median_latency_ms"] > 0
    assert data["per_question"][0]["lexical"]["ranked_files"][0] == "src/config.py"
    # Three questions say little: the interval of recall@1 spans from none to all of them.
    assert data["intervals"]["lexical"]["recall_at_1"] == [pytest.approx(2 / 3), 0.0, 1.0]
    assert data["differences"] == {}  # no hybrid to compare with


def test_mode_all_puts_the_three_modes_side_by_side(repo: Path, tmp_path: Path) -> None:
    idx = index(repo, tmp_path, "--embedder", "hash")
    done = bridge("eval", str(questions(tmp_path)), "--index-dir", idx, "--mode", "all", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert list(data["modes"]) == ["hybrid", "lexical", "vector"] and data["skipped"] == {}
    assert list(data["intervals"]) == ["hybrid", "lexical", "vector"]
    assert list(data["differences"]) == ["hybrid - lexical", "hybrid - vector"]
    gain, low, high = data["differences"]["hybrid - lexical"]["mrr"]
    assert gain == pytest.approx(data["modes"]["hybrid"]["mrr"] - data["modes"]["lexical"]["mrr"], abs=1e-6)
    assert low <= gain <= high
    human = bridge("eval", str(questions(tmp_path)), "--index-dir", idx, "--mode", "all")
    assert human.returncode == 0 and human.stdout == ""
    assert "recall@5" in human.stderr and "vector" in human.stderr
    assert "95 % intervals" in human.stderr and "hybrid − lexical: recall@1 " in human.stderr


def test_mode_all_skips_the_vector_mode_of_an_index_without_vectors(repo: Path, tmp_path: Path) -> None:
    idx = index(repo, tmp_path, "--no-vectors")
    done = bridge("eval", str(questions(tmp_path)), "--index-dir", idx, "--mode", "all", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert list(data["modes"]) == ["hybrid", "lexical"] and "no vectors" in data["skipped"]["vector"]


@pytest.mark.parametrize(
    ("content", "args", "code", "message"),
    [
        ('{"id": "a", "query": "x"}\n', (), 1, "'gold_files' is missing"),
        ('{"id": "a", "query": "x", "gold_files": ["a.py"]}\n', ("--mode", "fuzzy"), 2, "--mode"),
        ('{"id": "a", "query": "x", "gold_files": ["a.py"]}\n', ("--mode", "vector"), 1, "no vectors"),
    ],
)
def test_bad_input_is_a_one_line_error(repo: Path, tmp_path: Path, content: str, args: tuple[str, ...], code: int,
                                       message: str) -> None:
    idx = index(repo, tmp_path, "--no-vectors")
    path = tmp_path / "q.jsonl"
    path.write_text(content, encoding="utf-8")
    done = bridge("eval", str(path), "--index-dir", idx, *args)
    assert done.returncode == code
    assert message in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_answers_are_checked_with_retrieval_and_with_the_repository_cut_to_n_ctx(repo: Path, tmp_path: Path) -> None:
    idx = index(repo, tmp_path, "--no-vectors")
    done = bridge("eval", str(questions(tmp_path)), "--index-dir", idx, "--mode", "lexical", "--answers",
                  "--n-ctx", "1024", "--answer-reserve", "48", "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)["answers"]
    assert set(answers["summary"]) == {"retrieval", "full_context"}
    for summary in answers["summary"].values():
        assert summary["n"] == 1 and 0.0 <= summary["contains_rate"] <= 1.0
        assert summary["mean_prompt_tokens"] > 0 and summary["median_total_ms"] > 0
    checks = {c["mode"]: c for c in answers["per_question"]}
    assert checks["retrieval"]["question_id"] == "retry" and len(checks["retrieval"]["contained"]) == 1
    assert checks["full_context"]["prompt_tokens"] <= 1024 - 48
