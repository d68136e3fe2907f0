"""Token counting: the model's own tokenizer when one is loaded, else a documented conservative estimate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

# The one shared estimate: index/tokenize.py counts what the index packs with the same rule, so a
# budget here and a packed hit there never disagree.
from index.tokenize import estimate_tokens

__all__ = [
    "EstimateCounter",
    "LlamaTokenCounter",
    "TokenCounter",
    "estimate_tokens",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text as it will appear inside a rendered prompt."""

    @property
    def exact(self) -> bool: ...

    def count(self, text: str) -> int: ...


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
