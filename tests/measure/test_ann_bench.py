"""bench/ann_bench.py: the product's IVF and its float32 reference are built alike and scored alike."""

from __future__ import annotations

import numpy as np
import pytest

import index.vector as vector
from bench.ann_bench import _build, _bytes, recall


def test_the_product_ivf_and_its_float32_reference_share_their_lists_and_the_product_takes_half_the_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import faiss

    monkeypatch.setattr(vector, "ANN_THRESHOLD", 1_000)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5_000, 64)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    product, _ = _build("ivf:8", x)
    reference, _ = _build("ivfflat:8", x)
    lists = [faiss.downcast_index(i.index) for i in (product, reference)]
    assert lists[0].nlist == lists[1].nlist and lists[0].nprobe == lists[1].nprobe == 8
    assert _bytes(product) < 0.6 * _bytes(reference)


def test_recall_counts_a_found_duplicate_of_a_nearest_vector_as_found() -> None:
    exact = np.array([0.9, 0.8, 0.7])
    assert recall(np.array([0.9, 0.8, 0.8]), exact, 3) == 1.0  # a copy of the 0.8 vector stands for 0.7's
    assert recall(np.array([0.9, 0.6, 0.5]), exact, 3) == pytest.approx(1 / 3)
