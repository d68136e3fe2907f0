"""The vector index (index/store/vector.py): exact when small, IVF when large, and what each returns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import index.store.vector as vector
from index.store.vector import VectorIndex, ivf_lists


def clustered(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((40, dim))
    x = centers[rng.integers(0, 40, n)] + 0.6 * rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def exact(x: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[int]:
    scores = x @ q
    keep = np.ones(len(ids), dtype=bool) if allowed is None else allowed[ids]
    order = np.flatnonzero(keep)[np.argsort(-scores[keep], kind="stable")]
    return ids[order[:k]].tolist()


def test_a_small_index_is_exact_and_returns_chunk_ids_with_cosines() -> None:
    x, ids = clustered(500), np.arange(500, dtype=np.int64) * 2
    index = VectorIndex.build(ids, x)
    found = index.top(x[7], 20)
    assert index.exact and [i for i, _ in found] == exact(x, ids, x[7], 20)
    assert found[0] == (14, pytest.approx(1.0, abs=1e-5))


def test_a_small_index_keeps_float16_vectors_in_about_half_the_bytes_and_finds_what_exact_search_finds(
    tmp_path: Path,
) -> None:
    import faiss

    x, ids = clustered(2_000, dim=64, seed=3), np.arange(2_000, dtype=np.int64)
    VectorIndex.build(ids, x).save(tmp_path / "half.faiss")
    full = faiss.IndexIDMap2(faiss.IndexFlatIP(64))
    full.add_with_ids(x, ids)
    faiss.write_index(full, str(tmp_path / "full.faiss"))
    assert (tmp_path / "half.faiss").stat().st_size < 0.6 * (tmp_path / "full.faiss").stat().st_size
    index = VectorIndex.load(tmp_path / "half.faiss")
    for q in x[:10]:
        found = index.top(q, 50)
        assert {i for i, _ in found} <= set(exact(x, ids, q, 55))  # only near-ties move, by a place or two
        np.testing.assert_allclose([c for _, c in found], x[[i for i, _ in found]] @ q, atol=1e-3)


def test_a_float32_flat_file_from_earlier_versions_is_still_searched_exactly(tmp_path: Path) -> None:
    import faiss

    x, ids = clustered(800, seed=4), np.arange(800, dtype=np.int64) + 10
    old = faiss.IndexIDMap2(faiss.IndexFlatIP(x.shape[1]))
    old.add_with_ids(x, ids)
    faiss.write_index(old, str(tmp_path / "v.faiss"))
    loaded = VectorIndex.load(tmp_path / "v.faiss")
    assert loaded.exact and [i for i, _ in loaded.top(x[2], 30)] == exact(x, ids, x[2], 30)


def test_a_large_index_is_ivf_finds_nearly_all_the_exact_nearest_and_survives_a_reload(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(vector, "ANN_THRESHOLD", 1_000)
    x, ids = clustered(6_000), np.arange(6_000, dtype=np.int64)
    VectorIndex.build(ids, x).save(tmp_path / "v.faiss")
    index = VectorIndex.load(tmp_path / "v.faiss")
    assert not index.exact and index.count == 6_000
    recall = []
    for q in x[:20]:
        found = {i for i, _ in index.top(q, 100)}
        recall.append(len(found & set(exact(x, ids, q, 100))) / 100)
    assert np.mean(recall) >= 0.95


def test_a_large_index_keeps_float16_vectors_in_its_lists_in_about_half_the_bytes_of_float32(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import faiss

    monkeypatch.setattr(vector, "ANN_THRESHOLD", 1_000)
    x, ids = clustered(6_000, dim=64, seed=5), np.arange(6_000, dtype=np.int64)
    VectorIndex.build(ids, x).save(tmp_path / "half.faiss")
    full = faiss.IndexIVFFlat(faiss.IndexFlatIP(64), 64, ivf_lists(6_000), faiss.METRIC_INNER_PRODUCT)
    full.train(x)
    wrapped = faiss.IndexIDMap2(full)
    wrapped.add_with_ids(x, ids)
    faiss.write_index(wrapped, str(tmp_path / "full.faiss"))
    assert (tmp_path / "half.faiss").stat().st_size < 0.6 * (tmp_path / "full.faiss").stat().st_size
    found = VectorIndex.load(tmp_path / "half.faiss").top(x[9], 20)
    np.testing.assert_allclose([c for _, c in found], x[[i for i, _ in found]] @ x[9], atol=1e-3)


def test_a_float32_ivf_file_from_earlier_versions_is_still_searched(tmp_path: Path) -> None:
    import faiss

    x, ids = clustered(6_000, seed=6), np.arange(6_000, dtype=np.int64) + 7
    old = faiss.IndexIVFFlat(faiss.IndexFlatIP(x.shape[1]), x.shape[1], 64, faiss.METRIC_INNER_PRODUCT)
    old.train(x)
    old.nprobe = 64  # every list: the answer is then exact
    index = faiss.IndexIDMap2(old)
    index.add_with_ids(x, ids)
    faiss.write_index(index, str(tmp_path / "v.faiss"))
    loaded = VectorIndex.load(tmp_path / "v.faiss")
    assert not loaded.exact and [i for i, _ in loaded.top(x[4], 30)] == exact(x, ids, x[4], 30)


def test_a_narrow_filter_on_an_ivf_index_probes_more_lists_and_keeps_only_allowed_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vector, "ANN_THRESHOLD", 1_000)
    x, ids = clustered(6_000, seed=1), np.arange(6_000, dtype=np.int64)
    index = VectorIndex.build(ids, x, nprobe=1)
    allowed = np.zeros(6_000, dtype=bool)
    allowed[::300] = True  # 20 chunks scattered over every list
    found = index.top(x[5], 10, allowed)
    assert [i for i, _ in found] == exact(x, ids, x[5], 10, allowed)


@pytest.mark.parametrize(("n", "lists"), [(100_001, 512), (1_150_000, 2048), (4_000_000, 4096)])
def test_ivf_lists_grow_with_the_square_root_of_the_vectors(n: int, lists: int) -> None:
    assert ivf_lists(n) == lists


def test_an_hnsw_file_from_earlier_versions_is_searched_deep_enough_for_k(tmp_path: Path) -> None:
    import faiss

    x, ids = clustered(3_000, seed=2), np.arange(3_000, dtype=np.int64)
    hnsw = faiss.IndexHNSWFlat(x.shape[1], 16, faiss.METRIC_INNER_PRODUCT)  # efSearch stays 16
    index = faiss.IndexIDMap2(hnsw)
    index.add_with_ids(x, ids)
    faiss.write_index(index, str(tmp_path / "v.faiss"))
    loaded = VectorIndex.load(tmp_path / "v.faiss")
    assert not loaded.exact
    found = {i for i, _ in loaded.top(x[3], 300)}
    assert len(found & set(exact(x, ids, x[3], 300))) >= 0.95 * 300
    allowed = np.zeros(3_000, dtype=bool)
    allowed[:1500] = True
    assert all(i < 1500 for i, _ in loaded.top(x[3], 50, allowed))
