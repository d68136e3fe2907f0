"""Model inputs for the exported MiniLM graphs: the model's own tokenizer and padded id batches.
Shared by the query side (index/embed/minilm.py) and the bulk side (index/embed/bulk.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MAX_TOKENS", "load_tokenizer", "padded_feed"]

MAX_TOKENS = 256  # the model's own max_seq_length: shorter inputs measured worse recall


def load_tokenizer(tokenizer_file: Path) -> Any:
    """The model's word-piece tokenizer, cut at MAX_TOKENS like sentence-transformers, unpadded."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.no_padding()
    return tokenizer


def padded_feed(encodings: Sequence[Any]) -> dict[str, np.ndarray]:
    """Model inputs for tokenizer encodings: ids padded with zeros to the longest, a mask over the real ones."""
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, enc in enumerate(encodings):
        ids[row, : len(enc.ids)] = enc.ids
        mask[row, : len(enc.ids)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
