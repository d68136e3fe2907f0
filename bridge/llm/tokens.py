"""Token counting: the model's own tokenizer when one is loaded, else a documented conservative estimate."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "EstimateCounter",
    "LlamaTokenCounter",
    "TokenCounter",
    "estimate_tokens",
    "fallback_estimate",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text as it will appear inside a rendered prompt."""

    @property
    def exact(self) -> bool: ...

    def count(self, text: str) -> int: ...


def fallback_estimate(text: str) -> int:
    """ceil(chars / 3) plus 10%.

    Llama-family BPE vocabularies average 3.5-4.5 characters per token on English and code;
    dividing by 3 and adding 10% over-counts, which is the safe direction for a budget.
    """
    return math.ceil(len(text) / 3 * 1.1)


def _index_estimator() -> Callable[[str], int] | None:
    # index.tokenize owns the shared estimate; it may not exist in a partial checkout.
    try:
        module = importlib.import_module("index.tokenize")
    except ImportError:
        return None
    estimator = getattr(module, "estimate_tokens", None)
    return estimator if callable(estimator) else None


def estimate_tokens(text: str) -> int:
    """index.tokenize.estimate_tokens when available, else `fallback_estimate`."""
    estimator = _index_estimator()
    return estimator(text) if estimator is not None else fallback_estimate(text)


@dataclass(frozen=True, slots=True)
class EstimateCounter:
    """Used when no tokenizer is reachable (e.g. a server without /tokenize)."""

    @property
    def exact(self) -> bool:
        return False

    def count(self, text: str) -> int:
        return estimate_tokens(text)


class LlamaTokenCounter:
    """Counts with a llama_cpp.Llama (a loaded model or a vocab_only one).

    Special tokens are parsed (special=True) and no BOS is added, exactly as llama-cpp-python
    tokenizes a prompt rendered from a GGUF chat template.
    """

    def __init__(self, llama: Any) -> None:
        self._llama = llama

    @property
    def exact(self) -> bool:
        return True

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))
