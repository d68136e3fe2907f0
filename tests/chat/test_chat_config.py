"""The chat settings: command line beats BRIDGE_* beats defaults; sizes and layer counts parse clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.chat.settings import Settings, load_settings, parse_bytes, parse_gpu_layers
from bridge.errors import ConfigError


def test_defaults_apply_when_nothing_is_given() -> None:
    assert load_settings({}, env={}) == Settings()
    assert Settings().snippet_tokens == 600 and Settings().gpu_layers == "auto" and Settings().n_ctx is None


def test_an_environment_variable_sets_a_field() -> None:
    settings = load_settings({}, env={"BRIDGE_N_CTX": "4096", "BRIDGE_KV_BUDGET": "256MiB", "BRIDGE_MODEL": "~/m.gguf"})
    assert settings.n_ctx == 4096
    assert settings.kv_budget == 256 * 2**20
    assert settings.model == Path("~/m.gguf").expanduser()


def test_the_command_line_wins_over_the_environment() -> None:
    env = {"BRIDGE_N_CTX": "4096", "BRIDGE_CACHE_TYPE": "q4_0"}
    settings = load_settings({"n_ctx": 2048, "cache_type": "q8_0"}, env=env)
    assert (settings.n_ctx, settings.cache_type) == (2048, "q8_0")


def test_an_option_left_out_on_the_command_line_falls_back_to_the_environment() -> None:
    assert load_settings({"n_ctx": None}, env={"BRIDGE_N_CTX": "1024"}).n_ctx == 1024


def test_a_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="BRIDGE_CACHE_TYPE: 'f8' is not one of f16, q8_0, q4_0"):
        load_settings({}, env={"BRIDGE_CACHE_TYPE": "f8"})


def test_a_bad_option_value_names_the_option() -> None:
    with pytest.raises(ConfigError, match="--kv-budget: 'lots' is not a size"):
        load_settings({"kv_budget": "lots"}, env={})
    with pytest.raises(ConfigError, match="--n-ctx: 0 is not positive"):
        load_settings({"n_ctx": 0}, env={})


def test_an_unknown_setting_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown settings"):
        load_settings({"temperature": 1.0}, env={})


def test_settings_are_frozen() -> None:
    with pytest.raises(AttributeError):
        Settings().k = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("268435456", 268_435_456), ("256MiB", 256 * 2**20), ("1.5 GiB", 3 * 2**29), ("2GB", 2 * 10**9),
     ("64kib", 65_536), ("10 b", 10), (4096, 4096)],
)
def test_sizes_take_binary_and_decimal_units(text: str | int, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "MiB", "12 parsecs", "-5", "0"])
def test_a_size_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_bytes(text)


def test_gpu_layers_are_a_count_or_auto() -> None:
    assert parse_gpu_layers("auto") == "auto"
    assert parse_gpu_layers(" AUTO ") == "auto"
    assert parse_gpu_layers("12") == 12
    assert parse_gpu_layers("-1") == -1
    with pytest.raises(ConfigError, match="neither a number nor auto"):
        parse_gpu_layers("all")


def test_a_zero_snippet_budget_is_allowed_but_a_zero_answer_reserve_is_not() -> None:
    assert load_settings({"snippet_tokens": 0}, env={}).snippet_tokens == 0
    with pytest.raises(ConfigError, match="--answer-reserve"):
        load_settings({"answer_reserve": 0}, env={})
