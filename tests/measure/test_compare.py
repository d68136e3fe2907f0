from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from bridge.errors import CompareError, PrefillError
from bridge.llm.gguf import preset
from bridge.llm.prefill import fit_prefill, holdout, measure_points, prefill_sizes, relative_residuals
from bridge.llm.runtime import TemplateOverhead
from bridge.measure.compare import ModelSide, compare, context_side, count_repository, gpu_fits
from index.build.pipeline import BuildOptions, build_index
from index.search.searcher import Searcher

GIB = 1 << 30


def quadratic(a: float, b: float, c: float):
    return lambda n: a + b * n + c * n * n


# --- the fit -------------------------------------------------------------------------------


def test_the_fit_recovers_the_coefficients_of_exact_quadratic_data() -> None:
    truth = quadratic(12.0, 0.35, 2.5e-5)
    points = [(n, truth(n)) for n in (256, 512, 1024, 2048, 4096, 8192)]
    fit = fit_prefill(points)
    assert fit.a == pytest.approx(12.0, rel=1e-6)
    assert fit.b == pytest.approx(0.35, rel=1e-6)
    assert fit.c == pytest.approx(2.5e-5, rel=1e-6)
    assert max(abs(r) for r in relative_residuals(fit, points)) < 1e-9


def test_the_fit_predicts_a_held_out_size_within_a_few_percent_under_mild_noise() -> None:
    truth = quadratic(20.0, 0.5, 1e-5)
    rng = random.Random(7)
    points = [(n, truth(n) * (1 + rng.uniform(-0.03, 0.03))) for n in (512, 1024, 2048, 4096, 6144, 8192)]
    check = holdout(points)
    assert check.tokens == 8192
    assert abs(check.error) < 0.10
    assert check.predicted_ms == pytest.approx(check.fit.predict(8192))


def test_the_fit_never_bends_down_when_noise_makes_the_data_concave() -> None:
    points = [(1000, 100.0), (2000, 190.0), (3000, 270.0), (4000, 340.0)]
    fit = fit_prefill(points)
    assert fit.b >= 0 and fit.c >= 0
    assert fit.predict(100_000) > fit.predict(4000)


def test_the_fit_needs_three_distinct_sizes_and_positive_times() -> None:
    with pytest.raises(PrefillError, match="at least 3 distinct"):
        fit_prefill([(100, 1.0), (100, 1.1), (200, 2.0)])
    with pytest.raises(PrefillError, match="positive"):
        fit_prefill([(100, 1.0), (200, 0.0), (300, 3.0)])


def test_holding_a_size_out_needs_four_sizes() -> None:
    with pytest.raises(PrefillError, match="at least 4"):
        holdout([(100, 1.0), (200, 2.0), (300, 3.0)])


def test_prefill_sizes_are_distinct_and_end_at_n_ctx() -> None:
    sizes = prefill_sizes(8192)
    assert sizes == [512, 1024, 2048, 4096, 8192]
    assert len(prefill_sizes(64)) >= 4 and max(prefill_sizes(64)) == 64


def test_measuring_discards_a_warm_up_run_and_keeps_the_fastest_of_interleaved_rounds() -> None:
    calls: list[int] = []
    times = iter([999.0, 30.0, 50.0, 20.0, 60.0])

    def measure(n: int) -> float:
        calls.append(n)
        return next(times)

    assert measure_points(measure, [200, 100], repeats=2) == [(100, 20.0), (200, 50.0)]
    assert calls == [100, 100, 200, 100, 200]


# --- counting and KV arithmetic --------------------------------------------------------------


def test_a_small_repository_is_counted_exactly(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x" * 40)
    (tmp_path / "b.py").write_text("y" * 80)
    counted = count_repository(tmp_path, ["a.py", "b.py", "gone.py"], lambda text: len(text) // 4)
    assert (counted.tokens, counted.files, counted.bytes, counted.method, counted.error) == (30, 2, 120, "exact", None)
    assert counted.samples == 2


def test_a_large_repository_is_estimated_from_random_windows_with_an_honest_error(tmp_path: Path) -> None:
    rng = random.Random(3)
    paths = []
    for i in range(300):
        # Files differ in tokens per byte: short words in some, long ones in others.
        word = "ab" if i % 3 else "abcdefghij"
        lines = [" ".join([word] * rng.randint(1, 12)) for _ in range(rng.randint(5, 400))]
        (tmp_path / f"f{i}.txt").write_text("\n".join(lines) + "\n")
        paths.append(f"f{i}.txt")
    count = lambda text: len(text.split())
    truth = count_repository(tmp_path, paths, count).tokens
    outside = 0
    for seed in range(10):
        sampled = count_repository(tmp_path, paths, count, exact_limit=10_000, sample_bytes=200_000, seed=seed)
        assert sampled.method == "sampled" and sampled.samples == 100  # at least 100 windows
        assert sampled.error is not None and 0 < sampled.error < 0.5
        outside += abs(sampled.tokens - truth) / truth > sampled.error
    assert outside <= 2  # a 95 % interval, ten draws


def test_kv_bytes_follow_the_model_shape_and_include_the_answer_reserve() -> None:
    facts = preset("llama-3.1-8b")  # 32 layers, 8 KV heads of 128: 131,072 bytes per token at f16
    side = context_side(facts, 1000, 24, "q8_0")
    assert side.kv_tokens == 1024
    assert side.kv_bytes_by_type == {"f16": 131_072 * 1024, "q8_0": 69_632 * 1024, "q4_0": 36_864 * 1024}
    assert side.kv_bytes == side.kv_bytes_by_type["q8_0"]


def test_preset_memory_arithmetic_matches_the_published_shapes() -> None:
    eight, seventy, big = preset("llama-3.1-8b"), preset("llama-3.1-70b"), preset("llama-3.1-405b")
    weights = dict(eight.weights_by_format)
    assert weights["F16"] == 2 * 8_030_261_248
    assert weights["Q4_K_M"] == math.ceil(8_030_261_248 * 4.89 / 8)
    full_128k = context_side(eight, 131_072 - 512, 512, "f16").kv_bytes
    assert full_128k == 16 * GIB
    assert gpu_fits(weights["Q4_K_M"], full_128k) == {"16GiB": False, "24GiB": True, "80GiB": True}
    assert gpu_fits(dict(seventy.weights_by_format)["F16"], 0)["80GiB"] is False
    assert not any(gpu_fits(dict(big.weights_by_format)["Q4_K_M"], 0).values())
    assert context_side(preset("llama-3.2-1b"), 1, 0, "f16").kv_bytes == 2 * 16 * 8 * 64 * 2


# --- the whole comparison --------------------------------------------------------------------


def indexed(repo: Path, tmp_path: Path) -> Searcher:
    where = tmp_path / "idx"
    build_index(repo, where, BuildOptions(embedder=None))
    return Searcher(where)


def fake_model(measure: object) -> ModelSide:
    return ModelSide(
        facts=preset("llama-3.2-1b"), label="fake", n_ctx=2048, cache_type="f16",
        count=lambda text: max(1, len(text) // 4), exact_tokens=True, overhead=TemplateOverhead(),
        measure=measure,  # type: ignore[arg-type]
    )


def test_compare_reports_both_sides_and_extrapolates_prefill_from_a_clean_fit(repo: Path, tmp_path: Path) -> None:
    searcher = indexed(repo, tmp_path)
    report = compare(
        fake_model(quadratic(5.0, 0.2, 1e-5)), searcher.root, list(searcher.manifest.files),
        lambda q: searcher.search(q, k=5, max_tokens=600).hits, ["How is the retry policy configured?"],
        sizes=[64, 128, 256, 512, 1024], repeats=1, answer_reserve=100,
    )
    full, retrieval, prefill = report["full_context"], report["retrieval"], report["prefill"]
    assert report["repository"]["method"] == "exact" and report["repository"]["files"] == 5
    assert full["tokens"] > report["repository"]["tokens"] and full["kv_tokens"] == full["tokens"] + 100
    assert full["fits_n_ctx"] is True and full["fits_trained_context"] is True
    assert retrieval["tokens"] < full["tokens"] and retrieval["snippet_tokens"] > 0
    assert retrieval["kv_bytes"] == retrieval["kv_tokens"] * 32_768
    assert [p["tokens"] for p in prefill["measured"]] == [64, 128, 256, 512, 1024]
    assert prefill["fit"] == pytest.approx({"a": 5.0, "b": 0.2, "c": 1e-5}, rel=1e-6)
    assert prefill["holdout"]["tokens"] == 1024 and abs(prefill["holdout"]["error"]) < 1e-6
    assert prefill["retrieval_ms"] == pytest.approx(quadratic(5.0, 0.2, 1e-5)(retrieval["tokens"]), rel=1e-4)
    assert prefill["ratio"] == pytest.approx(prefill["full_context_predicted_ms"] / prefill["retrieval_ms"], rel=1e-2)
    assert prefill["extrapolated"] is (full["tokens"] > 1024)


def test_a_preset_comparison_has_no_timings_and_says_so(repo: Path, tmp_path: Path) -> None:
    searcher = indexed(repo, tmp_path)

    def run(budget: int | None) -> dict:
        return compare(fake_model(None), searcher.root, list(searcher.manifest.files),
                       lambda q: searcher.search(q, k=5).hits, ["where is the port parsed?"], kv_budget_bytes=budget)

    # A budget that holds exactly the retrieval turn's KV cache
    report = run(run(None)["retrieval"]["kv_bytes"])
    prefill = report["prefill"]
    assert prefill["measured"] == [] and prefill["fit"] is None and prefill["ratio"] is None
    assert "needs a real model" in prefill["note"]
    assert report["model"]["preset"] is True
    assert report["full_context"]["fits_kv_budget"] is False and report["retrieval"]["fits_kv_budget"] is True


def test_prefill_sizes_beyond_n_ctx_are_refused(repo: Path, tmp_path: Path) -> None:
    searcher = indexed(repo, tmp_path)
    with pytest.raises(CompareError, match="n_ctx 2048"):
        compare(fake_model(quadratic(1, 1, 0)), searcher.root, list(searcher.manifest.files),
                lambda q: searcher.search(q).hits, ["x"], sizes=[512, 1024, 2048, 4096])
