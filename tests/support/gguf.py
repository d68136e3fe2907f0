"""A GGUF writer for tests: any architecture, context and RoPE facts, no weights."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np


def write_gguf(
    path: Path,
    *,
    layers: int = 4,
    heads: int = 8,
    kv_heads: int | list[int] | None = 2,
    embedding: int = 256,
    key_length: int | None = None,
    context: int = 4096,
    scaling: tuple[str, float, int] | None = None,
    tensor_values: int = 1024,
) -> Path:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny test model")
    writer.add_block_count(layers)
    writer.add_context_length(context)
    writer.add_embedding_length(embedding)
    writer.add_head_count(heads)
    if kv_heads is not None:
        writer.add_head_count_kv(kv_heads)
    if key_length is not None:
        writer.add_key_length(key_length)
    writer.add_rope_freq_base(10_000.0)
    if scaling is not None:
        kind, factor, original = scaling
        writer.add_rope_scaling_type(gguf.RopeScalingType(kind))
        writer.add_rope_scaling_factor(factor)
        writer.add_rope_scaling_orig_ctx_len(original)
    if tensor_values:
        writer.add_tensor("token_embd.weight", np.arange(tensor_values, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
