"""One exception tree for the bridge package; every message names the object and the next step."""

from __future__ import annotations

__all__ = [
    "BridgeError",
    "BudgetError",
    "ContextContractError",
    "GenerationError",
    "ModelError",
    "PromptError",
    "RuntimeUnavailable",
]


class BridgeError(Exception):
    """Base of every error the bridge package raises on purpose."""


class ModelError(BridgeError):
    """A model file is missing, is not GGUF, is truncated, or an unknown preset was named."""


class ContextContractError(BridgeError):
    """The requested context length is beyond what the model was trained (or scaled) for."""


class BudgetError(BridgeError):
    """The fixed parts of a prompt (system, question, answer reserve) cannot fit the context."""


class PromptError(BridgeError):
    """A prompt template is missing from the installed package or does not render."""


class RuntimeUnavailable(BridgeError):
    """The runtime cannot be used: llama-cpp-python missing, server unreachable, model not loadable."""


class GenerationError(BridgeError):
    """The runtime started but a generation request failed."""
