"""MiniLM in int8 (ONNX Runtime) where the CPU has no AMX: chosen at build time, kept
by an index that has it, never mixed with the float32 vectors, close to them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from index.build.pipeline import BuildOptions, build_index
from index.embed import INT8_SPEC, choice, describe_path, load_embedder, resolve_spec
from index.embed.int8 import INT8_VERSION, quantize_int8
from index.errors import EmbedderError
from index.history import subject_spec
from index.store.layout import IndexDir

PRECISION = "BRIDGE_MINILM_PRECISION"


def _built_with(repo: Path, index_dir: Path, rebuild: bool = False) -> str | None:
    build_index(repo, index_dir, BuildOptions(embedder="minilm", history=False, rebuild=rebuild))
    store = IndexDir(index_dir)
    return store.manifest(store.current()).embedder


@pytest.mark.parametrize(("precision", "chosen"), [("int8", INT8_SPEC), ("fp32", "minilm"), ("bf16", "minilm")])
def test_the_precision_variable_decides_which_minilm_a_new_index_gets(
    monkeypatch: pytest.MonkeyPatch, precision: str, chosen: str
) -> None:
    monkeypatch.setenv(PRECISION, precision)
    assert resolve_spec("minilm") == chosen


@pytest.mark.parametrize(("amx", "chosen"), [(True, "minilm"), (False, INT8_SPEC)])
def test_a_new_index_gets_bf16_where_the_cpu_has_amx_and_int8_elsewhere(
    monkeypatch: pytest.MonkeyPatch, amx: bool, chosen: str
) -> None:
    monkeypatch.delenv(PRECISION, raising=False)
    monkeypatch.setattr(choice, "has_amx", lambda: amx)
    assert resolve_spec("minilm") == chosen
    assert describe_path(chosen).endswith("this CPU has AMX" if amx else "this CPU has no AMX")


@pytest.mark.parametrize(("flags", "bf16", "amx"), [({"avx2", "amx_tile"}, True, True),
                                                  ({"avx2", "amx_tile"}, False, False), ({"avx2"}, True, False)])
def test_amx_needs_the_kernels_flag_and_bf16_as_this_process_sees_it(
    monkeypatch: pytest.MonkeyPatch, flags: set[str], bf16: bool, amx: bool
) -> None:
    monkeypatch.setattr(choice, "_kernel_cpu_flags", lambda: flags)
    monkeypatch.setattr(choice, "_bf16_in_hardware", lambda backend: bf16)  # hidden by bench/avx2_only: False
    assert choice.has_amx() is amx


def test_other_embedders_are_never_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PRECISION, "int8")
    assert [resolve_spec(s, "minilm") for s in ("static", "hash", None, INT8_SPEC)] == ["static", "hash", None, INT8_SPEC]


def test_an_index_keeps_the_minilm_it_was_built_with_until_it_is_rebuilt(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PRECISION, "int8")
    assert _built_with(repo, tmp_path / "idx") == INT8_SPEC
    monkeypatch.setenv(PRECISION, "fp32")
    (repo / "src" / "new_module.py").write_text("def added():\n    return 1\n")
    assert _built_with(repo, tmp_path / "idx") == INT8_SPEC  # a re-index does not re-embed everything
    assert _built_with(repo, tmp_path / "idx", rebuild=True) == "minilm"


def test_int8_vectors_have_their_own_embedder_id_so_the_cache_never_mixes_them() -> None:
    assert load_embedder("minilm").id != load_embedder(INT8_SPEC).id
    assert load_embedder(INT8_SPEC).id.startswith(f"minilm-int8:all-MiniLM-L6-v2-q{INT8_VERSION}@")  # a new quantization, a new id


def test_commit_subjects_use_the_same_minilm_as_the_chunks() -> None:
    assert subject_spec(INT8_SPEC) == INT8_SPEC
    assert subject_spec("minilm") == "minilm"
    assert subject_spec("static") == "minilm"


def test_the_path_is_described_with_the_reason_it_was_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PRECISION, "int8")
    assert describe_path(INT8_SPEC) == f"int8 on ONNX Runtime, a stream per core; set by {PRECISION}"
    monkeypatch.setenv(PRECISION, "fp32")
    assert describe_path("minilm").startswith("float32 on ")


@pytest.mark.parametrize("amx", [True, False])
def test_an_index_that_kept_the_other_kind_is_not_said_to_have_it_because_of_this_cpu(
    monkeypatch: pytest.MonkeyPatch, amx: bool
) -> None:
    monkeypatch.delenv(PRECISION, raising=False)
    monkeypatch.setattr(choice, "has_amx", lambda: amx)
    kept = INT8_SPEC if amx else "minilm"  # what an older build, or another machine, gave the index
    assert describe_path(kept).endswith("the index's own kind; --rebuild picks this CPU's")


def test_a_graph_that_cannot_be_quantized_names_itself_and_leaves_nothing_behind(tmp_path: Path) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a graph")
    target = tmp_path / "onnx" / "int8.onnx"
    with pytest.raises(EmbedderError, match="broken.onnx"):
        quantize_int8(broken, target)
    assert list(target.parent.iterdir()) == []


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_int8_minilm_stays_close_to_plain_torch_and_keeps_input_order(tmp_path: Path) -> None:
    texts = [f"def handler_{i}(request):\n    return parse_{i % 3}(request.body)\n" * (1 + i % 4) for i in range(13)]
    texts += ["class Config:\n    '''Settings read from a TOML file.'''", "async def fetch(url): ..."]
    torch_vectors = load_embedder("minilm-torch").encode(texts)
    int8 = load_embedder(INT8_SPEC, cache_dir=tmp_path)
    vectors = int8.encode(texts)
    assert vectors.shape == (len(texts), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    cosines = (vectors * torch_vectors).sum(axis=1)
    assert cosines.min() > 0.97, cosines
    one_by_one = np.stack([int8.encode([t])[0] for t in texts])
    assert np.allclose(vectors, one_by_one, atol=1e-5)  # batching and streams change nothing, order included
    query = int8.encode_query("parse the settings file")
    assert int(np.argmax(vectors @ query)) == len(texts) - 2
