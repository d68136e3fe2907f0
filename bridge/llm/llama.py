"""llama.cpp in process (llama-cpp-python): the only module that imports llama_cpp, lazily.

Prompts are rendered with the model's own chat template and counted with its own tokenizer; a
prompt that would overflow n_ctx raises BudgetError here, before llama.cpp's generic error.
"""

from __future__ import annotations

import atexit
import codecs
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bridge.errors import BudgetError, MissingExtra, ModelError, RuntimeUnavailable
from bridge.llm.gguf import CACHE_GGML_TYPE, CacheType, ModelFacts, bundled_model_path, choose_n_ctx, read_gguf
from bridge.llm.runtime import (
    CHATML_TEMPLATE,
    GREEDY,
    Decoding,
    Generation,
    GpuLayers,
    Message,
    OnToken,
    RuntimeInfo,
    StopWhen,
    TemplateOverhead,
    check_fits,
    citation_grammar,
    filler_text,
    measure_overhead,
    resolve_gpu_layers,
    tokens_per_s,
)
from bridge.llm.tokens import LlamaTokenCounter

__all__ = ["LlamaCppRuntime", "default_threads"]


def default_threads(cpus: int | None = None) -> int:
    """Threads for llama.cpp: half the CPUs this process may use (about one per physical core), at least 1.

    The same number serves prefill and decoding. llama-cpp-python would prefill with every logical
    CPU; on a busy machine those threads spin-wait for each other, and on 2 shared cores prefill
    ran 6x slower (512 tokens: 24 s with 2 batch threads, 4 s with 1; bench/archive/RESULTS-journal.md).
    """
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(cpus // 2, 1)


def _import_llama_cpp() -> Any:
    """Import llama_cpp, and close the two /dev/null files it opens at import when Python exits.

    llama_cpp._utils keeps them open for the life of the process (to silence llama.cpp while a
    model loads) and never closes them, so every process that imported it ended with two
    `ResourceWarning: unclosed file /dev/null`. They are only used while a model loads, never
    after exit handlers run.
    """
    import llama_cpp
    from llama_cpp import _utils

    global _devnull_registered
    if not _devnull_registered:
        atexit.register(_close_devnull, _utils)
        _devnull_registered = True
    return llama_cpp


def _close_devnull(utils: Any) -> None:
    for name in ("outnull_file", "errnull_file"):
        handle = getattr(utils, name, None)
        if handle is not None and not handle.closed:
            handle.close()


_devnull_registered = False


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
            llama_cpp = _import_llama_cpp()
        except ImportError as exc:
            raise MissingExtra("the local model (llama.cpp)", "chat", "or pass --llm-url URL") from exc
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
        threads = n_threads if n_threads is not None else default_threads()
        try:
            self._llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self.n_ctx,
                n_gpu_layers=n_gpu,
                type_k=ggml_type,
                type_v=ggml_type,
                flash_attn=flash_attn,
                n_threads=threads,
                n_threads_batch=threads,
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
        self._ticks: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # per token: has ``, starts/ends with `
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
        self.threads = threads

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

    def _no_fences(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """Logits with every token that would write two backticks in a row ruled out (no ``` fence)."""
        if self._ticks is None:
            pieces = [self._llama.detokenize([t]) for t in range(self._llama.n_vocab())]
            self._ticks = (np.array([b"``" in p for p in pieces]), np.array([p.startswith(b"`") for p in pieces]),
                           np.array([p.endswith(b"`") for p in pieces]))
        double, starts, ends = self._ticks
        banned = double | starts if len(input_ids) and ends[input_ids[-1]] else double
        return np.where(banned, -np.inf, scores).astype(scores.dtype)

    def _reuse_prefix(self, tokens: list[int]) -> int:
        """Keep the KV cache for the longest common prefix with the last prompt; return its length."""
        llama = self._llama
        cached = 0
        previous = llama.input_ids[: llama.n_tokens] if self._reusable else ()
        # At least one token must be evaluated to get logits for the first sample.
        while cached < min(len(previous), len(tokens) - 1) and previous[cached] == tokens[cached]:
            cached += 1
        if cached == 0:
            llama.reset()
        llama.n_tokens = cached  # eval() drops the cache beyond n_tokens
        return cached

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
        """Generate the assistant's reply; with `prefix`, the reply already begins with it and generation
        continues after it (the returned text and counts are of the continuation only)."""
        tokens = self._tokens(messages) + self._text_tokens(prefix)
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
        d = decoding
        llama.set_seed(d.seed)
        for token in llama.generate(
            tokens,
            temp=d.temperature,
            top_k=d.top_k,
            top_p=d.top_p,
            min_p=d.min_p,
            repeat_penalty=d.repeat_penalty,
            frequency_penalty=d.frequency_penalty,
            presence_penalty=d.presence_penalty,
            logits_processor=None if d.fences else [self._no_fences],
        ):
            if self._is_eog(self._vocab, token):
                finish = "stop"
                break
            completion += 1
            piece = decoder.decode(llama.detokenize([token]))
            if piece:
                pieces.append(piece)
                if on_token is not None:
                    on_token(piece)
                if stop_when is not None and stop_when(piece):
                    finish = "stopped"
                    break
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

    def _text_tokens(self, text: str) -> list[int]:
        return self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False) if text else []

    def cite(self, messages: Sequence[Message], answer: str, citations: Sequence[str]) -> str | None:
        return self.pick_citations(messages, answer.rstrip() + "\n\nSources: ", citations)

    def lead(self, messages: Sequence[Message], names: Sequence[str]) -> str | None:
        return self.pick_citations(messages, "`", names, most=1)

    def pick_citations(
        self, messages: Sequence[Message], prefix: str, citations: Sequence[str], most: int = 3
    ) -> str | None:
        """The model's choice of 1..`most` of `citations` (comma-separated) right after a reply begun with
        `prefix`, under a GBNF grammar that allows nothing else; None when the context has no room."""
        if not citations:
            return None
        from llama_cpp import LlamaGrammar

        llama = self._llama
        grammar = LlamaGrammar.from_string(citation_grammar(citations, most), verbose=False)
        tokens = self._tokens(messages) + self._text_tokens(prefix)
        longest = max(len(self._text_tokens(c)) for c in citations)
        if len(tokens) + most * (longest + 2) > self.n_ctx:
            return None  # no room left in the context for the line
        # A cap only (the grammar ends the line): under a grammar the model may spell a citation in more,
        # shorter tokens than it tokenizes to, but never in more tokens than characters.
        limit = min(most * (max(len(c) for c in citations) + 2), self.n_ctx - len(tokens))
        self._reuse_prefix(tokens)  # the prompt (and answer) are usually still in the KV cache
        picked: list[int] = []
        for token in llama.generate(tokens, temp=0.0, grammar=grammar):
            if self._is_eog(self._vocab, token) or len(picked) >= limit:
                break
            picked.append(token)
        text = llama.detokenize(picked).decode("utf-8", "replace")
        # A small model tends to pick the same citation again; keep each once, in its order.
        unique = dict.fromkeys(part.strip() for part in text.split(",") if part.strip())
        return ", ".join(unique) or None

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
        self._llama.reset()
        start = time.perf_counter()
        self._llama.eval(tokens)
        return (time.perf_counter() - start) * 1000

    def close(self) -> None:
        self._llama.close()

    def __enter__(self) -> LlamaCppRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
