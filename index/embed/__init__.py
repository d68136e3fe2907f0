"""Dense embedders and the persistent embedding cache.

    backends   the Embedder protocol; MiniLM (bundled), static (model2vec, distilled from it), hash (tests)
    minilm     the default MiniLM: ONNX query side, bulk encoding through bulk (OpenVINO bf16) or torch;
               `resolve_spec` picks its int8 variant (int8: ONNX Runtime) where the CPU has no AMX
    feed       tokenizing and padding shared by the query and the bulk sides
    cache      vectors by (embedder id, content hash) in SQLite, kept across generations
    quiet      silences the model libraries' progress bars and warnings

Importing this package stays cheap: torch, sentence_transformers, model2vec and openvino are
imported inside the backends only.
"""

from index.embed.backends import (
    Embedder,
    HashEmbedder,
    SentenceTransformerEmbedder,
    StaticEmbedder,
    bundled_minilm_path,
    load_embedder,
)
from index.embed.cache import EmbeddingCache, embed_with_cache
from index.embed.choice import INT8_SPEC, describe_path, resolve_spec

__all__ = [
    "Embedder",
    "EmbeddingCache",
    "HashEmbedder",
    "INT8_SPEC",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
    "bundled_minilm_path",
    "describe_path",
    "embed_with_cache",
    "load_embedder",
    "resolve_spec",
]
