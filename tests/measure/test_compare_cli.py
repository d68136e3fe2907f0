"""`bridge compare` as a user runs it: a new process, JSON on stdout, a PNG when asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REQUIRED = {
    "full_context": {"tokens", "fits_trained_context", "fits_n_ctx", "kv_bytes"},
    "retrieval": {"tokens", "kv_bytes"},
    "prefill": {"measured", "fit", "holdout", "full_context_predicted_ms", "retrieval_ms", "ratio"},
}


def bridge(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge", *args], capture_output=True, text=True, env=os.environ.copy(), timeout=timeout
    )


def indexed(repo: Path, tmp_path: Path) -> str:
    idx = str(tmp_path / "idx")
    assert bridge("index", str(repo), "--index-dir", idx, "--no-vectors").returncode == 0
    return idx


def test_a_preset_comparison_prints_the_promised_json_and_draws_a_png(repo: Path, tmp_path: Path) -> None:
    idx = indexed(repo, tmp_path)
    png = tmp_path / "out" / "compare.png"
    done = bridge("compare", "--repo", str(repo), "--index-dir", idx, "--preset", "llama-3.1-8b",
                  "--question", "How does the retry policy back off?", "--plot", str(png), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    for section, fields in REQUIRED.items():
        assert fields <= set(data[section]), section
    assert data["model"]["kv_bytes_per_token_by_type"] == {"f16": 131_072, "q8_0": 69_632, "q4_0": 36_864}
    assert data["model"]["tokenizer"] == "estimate"
    assert data["retrieval"]["questions"][0]["snippets"] >= 1
    assert data["full_context"]["kv_bytes"] == data["full_context"]["kv_tokens"] * 131_072
    assert data["prefill"]["fit"] is None and "real model" in data["prefill"]["note"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_human_report_goes_to_stderr_and_says_timings_need_a_model(repo: Path, tmp_path: Path) -> None:
    idx = indexed(repo, tmp_path)
    done = bridge("compare", "--index-dir", idx, "--preset", "llama-3.2-1b")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "full context" in done.stderr and "needs a real model" in done.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("--model", "x.gguf", "--preset", "llama-3.1-8b"), 2, "either --model or --preset"),
        (("--preset", "gpt-5"), 1, "unknown model preset"),
        (("--preset", "llama-3.1-8b", "--sizes", "1,2"), 2, "at least 4"),
        (("--preset", "llama-3.1-8b", "--cache-type", "q2"), 2, "--cache-type"),
    ],
)
def test_bad_options_are_one_line_errors(repo: Path, tmp_path: Path, args: tuple[str, ...], code: int,
                                         message: str) -> None:
    idx = indexed(repo, tmp_path)
    done = bridge("compare", "--index-dir", idx, *args)
    assert done.returncode == code
    assert message in done.stderr and "Traceback" not in done.stderr


def test_compare_without_an_index_says_how_to_make_one(tmp_path: Path) -> None:
    done = bridge("compare", "--index-dir", str(tmp_path / "none"), "--preset", "llama-3.1-8b")
    assert done.returncode == 1 and "bridge index" in done.stderr


@pytest.mark.slow
def test_the_bundled_model_measures_prefill_fits_it_and_checks_a_held_out_size(repo: Path, tmp_path: Path) -> None:
    idx = indexed(repo, tmp_path)
    done = bridge("compare", "--index-dir", idx, "--n-ctx", "512", "--sizes", "64,128,256,384,512",
                  "--repeats", "1", "--answer-reserve", "64", "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    prefill = data["prefill"]
    assert [p["tokens"] for p in prefill["measured"]] == [64, 128, 256, 384, 512]
    assert all(p["ms"] > 0 for p in prefill["measured"])
    assert set(prefill["fit"]) == {"a", "b", "c"} and prefill["fit"]["b"] >= 0 and prefill["fit"]["c"] >= 0
    holdout = prefill["holdout"]
    assert holdout["tokens"] == 512 and holdout["error"] == pytest.approx(
        (holdout["predicted_ms"] - holdout["measured_ms"]) / holdout["measured_ms"], abs=1e-3)
    assert data["model"]["tokenizer"] == "model" and data["repository"]["method"] == "exact"
    assert data["full_context"]["fits_n_ctx"] is False  # the sample repository is over 512 tokens
    assert prefill["retrieval_ms"] > 0 and prefill["ratio"] > 1
