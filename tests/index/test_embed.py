from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from index.embed import (
    EmbeddingCache,
    HashEmbedder,
    bundled_minilm_path,
    embed_with_cache,
    load_embedder,
)
from index.errors import CorruptIndex, EmbedderError

_ROOT = Path(__file__).resolve().parents[2]


class CountingEmbedder:
    """Wraps the hash embedder and records every text it was asked to encode."""

    def __init__(self) -> None:
        self.inner = HashEmbedder(16)
        self.id = "counting:16"
        self.dim = 16
        self.seen: list[str] = []
        self.calls = 0

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        self.calls += 1
        self.seen.extend(texts)
        return self.inner.encode(texts)

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


def _items(n: int) -> list[tuple[str, str]]:
    return [(f"h{i}", f"def function_{i}(value): return value * {i}") for i in range(n)]


def test_hash_embedder_gives_the_same_unit_vectors_every_time() -> None:
    texts = ["def parse_config(path): ...", "class HttpClient:", "x = 1"]
    first = HashEmbedder().encode(texts)
    second = HashEmbedder().encode(texts)
    assert first.dtype == np.float32 and first.shape == (3, 384)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-6)


def test_hash_embedder_is_stable_across_processes() -> None:
    code = (
        "import json; from index.embed import HashEmbedder; "
        "print(json.dumps(HashEmbedder(8).encode_query('read_file path').tolist()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=_ROOT).stdout
    assert json.loads(out) == HashEmbedder(8).encode_query("read_file path").tolist()


def test_hash_embedder_scores_shared_identifier_parts_higher() -> None:
    emb = HashEmbedder()
    query = emb.encode_query("parse config")
    related, unrelated = emb.encode(["def parseConfig(path): return load(path)", "class Window: pass"])
    assert query @ related > query @ unrelated


def test_hash_embedder_gives_an_all_zero_row_for_text_without_tokens() -> None:
    assert not HashEmbedder().encode_query("  ;; ").any()


def test_import_of_the_module_does_not_import_torch() -> None:
    code = "import sys, index.embed; print('torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=_ROOT).stdout
    assert out.split() == ["False", "False"]


def test_cache_round_trips_float32_vectors(tmp_path: Path) -> None:
    vectors = {"a": np.arange(4, dtype=np.float32), "b": np.ones(4, dtype=np.float32) / 2}
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        cache.put_many("emb", vectors)
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        got = cache.get_many("emb", ["a", "b", "missing"])
        other = cache.get_many("another-embedder", ["a"])
    assert set(got) == {"a", "b"} and other == {}
    for key, vector in vectors.items():
        assert got[key].dtype == np.float32
        np.testing.assert_array_equal(got[key], vector)


def test_cache_looks_up_more_hashes_than_sqlite_allows_in_one_query(tmp_path: Path) -> None:
    many = {f"h{i}": np.full(2, i, dtype=np.float32) for i in range(1500)}
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        cache.put_many("emb", many)
        assert len(cache.get_many("emb", list(many))) == 1500


def test_cache_uses_write_ahead_logging_so_readers_do_not_block_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    writer = EmbeddingCache(path)
    reader = EmbeddingCache(path)
    writer.put_many("emb", {"a": np.zeros(2, np.float32)})
    assert reader.get_many("emb", ["a"]).keys() == {"a"}
    writer.put_many("emb", {"b": np.zeros(2, np.float32)})
    assert reader.get_many("emb", ["a", "b"]).keys() == {"a", "b"}
    writer.close()
    reader.close()
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_unreadable_cache_file_names_itself_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(CorruptIndex, match="cache.sqlite.*delete it"):
        EmbeddingCache(path)


def test_embed_with_cache_encodes_only_the_missing_items(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        first = embed_with_cache(emb, cache, _items(5), batch_size=2)
        assert len(emb.seen) == 5
        emb.seen.clear()
        second = embed_with_cache(emb, cache, _items(8), batch_size=2)
    assert sorted(emb.seen) == sorted(text for _, text in _items(8)[5:])
    assert set(second) == {h for h, _ in _items(8)}
    for key, vector in first.items():
        np.testing.assert_array_equal(second[key], vector)
        np.testing.assert_array_equal(vector, emb.inner.encode_query(dict(_items(5))[key]))


def test_embed_with_cache_encodes_a_repeated_hash_once(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    items = [("same", "text one"), ("same", "text one"), ("other", "text two")]
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        got = embed_with_cache(emb, cache, items)
    assert len(emb.seen) == 2 and set(got) == {"same", "other"}


def test_embed_with_cache_reports_progress_up_to_the_total(tmp_path: Path) -> None:
    reports: list[tuple[int, int]] = []
    with EmbeddingCache(tmp_path / "cache.sqlite") as cache:
        cache.put_many("counting:16", {"h0": np.zeros(16, np.float32)})
        embed_with_cache(
            CountingEmbedder(), cache, _items(5), batch_size=2, on_progress=lambda d, t: reports.append((d, t))
        )
    assert reports == [(1, 5), (3, 5), (5, 5)]


def test_should_stop_ends_early_and_keeps_finished_batches_in_the_cache(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    path = tmp_path / "cache.sqlite"
    with EmbeddingCache(path) as cache:
        got = embed_with_cache(emb, cache, _items(10), batch_size=3, should_stop=lambda: emb.calls >= 2)
    assert emb.calls == 2 and len(got) == 6
    with EmbeddingCache(path) as cache:
        assert cache.get_many(emb.id, [h for h, _ in _items(10)]).keys() == got.keys()


def test_embedder_returning_the_wrong_shape_is_refused(tmp_path: Path) -> None:
    class Broken(CountingEmbedder):
        def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
            return np.zeros((len(texts), 3), np.float32)

    with EmbeddingCache(tmp_path / "cache.sqlite") as cache, pytest.raises(EmbedderError, match="shape"):
        embed_with_cache(Broken(), cache, _items(2))


def test_unknown_spec_is_an_error_that_lists_the_choices() -> None:
    with pytest.raises(EmbedderError, match="unknown embedder 'bert-huge'.*'minilm', 'minilm-int8', 'static', 'hash'"):
        load_embedder("bert-huge")


def test_folder_without_a_sentence_transformers_model_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="not a sentence-transformers model folder"):
        load_embedder(str(tmp_path))


def test_hash_spec_may_name_its_dimension() -> None:
    assert load_embedder("hash:32").dim == 32
    assert load_embedder("hash").id == "hash:384"
    with pytest.raises(EmbedderError, match="hash:384"):
        load_embedder("hash:big")


def test_bundled_minilm_folder_is_a_sentence_transformers_model() -> None:
    folder = bundled_minilm_path()
    assert (folder / "modules.json").is_file() and (folder / "model.safetensors").is_file()


@pytest.mark.slow
def test_bundled_minilm_loads_offline_and_ranks_similar_text_higher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    emb = load_embedder("minilm")
    assert emb.dim == 384 and emb.id.startswith("minilm:all-MiniLM-L6-v2@")
    vectors = emb.encode(["def read_json(path): return json.load(open(path))", "the cat sat on the mat"])
    query = emb.encode_query("load a JSON file")
    assert vectors.dtype == np.float32 and vectors.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert query @ vectors[0] > query @ vectors[1] + 0.1


@pytest.mark.slow
def test_default_minilm_matches_plain_torch_and_answers_queries_without_torch(tmp_path: Path) -> None:
    fast = load_embedder("minilm", cache_dir=tmp_path)
    plain = load_embedder("minilm-torch")
    texts = ["def read_json(path): return json.load(open(path))", "x = 1\n" * 400, "the cat sat on the mat"]
    assert fast.id == plain.id  # same vectors, so the cache and existing indexes stay valid
    assert float((fast.encode(texts) * plain.encode(texts)).sum(axis=1).min()) > 0.999
    for text in texts:
        assert float(fast.encode_query(text) @ plain.encode_query(text)) > 0.9999
    code = (
        "import sys; from pathlib import Path; from index.embed import load_embedder; "
        f"v = load_embedder('minilm', cache_dir=Path({str(tmp_path)!r})).encode_query('load a JSON file'); "
        "print(v.shape[0], 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=_ROOT, timeout=120)
    assert out.stdout.split() == ["384", "False"], out.stderr


def test_bulk_backend_is_openvino_when_installed_and_can_be_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    from index.embed.choice import bulk_backend

    monkeypatch.delenv("BRIDGE_MINILM_BULK", raising=False)
    assert bulk_backend() == "openvino"  # a dependency of the project
    monkeypatch.setenv("BRIDGE_MINILM_BULK", "torch")
    assert bulk_backend() == "torch"
    monkeypatch.setenv("BRIDGE_MINILM_BULK", "cuda")
    with pytest.raises(EmbedderError, match="BRIDGE_MINILM_BULK=cuda is not a backend: use auto, openvino or torch"):
        bulk_backend()


def test_query_backend_is_openvino_when_installed_and_can_be_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    from index.embed.choice import query_backend

    monkeypatch.delenv("BRIDGE_MINILM_QUERY", raising=False)
    assert query_backend() == "openvino"
    monkeypatch.setenv("BRIDGE_MINILM_QUERY", "onnxruntime")
    assert query_backend() == "onnxruntime"
    monkeypatch.setenv("BRIDGE_MINILM_QUERY", "torch")
    with pytest.raises(EmbedderError, match="BRIDGE_MINILM_QUERY=torch is not a backend: use auto, openvino or onnxruntime"):
        query_backend()


@pytest.mark.slow
def test_queries_on_openvino_and_on_onnx_runtime_give_the_same_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BRIDGE_MINILM_QUERY", raising=False)
    fast = load_embedder("minilm", cache_dir=tmp_path)
    fast.query_model()  # type: ignore[attr-defined]  # the backend is chosen when the query side loads
    monkeypatch.setenv("BRIDGE_MINILM_QUERY", "onnxruntime")
    reference = load_embedder("minilm", cache_dir=tmp_path)
    report = "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\n" * 60
    for text in ["load a JSON file", report]:
        assert float(fast.encode_query(text) @ reference.encode_query(text)) > 0.9999
    assert type(fast.query_model()).__name__ == "_OpenVinoQueries"  # type: ignore[attr-defined]
    assert type(reference.query_model()).__name__ == "_OnnxQueries"  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_damaged_openvino_cache_costs_a_compile_and_nothing_else(tmp_path: Path) -> None:
    first = load_embedder("minilm", cache_dir=tmp_path)
    expected = first.encode_query("load a JSON file")
    blobs = list((tmp_path / "onnx" / "openvino-cache").glob("*.blob"))
    assert blobs  # the compiled query model was kept for the next process
    for blob in blobs:
        blob.chmod(0o600)  # OpenVINO leaves its blobs read-only
        blob.write_bytes(b"not a compiled model" * 100)
    again = load_embedder("minilm", cache_dir=tmp_path)
    assert float(again.encode_query("load a JSON file") @ expected) > 0.9999
    shutil.rmtree(tmp_path / "onnx" / "openvino-cache")
    (tmp_path / "onnx" / "openvino-cache").write_text("a file where the cache folder should be")
    blocked = load_embedder("minilm", cache_dir=tmp_path)
    assert float(blocked.encode_query("load a JSON file") @ expected) > 0.9999


def test_a_precision_that_is_not_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from index.embed.choice import bf16_is_fast

    monkeypatch.setenv("BRIDGE_MINILM_PRECISION", "fp32")
    assert bf16_is_fast("openvino") is False
    monkeypatch.setenv("BRIDGE_MINILM_PRECISION", "int4")
    with pytest.raises(EmbedderError, match="BRIDGE_MINILM_PRECISION=int4 is not a precision"):
        bf16_is_fast()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_bulk_encoding_runs_on_openvino_in_input_order_and_without_torch_once_exported(tmp_path: Path) -> None:
    from index.embed.bulk import bulk_onnx_path

    fast = load_embedder("minilm", cache_dir=tmp_path)
    # Lengths from one word to past the 256-piece cut, more texts than one request holds.
    texts = [f"def f{i}(x):\n" + "    y = x + 1\n" * (i * 7) + "    return y" for i in range(24)]
    vectors = fast.encode(texts)
    assert fast.backend == "openvino"  # type: ignore[attr-defined]
    assert vectors.shape == (24, 384) and vectors.dtype == np.float32
    one_by_one = np.stack([fast.encode([t])[0] for t in (texts[0], texts[11], texts[23])])
    assert float((one_by_one * vectors[[0, 11, 23]]).sum(axis=1).min()) > 0.9999
    graph = bulk_onnx_path(tmp_path, fast.fingerprint)  # type: ignore[attr-defined]
    # Exported once, no scratch file left; the compiled model is cached beside the graph.
    assert sorted(p.name for p in graph.parent.iterdir()) == sorted([graph.name, "openvino-cache"])
    code = (
        "import sys; import numpy as np; from pathlib import Path; from index.embed import load_embedder; "
        f"v = load_embedder('minilm', cache_dir=Path({str(tmp_path)!r})).encode({texts[:3]!r}); "
        f"np.save({str(tmp_path / 'fresh.npy')!r}, v); "
        "print('torch' in sys.modules, 'openvino' in sys.modules, 'openvino_telemetry.main' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=_ROOT, timeout=300)
    # No torch once the graph exists, and OpenVINO loaded without its usage telemetry.
    assert out.stdout.split() == ["False", "True", "False"], out.stderr
    assert float((np.load(tmp_path / "fresh.npy") * vectors[:3]).sum(axis=1).min()) > 0.9999


@pytest.mark.slow
def test_minilm_forced_onto_torch_makes_the_same_vectors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRIDGE_MINILM_BULK", "torch")
    on_torch = load_embedder("minilm", cache_dir=tmp_path)
    texts = ["def read_json(path): return json.load(open(path))", "the cat sat on the mat"]
    plain = load_embedder("minilm-torch").encode(texts)
    assert float((on_torch.encode(texts) * plain).sum(axis=1).min()) > 0.999
    assert on_torch.backend == "torch" and not (tmp_path / "onnx").exists()  # type: ignore[attr-defined]


@pytest.mark.slow
def test_any_sentence_transformers_folder_loads_by_path() -> None:
    emb = load_embedder(str(bundled_minilm_path()))
    assert emb.dim == 384 and emb.id.startswith("st:model@")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_static_backend_is_distilled_once_offline_and_then_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    emb = load_embedder("static", cache_dir=tmp_path)
    folder = tmp_path / "static-minilm"
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    again = load_embedder("static", cache_dir=tmp_path)
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    assert emb.dim == again.dim == 256 and emb.id == again.id
    vectors = emb.encode(["def read_json(path): return json.load(open(path))", "the cat sat on the mat"])
    assert vectors.dtype == np.float32 and vectors.shape == (2, 256)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    query = emb.encode_query("read json file")
    assert query @ vectors[0] > query @ vectors[1]
    assert [p.name for p in tmp_path.iterdir()] == ["static-minilm"]  # no scratch folder left


def test_distilling_draws_no_progress_bar_even_when_tqdm_was_imported_first() -> None:
    import tqdm  # noqa: F401 - imported first, as transformers does, so TQDM_DISABLE comes too late

    from index.embed.quiet import quiet

    inference = pytest.importorskip("model2vec.distill.inference")
    with quiet():
        assert inference.tqdm(total=1).disable is True
