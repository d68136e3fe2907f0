"""One exception tree for the bridge package; every message names the object and the next step."""

from __future__ import annotations

__all__ = [
    "BridgeError",
    "BudgetError",
    "ChatError",
    "CompareError",
    "ConfigError",
    "ContextContractError",
    "GenerationError",
    "MissingExtra",
    "ModelError",
    "PrefillError",
    "PromptError",
    "QuestionsError",
    "RuntimeUnavailable",
    "ServeError",
    "ToolInputError",
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


class ChatError(BridgeError):
    """A turn cannot run: an empty question, or an MCP server that is unreachable or refused the search."""


class CompareError(BridgeError):
    """The comparison cannot be computed: nothing to count, too few prefill sizes, or a bad size."""


class ConfigError(BridgeError):
    """A setting (option or BRIDGE_* variable) has a value that cannot be used."""


class QuestionsError(BridgeError):
    """A questions file is missing or one of its lines is not a valid question."""


class PrefillError(BridgeError):
    """Prefill timings cannot be fitted: too few sizes, or times that are not positive."""


class ServeError(BridgeError):
    """The server cannot start as configured (no repository, unsafe bind, missing token, busy port)."""


class ToolInputError(BridgeError):
    """A tool was called with an argument out of range or naming an unknown repository."""


class MissingExtra(RuntimeUnavailable):
    """A command needs a part of the install that is not there; the message names the extra that adds it."""

    def __init__(self, what: str, extra: str, alternative: str = "") -> None:
        self.extra = extra
        tail = f", {alternative}" if alternative else ""
        super().__init__(f"{what} needs the {extra} extra: pip install 'mcp-retrieval-bridge[{extra}]'{tail}")

