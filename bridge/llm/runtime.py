"""The runtime protocol every model backend implements, and the value types it speaks.

Backends: `bridge.llm.llama` (llama.cpp in process) and `bridge.llm.openai` (an OpenAI-compatible
server). Nothing here imports llama_cpp or httpx.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from bridge.errors import BudgetError

__all__ = [
    "CHATML_TEMPLATE",
    "GREEDY",
    "Decoding",
    "Generation",
    "GpuLayers",
    "Message",
    "OnToken",
    "Role",
    "Runtime",
    "RuntimeInfo",
    "StopWhen",
    "TemplateOverhead",
    "check_fits",
    "citation_grammar",
    "decoding_for",
    "filler_text",
    "measure_overhead",
    "resolve_gpu_layers",
    "tokens_per_s",
]

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class TemplateOverhead:
    """Tokens a chat template adds around content, with a margin already included.

    per_message: role header and end marker of one message; fixed: BOS, default preamble and
    the generation prompt; per_join: a margin for each snippet concatenated into the user
    message, because BPE may tokenize a seam differently from the two parts alone.
    """

    per_message: int = 8
    fixed: int = 16
    per_join: int = 1


GpuLayers = int | Literal["auto"]
OnToken = Callable[[str], None]
# Given each decoded piece; True ends the generation there (finish_reason "stopped").
StopWhen = Callable[[str], bool]


@dataclass(frozen=True, slots=True)
class Decoding:
    """Sampling settings. temperature 0 is greedy (the other samplers then change nothing).

    repeat_penalty is llama.cpp's (1.0 = off); frequency/presence penalties are OpenAI's (0 = off).
    An OpenAI-compatible server gets temperature, top_p, the two OpenAI penalties and seed.
    """

    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: int = 0
    # False: no two backticks in a row, so the model cannot open a ``` code block (llama.cpp in process
    # only). A grounded small model's code blocks are its inventions (bridge/chat/grounding.py).
    fences: bool = True


GREEDY = Decoding()
# Chosen by measurement (bench/decode_bench.py, bench/DECISIONS.md).
# SmolLM2-135M on 11 stdlib questions: greedy looped on 6 of 6; temperature 0.3 with min_p 0.1 and
# repeat_penalty 1.1 never looped and cited most often. Larger models are left greedy (not measured here).
SMALL_MODEL = Decoding(temperature=0.3, top_p=1.0, min_p=0.1, repeat_penalty=1.1)
_SMALL_MARKERS = ("smollm", "135m", "360m", "0.5b", "500m")


def citation_grammar(citations: Sequence[str], most: int = 3) -> str:
    """GBNF: one to `most` of the given citations, comma-separated, nothing else."""
    choice = " | ".join('"' + c.replace("\\", "\\\\").replace('"', '\\"') + '"' for c in citations)
    return f'root ::= cite (", " cite){{0,{most - 1}}}\ncite ::= {choice}\n'


def decoding_for(model: str) -> Decoding:
    """Decoding for a model by its file or server name: the small-model settings for tiny families."""
    name = model.lower()
    return SMALL_MODEL if any(marker in name for marker in _SMALL_MARKERS) else GREEDY

# Used only when a GGUF carries no tokenizer.chat_template; reported in RuntimeInfo.notes.
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True, slots=True)
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int  # prompt tokens reused from the KV cache, not prefilled again
    prefill_ms: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    total_ms: float
    finish_reason: str  # "stop" (end of generation), "length" (hit max_tokens) or "stopped" (stop_when said so)


@dataclass(frozen=True, slots=True)
class RuntimeInfo:
    kind: str  # "llama.cpp" | "openai-compatible"
    model: str  # GGUF path or server model name
    n_ctx: int
    trained_context: int | None
    gpu_layers: int | None
    cache_type: str | None
    flash_attn: bool | None
    exact_tokens: bool
    notes: tuple[str, ...]  # choices made on the user's behalf, worth reporting


class Runtime(Protocol):
    @property
    def info(self) -> RuntimeInfo: ...

    def count_tokens(self, text: str) -> int: ...

    def count_messages(self, messages: Sequence[Message]) -> int: ...

    def template_overhead(self) -> TemplateOverhead: ...

    def generate(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        decoding: Decoding = GREEDY,
        on_token: OnToken | None = None,
        stop_when: StopWhen | None = None,
        prefix: str = "",
    ) -> Generation:
        """The assistant's reply; with `prefix`, the reply already begins with it and the returned text is
        what follows (only a backend whose `lead` picks anything is given one)."""
        ...

    def lead(self, messages: Sequence[Message], names: Sequence[str]) -> str | None:
        """The model's choice of one of `names` to open its reply with (after a backtick), constrained by a
        grammar to those exact strings; None when this backend cannot constrain generation."""
        ...

    def cite(self, messages: Sequence[Message], answer: str, citations: Sequence[str]) -> str | None:
        """The model's own choice among `citations` for a "Sources: " line after `answer`, constrained by a
        grammar to those exact strings; None when this backend cannot constrain generation."""
        ...

    def measure_prefill(self, n_tokens: int) -> float: ...

    def close(self) -> None: ...


def measure_overhead(
    count_messages: Callable[[Sequence[Message]], int], count: Callable[[str], int]
) -> TemplateOverhead:
    """Tokens a chat template adds, from rendering two and four messages, plus a margin."""
    two = [Message("system", "You answer questions."), Message("user", "What does main do?")]
    four = [*two, Message("assistant", "It starts the server."), Message("user", "And then?")]
    content_two = sum(count(m.content) for m in two)
    content_four = sum(count(m.content) for m in four)
    per_message = math.ceil((count_messages(four) - content_four - count_messages(two) + content_two) / 2)
    fixed = count_messages(two) - content_two - 2 * per_message
    # The margin absorbs BPE merging differently at the seam of a role header and its content.
    return TemplateOverhead(per_message=max(per_message, 0) + 2, fixed=max(fixed, 0) + 4, per_join=1)


def resolve_gpu_layers(gpu_layers: GpuLayers, layers: int, supported: bool) -> tuple[int, int, str]:
    """(n_gpu_layers for llama.cpp, layers actually offloaded, a note for the user)."""
    if gpu_layers == "auto":
        if supported:
            return -1, layers, f"gpu_layers auto: all {layers} layers offloaded (this llama.cpp build supports GPU)"
        return 0, 0, "gpu_layers auto: 0 layers offloaded (this llama.cpp build has no GPU support)"
    if gpu_layers == 0:
        return 0, 0, "gpu_layers 0: running on CPU"
    if not supported:
        return 0, 0, f"gpu_layers {gpu_layers} requested but this llama.cpp build has no GPU support: running on CPU"
    offloaded = layers if gpu_layers < 0 else min(gpu_layers, layers)
    n_gpu = -1 if gpu_layers < 0 else gpu_layers
    return n_gpu, offloaded, f"gpu_layers {gpu_layers}: {offloaded} of {layers} layers offloaded"


def filler_text(lines: int) -> str:
    """Deterministic code-like text used to build prompts of a chosen length."""
    return "".join(f"def step_{i}(value):\n    return value * {i} + 1\n\n" for i in range(lines))


def check_fits(prompt_tokens: int, max_tokens: int, n_ctx: int) -> None:
    if max_tokens < 1:
        raise BudgetError(f"max_tokens {max_tokens} leaves no room for an answer: pass 1 or more")
    if prompt_tokens + max_tokens > n_ctx:
        raise BudgetError(
            f"prompt of {prompt_tokens} tokens + {max_tokens} answer tokens exceeds n_ctx {n_ctx}: "
            f"plan the prompt with bridge.chat.budget.plan_prompt, lower max_tokens, or raise --n-ctx"
        )


def tokens_per_s(tokens: int, ms: float) -> float:
    return tokens / (ms / 1000) if ms > 0 and tokens > 0 else 0.0
