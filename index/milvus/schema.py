"""The two collections of one build: chunks (with BM25 over our terms, and dense vectors) and files."""

from __future__ import annotations

from typing import Any

import numpy as np

from index.milvus.client import encode_terms
from index.types import Chunk

__all__ = ["CHUNK_FIELDS", "FILE_FIELDS", "chunk_row", "chunk_schema", "file_schema"]

_PART_CHARS = 16000
_MAX_PARTS = 512  # 8 M characters: more than the largest file the selection admits
CHUNK_FIELDS = ["id", "path", "start_line", "end_line", "language", "symbol", "text", "hash", "tokens"]
FILE_FIELDS = ["id", "path", "sha", "size", "mtime_ns", "first_chunk", "n_chunks"]


def chunk_schema(client: Any, dim: int | None) -> dict[str, Any]:
    from pymilvus import DataType, Function, FunctionType

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("path", DataType.VARCHAR, max_length=4096)
    schema.add_field("start_line", DataType.INT64)
    schema.add_field("end_line", DataType.INT64)
    schema.add_field("language", DataType.VARCHAR, max_length=64)
    schema.add_field("symbol", DataType.VARCHAR, max_length=4096)
    # A VARCHAR holds at most 65,535 bytes and one chunk of a minified file can be longer: the text
    # is stored in parts of at most _PART_CHARS characters (4 bytes each at most).
    schema.add_field("text", DataType.ARRAY, element_type=DataType.VARCHAR, max_length=65535, max_capacity=_MAX_PARTS)
    schema.add_field("hash", DataType.VARCHAR, max_length=64)
    schema.add_field("tokens", DataType.INT64)
    schema.add_field(
        "terms", DataType.VARCHAR, max_length=65535, enable_analyzer=True, analyzer_params={"tokenizer": "standard"}
    )
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(
        Function(
            name="bm25", function_type=FunctionType.BM25, input_field_names=["terms"], output_field_names=["sparse"]
        )
    )
    index = client.prepare_index_params()
    index.add_index(
        "sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25", params={"bm25_k1": 1.2, "bm25_b": 0.75}
    )
    if dim is not None:
        schema.add_field("dense", DataType.FLOAT_VECTOR, dim=dim)
        index.add_index("dense", index_type="FLAT", metric_type="COSINE")  # exact, as faiss's flat index
    return {"schema": schema, "index_params": index}


def file_schema(client: Any) -> dict[str, Any]:
    from pymilvus import DataType

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("path", DataType.VARCHAR, max_length=4096)
    schema.add_field("sha", DataType.VARCHAR, max_length=64)
    schema.add_field("size", DataType.INT64)
    schema.add_field("mtime_ns", DataType.INT64)
    schema.add_field("first_chunk", DataType.INT64)
    schema.add_field("n_chunks", DataType.INT64)
    schema.add_field("meta", DataType.VARCHAR, max_length=65535)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)  # Milvus wants a vector field in every collection
    index = client.prepare_index_params()
    index.add_index("v", index_type="FLAT", metric_type="L2")
    return {"schema": schema, "index_params": index}


def chunk_row(i: int, c: Chunk, words: list[str], vector: np.ndarray | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": i,
        "path": c.path,
        "start_line": c.start_line,
        "end_line": c.end_line,
        "language": c.language or "",
        "symbol": c.symbol or "",
        "text": [c.text[i : i + _PART_CHARS] for i in range(0, len(c.text), _PART_CHARS)] or [""],
        "hash": c.hash,
        "tokens": c.tokens,
        "terms": encode_terms(words),
    }
    if vector is not None:
        row["dense"] = vector.astype(np.float32).tolist()
    return row
