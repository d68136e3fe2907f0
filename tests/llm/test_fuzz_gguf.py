"""A model file that is not GGUF, is cut short, or has damaged bytes anywhere gives one clear
error (ModelError), never another exception; `bridge model` prints it as one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.gguf import write_gguf

from bridge.cli import main
from bridge.errors import ModelError
from bridge.llm.gguf import ModelFacts, read_gguf

FUZZ = settings(
    max_examples=int(os.environ.get("BRIDGE_FUZZ_EXAMPLES", "150")), deadline=None, database=None, derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def model_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = write_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf", tensor_values=2048)
    return path.read_bytes()


def _read(path: Path, data: bytes, named: bool = True) -> ModelFacts | None:
    path.write_bytes(data)
    try:
        return read_gguf(path)
    except ModelError as exc:
        message = str(exc)
        assert "\n" not in message, message
        assert "again" in message or "pass a" in message, message  # says what to do next
        # A damaged metadata value is reported by its key, without the file (bridge/gguf.py `_field`).
        assert str(path) in message or not named, message
        return None


def test_the_intact_file_reads(model_bytes: bytes, tmp_path: Path) -> None:
    facts = _read(tmp_path / "m.gguf", model_bytes)
    assert facts is not None and facts.layers == 4


def test_a_file_cut_anywhere_is_a_model_error(model_bytes: bytes, tmp_path: Path) -> None:
    @FUZZ
    @given(cut=st.integers(0, len(model_bytes) - 1))
    def run(cut: int) -> None:
        assert _read(tmp_path / "cut.gguf", model_bytes[:cut]) is None

    run()


def test_damaged_bytes_anywhere_give_facts_or_a_model_error(model_bytes: bytes, tmp_path: Path) -> None:
    @FUZZ
    @given(
        edits=st.lists(
            st.tuples(st.integers(0, len(model_bytes) - 1), st.binary(min_size=1, max_size=8)), min_size=1, max_size=4
        )
    )
    def run(edits: list[tuple[int, bytes]]) -> None:
        data = bytearray(model_bytes)
        for at, new in edits:
            data[at : at + len(new)] = new
        _read(tmp_path / "damaged.gguf", bytes(data[: len(model_bytes)]), named=False)

    run()


@pytest.mark.parametrize(
    "content",
    [b"", b"GGUF", b"GGUF\x03\x00\x00\x00", b"PK\x03\x04zip", b"\x7fELF", b"<html>not a model</html>", b"GGML" * 100],
)
def test_bridge_model_on_a_bad_file_prints_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(content)
    with pytest.raises(SystemExit) as stop:
        main(["model", str(path)])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 1
    assert err.startswith("error:") and "\n" not in err and str(path) in err, err
