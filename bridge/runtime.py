"""Model runtimes behind one small protocol: llama.cpp in process, or an OpenAI-compatible server.

Only this module imports llama_cpp (lazily). Prompts are rendered with the model's own chat
template and counted with its own tokenizer, and a prompt that would overflow n_ctx raises
BudgetError here, before llama.cpp could raise its generic error.
"""

from __future__ import annotations

import codecs
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from bridge.budget import Message, TemplateOverhead
from bridge.errors import BudgetError, ModelError, RuntimeUnavailable
from bridge.gguf import CACHE_GGML_TYPE, CacheType, ModelFacts, bundled_model_path, choose_n_ctx, read_gguf
from bridge.tokens import LlamaTokenCounter

if TYPE_CHECKING:
    from bridge.remote import OpenAICompatRuntime

__all__ = [
    "CHATML_TEMPLATE",
    "Generation",
    "GpuLayers",
    "LlamaCppRuntime",
    "OnToken",
    "OpenAICompatRuntime",
    "Runtime",
    "RuntimeInfo",
    "check_fits",
    "filler_text",
    "measure_overhead",
    "measure_prefill",
    "resolve_gpu_layers",
    "tokens_per_s",
]

GpuLayers = int | Literal["auto"]
OnToken = Callable[[str], None]

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
    finish_reason: str  # "stop" (end of generation token) or "length" (hit max_tokens)


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
        temperature: float = 0.0,
        on_token: OnToken | None = None,
    ) -> Generation: ...

    def measure_prefill(self, n_tokens: int) -> float: ...

    def close(self) -> None: ...


def measure_prefill(runtime: Runtime, n_tokens: int) -> float:
    """Milliseconds to prefill a prompt of n_tokens, with an empty KV cache (no prefix reuse)."""
    return runtime.measure_prefill(n_tokens)


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
            f"plan the prompt with bridge.budget.plan_prompt, lower max_tokens, or raise --n-ctx"
        )


def tokens_per_s(tokens: int, ms: float) -> float:
    return tokens / (ms / 1000) if ms > 0 and tokens > 0 else 0.0


class LlamaCppRuntime:
    """llama-cpp-python in process; any GGUF by path, the bundled SmolLM2 by default."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int | None = None,
        gpu_layers: GpuLayers = "auto",
        cache_type: CacheType = "f16",
        kv_budget_bytes: int | None = None,
        flash_attn: bool | None = None,
        n_threads: int | None = None,
        facts: ModelFacts | None = None,
    ) -> None:
        path = Path(model_path) if model_path is not None else bundled_model_path()
        # Reading the metadata first turns a bad file into a one-line ModelError, not a llama.cpp crash.
        self.facts = facts if facts is not None else read_gguf(path)
        if cache_type not in CACHE_GGML_TYPE:
            raise ModelError(f"unknown KV cache type {cache_type!r}: use one of {', '.join(CACHE_GGML_TYPE)}")
        self.n_ctx = choose_n_ctx(self.facts, n_ctx, kv_budget_bytes, cache_type)
        try:
            import llama_cpp
        except ImportError as exc:
            raise RuntimeUnavailable(
                "llama-cpp-python is not installed: pip install llama-cpp-python, or pass --llm-url URL"
            ) from exc
        supported = llama_cpp.llama_supports_gpu_offload()
        n_gpu, offloaded, gpu_note = resolve_gpu_layers(gpu_layers, self.facts.layers, supported)
        notes = [gpu_note]
        if flash_attn is None:
            flash_attn = cache_type != "f16"
            if flash_attn:
                notes.append(f"flash attention turned on: llama.cpp needs it for a {cache_type} V cache")
        elif not flash_attn and cache_type != "f16":
            raise ModelError(
                f"a {cache_type} V cache needs flash attention in llama.cpp: drop flash_attn=False or use f16"
            )
        ggml_type = CACHE_GGML_TYPE[cache_type]
        try:
            self._llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self.n_ctx,
                n_gpu_layers=n_gpu,
                type_k=ggml_type,
                type_v=ggml_type,
                flash_attn=flash_attn,
                n_threads=n_threads,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise RuntimeUnavailable(
                f"llama.cpp could not load {path} with n_ctx {self.n_ctx} and {cache_type} cache ({exc}): "
                f"try a smaller --n-ctx or --cache-type f16"
            ) from exc
        model = self._llama.model
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self._is_eog = llama_cpp.llama_vocab_is_eog
        # A recurrent state cannot be cut back to a prefix, so such models always prefill in full.
        self._reusable = not (llama_cpp.llama_model_is_recurrent(model) or llama_cpp.llama_model_is_hybrid(model))
        template = self._llama.metadata.get("tokenizer.chat_template")
        if not template:
            template = CHATML_TEMPLATE
            notes.append("the GGUF has no chat template: using ChatML")
        self._formatter = self._make_formatter(template)
        self._counter = LlamaTokenCounter(self._llama)
        self._overhead: TemplateOverhead | None = None
        self._info = RuntimeInfo(
            kind="llama.cpp",
            model=str(path),
            n_ctx=self.n_ctx,
            trained_context=self.facts.trained_context,
            gpu_layers=offloaded,
            cache_type=cache_type,
            flash_attn=flash_attn,
            exact_tokens=True,
            notes=tuple(notes),
        )

    def _make_formatter(self, template: str) -> Any:
        import llama_cpp
        from llama_cpp import llama_chat_format

        def text(token: int) -> str:
            return "" if token == -1 else llama_cpp.llama_vocab_get_text(self._vocab, token).decode("utf-8", "replace")

        return llama_chat_format.Jinja2ChatFormatter(
            template=template, eos_token=text(self._llama.token_eos()), bos_token=text(self._llama.token_bos())
        )

    @property
    def info(self) -> RuntimeInfo:
        return self._info

    def count_tokens(self, text: str) -> int:
        return self._counter.count(text)

    def _tokens(self, messages: Sequence[Message]) -> list[int]:
        prompt = self._formatter(messages=[{"role": m.role, "content": m.content} for m in messages]).prompt
        # As llama-cpp-python does for GGUF templates: the template itself writes any BOS.
        return self._llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)

    def count_messages(self, messages: Sequence[Message]) -> int:
        return len(self._tokens(messages))

    def template_overhead(self) -> TemplateOverhead:
        if self._overhead is None:
            self._overhead = measure_overhead(self.count_messages, self.count_tokens)
        return self._overhead

    def _reuse_prefix(self, tokens: list[int]) -> int:
        """Keep the KV cache for the longest common prefix with the last prompt; return its length."""
        llama = self._llama
        cached = 0
        previous = llama.input_ids[: llama.n_tokens] if self._reusable else ()
        # At least one token must be evaluated to get logits for the first sample.
        while cached < min(len(previous), len(tokens) - 1) and previous[cached] == tokens[cached]:
            cached += 1
        if cached == 0:
            llama.reset()  # type: ignore[no-untyped-call]
        llama.n_tokens = cached  # eval() drops the cache beyond n_tokens
        return cached

    def generate(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        on_token: OnToken | None = None,
    ) -> Generation:
        tokens = self._tokens(messages)
        check_fits(len(tokens), max_tokens, self.n_ctx)
        llama = self._llama
        start = time.perf_counter()
        cached = self._reuse_prefix(tokens)
        llama.eval(tokens[cached:])
        prefilled = time.perf_counter()
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pieces: list[str] = []
        completion = 0
        finish = "length"
        # generate() finds the whole prompt already evaluated and starts sampling at once.
        for token in llama.generate(tokens, temp=temperature, top_k=40, top_p=0.95, repeat_penalty=1.1):
            if self._is_eog(self._vocab, token):
                finish = "stop"
                break
            completion += 1
            piece = decoder.decode(llama.detokenize([token]))
            if piece:
                pieces.append(piece)
                if on_token is not None:
                    on_token(piece)
            if completion >= max_tokens:
                break
        tail = decoder.decode(b"", final=True)
        if tail:
            pieces.append(tail)
            if on_token is not None:
                on_token(tail)
        end = time.perf_counter()
        prefill_ms = (prefilled - start) * 1000
        return Generation(
            text="".join(pieces),
            prompt_tokens=len(tokens),
            completion_tokens=completion,
            cached_tokens=cached,
            prefill_ms=prefill_ms,
            prefill_tokens_per_s=tokens_per_s(len(tokens) - cached, prefill_ms),
            decode_tokens_per_s=tokens_per_s(completion, (end - prefilled) * 1000),
            total_ms=(end - start) * 1000,
            finish_reason=finish,
        )

    def filler_tokens(self, n_tokens: int) -> list[int]:
        lines = n_tokens // 8 + 1
        tokens = self._llama.tokenize(filler_text(lines).encode("utf-8"), add_bos=False)
        while len(tokens) < n_tokens:
            lines *= 2
            tokens = self._llama.tokenize(filler_text(lines).encode("utf-8"), add_bos=False)
        return tokens[:n_tokens]

    def measure_prefill(self, n_tokens: int) -> float:
        if not 1 <= n_tokens <= self.n_ctx:
            raise BudgetError(f"cannot prefill {n_tokens} tokens in n_ctx {self.n_ctx}: pick 1..{self.n_ctx} tokens")
        tokens = self.filler_tokens(n_tokens)
        # n_tokens = 0, so eval() clears the whole KV cache first: no prefix reuse skews the timing.
        self._llama.reset()  # type: ignore[no-untyped-call]
        start = time.perf_counter()
        self._llama.eval(tokens)
        return (time.perf_counter() - start) * 1000

    def close(self) -> None:
        self._llama.close()

    def __enter__(self) -> LlamaCppRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def __getattr__(name: str) -> Any:
    # The HTTP runtime lives in bridge.remote (which imports this module) to keep both small;
    # re-exporting it lazily avoids a circular import.
    if name == "OpenAICompatRuntime":
        from bridge.remote import OpenAICompatRuntime

        return OpenAICompatRuntime
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
