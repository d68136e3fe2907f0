"""`bridge model`: model facts, KV cost per token and per context, what fits in memory, the context contract."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from bridge.cli import main
from bridge.cli.model_cmds import human_bytes

pytestmark = pytest.mark.timeout(60)

REQUIRED = {"architecture", "layers", "heads", "kv_heads", "head_dim", "trained_context", "rope", "kv_bytes_per_token",
            "kv_bytes_per_token_by_type", "weights_bytes"}


@dataclass(frozen=True)
class Ran:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def model(capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """Runs `bridge model ARGS` through the CLI's own entry point, which turns errors into exit codes."""

    def run(*args: str) -> Ran:
        capsys.readouterr()
        try:
            main(["model", *args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        else:
            code = 0
        out = capsys.readouterr()
        return Ran(code, out.out, out.err)

    return run


@pytest.fixture
def model_json(model: Callable[..., Ran]) -> Callable[..., dict]:
    def run(*args: str) -> dict:
        result = model(*args, "--json")
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)

    return run


def test_the_bundled_model_is_described_by_its_gguf_metadata(model_json: Callable[..., dict]) -> None:
    data = model_json()
    assert set(data) >= REQUIRED
    assert data["path"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    shape = (data["architecture"], data["layers"], data["heads"], data["kv_heads"], data["head_dim"])
    assert shape == ("llama", 30, 9, 3, 64)
    assert data["trained_context"] == 8192
    assert data["rope"] == {"freq_base": 100_000.0, "scaling_type": None, "factor": None, "original_context": None,
                            "low_freq_factor": None, "high_freq_factor": None}
    assert data["kv_bytes_per_token"] == 2 * 30 * 3 * 64 * 2
    assert data["kv_bytes_per_token_by_type"] == {"f16": 23_040, "q8_0": 12_240, "q4_0": 6_480}
    assert 80_000_000 < data["weights_bytes"] < 110_000_000
    assert data["n_ctx"] == 8192 and data["kv_bytes"] == 8192 * 23_040


def test_the_chosen_cache_type_sets_kv_bytes_per_token(model_json: Callable[..., dict]) -> None:
    data = model_json("--cache-type", "q4_0", "--n-ctx", "4096")
    assert data["kv_bytes_per_token"] == 6_480
    assert data["kv_bytes"] == 4096 * 6_480


def test_kv_bytes_are_tabled_per_context_size_for_every_cache_type(model_json: Callable[..., dict]) -> None:
    data = model_json("--preset", "llama-3.1-8b")
    rows = {row["tokens"]: row for row in data["kv_bytes_by_context"]}
    assert set(rows) == {2048, 4096, 8192, 16384, 32768, 65536, 131072}
    assert rows[131072] == {"tokens": 131072, "f16": 16 * 2**30, "q8_0": 131072 * 69_632, "q4_0": 131072 * 36_864}


def test_a_preset_reports_llama3_rope_scaling_and_weights_per_format(model_json: Callable[..., dict]) -> None:
    data = model_json("--preset", "llama-3.1-70b")
    assert data["path"] is None
    assert (data["layers"], data["kv_heads"], data["head_dim"], data["trained_context"]) == (80, 8, 128, 131_072)
    assert data["rope"]["scaling_type"] == "llama3" and data["rope"]["factor"] == 8.0
    assert data["rope"]["original_context"] == 8192
    assert data["weights_by_format"]["F16"] == 2 * 70_553_706_496


def test_every_documented_preset_is_known(model_json: Callable[..., dict]) -> None:
    for name in ("llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "llama-3.2-1b", "llama-3.2-3b"):
        assert model_json("--preset", name)["architecture"] == "llama"


def test_the_memory_budget_leaves_room_for_the_weights_first(model_json: Callable[..., dict]) -> None:
    data = model_json("--preset", "llama-3.1-8b", "--memory", "8GiB")
    memory = data["memory"]
    room = 8 * 2**30 - data["weights_bytes"]
    assert memory["kv_room_bytes"] == room
    assert memory["max_context"]["f16"] == room // 131_072
    assert memory["max_context"]["q4_0"] == room // 36_864


def test_the_largest_context_that_fits_is_capped_at_the_models_limit(model_json: Callable[..., dict]) -> None:
    data = model_json("--memory", "16GiB")
    assert data["memory"]["max_context"] == {"f16": 8192, "q8_0": 8192, "q4_0": 8192}


def test_memory_smaller_than_the_weights_fits_no_context(model_json: Callable[..., dict]) -> None:
    assert model_json("--preset", "llama-3.1-8b", "--memory", "1GiB")["memory"]["max_context"]["f16"] == 0


def test_a_context_beyond_training_is_refused_with_the_limit_and_the_reason(model: Callable[..., Ran]) -> None:
    result = model("--n-ctx", "16384")
    assert result.exit_code == 1
    assert "beyond the trained context 8192" in result.stderr
    assert "declares no RoPE scaling" in result.stderr and "use --n-ctx 8192 or less" in result.stderr


def test_llama3_scaling_does_not_stretch_a_preset_beyond_its_trained_context(
    model_json: Callable[..., dict], model: Callable[..., Ran]
) -> None:
    assert model_json("--preset", "llama-3.2-1b", "--n-ctx", "131072")["n_ctx"] == 131_072
    result = model("--preset", "llama-3.2-1b", "--n-ctx", "200000")
    assert result.exit_code == 1
    assert "llama3 RoPE scaling is already part of that training: use --n-ctx 131072 or less" in result.stderr


def test_declared_rope_scaling_lets_a_gguf_go_beyond_its_trained_context(
    tmp_path: Path, model_json: Callable[..., dict], model: Callable[..., Ran]
) -> None:
    import gguf
    import numpy as np

    path = tmp_path / "yarn.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_embedding_length(64)
    writer.add_context_length(4096)
    writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    writer.add_rope_scaling_factor(4.0)
    writer.add_rope_scaling_orig_ctx_len(4096)
    writer.add_tensor("w", np.zeros(8, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    data = model_json(str(path), "--n-ctx", "16384")
    assert (data["n_ctx"], data["context_limit"]) == (16384, 16384)
    assert data["rope"]["scaling_type"] == "yarn"
    assert model(str(path), "--n-ctx", "16385").exit_code == 1


def test_a_file_that_is_not_gguf_is_one_clear_error(tmp_path: Path, model: Callable[..., Ran]) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_text("not a model")
    result = model(str(bogus))
    assert result.exit_code == 1
    assert "is not a GGUF model" in result.stderr


def test_a_file_and_a_preset_together_are_a_usage_error(tmp_path: Path, model: Callable[..., Ran]) -> None:
    result = model(str(tmp_path / "x.gguf"), "--preset", "llama-3.1-8b")
    assert result.exit_code == 2


def test_an_unknown_cache_type_or_preset_is_refused(model: Callable[..., Ran]) -> None:
    assert model("--cache-type", "q5_1").exit_code == 2
    result = model("--preset", "gpt-5")
    assert result.exit_code == 1 and "llama-3.1-8b" in result.stderr


def test_human_output_tables_the_kv_cache_and_marks_n_ctx(model: Callable[..., Ran]) -> None:
    result = model("--preset", "llama-3.1-8b", "--memory", "16GiB")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "32 layers, 32 heads, 8 KV heads, head dim 128" in result.stderr
    assert "llama3 scaling x8 of 8,192" in result.stderr
    assert "     8,192      1.0 GiB    544.0 MiB    288.0 MiB <- n_ctx" in result.stderr
    assert "largest context f16 93,623" in result.stderr


def test_sizes_are_shown_in_binary_units() -> None:
    sizes = (512, 2048, 23_040 * 8192, 16 * 2**30)
    assert [human_bytes(n) for n in sizes] == ["512 B", "2.0 KiB", "180.0 MiB", "16.0 GiB"]
