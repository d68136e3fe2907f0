"""An OpenAI-compatible server (llama.cpp llama-server, Ollama) as a Runtime, over httpx.

Tokens are counted exactly with llama-server's /tokenize and /apply-template when the server has
them; otherwise with bridge.llm.tokens.estimate_tokens plus a generous template allowance.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import httpx

from bridge.errors import BudgetError, GenerationError, RuntimeUnavailable
from bridge.llm.runtime import (
    GREEDY,
    Decoding,
    Generation,
    Message,
    OnToken,
    RuntimeInfo,
    StopWhen,
    TemplateOverhead,
    check_fits,
    filler_text,
    measure_overhead,
    tokens_per_s,
)
from bridge.llm.tokens import estimate_tokens

__all__ = ["DEFAULT_SERVER_N_CTX", "ESTIMATED_OVERHEAD", "OpenAICompatRuntime"]

# Assumed when the server does not report its context (Ollama's long-standing default num_ctx).
DEFAULT_SERVER_N_CTX = 2048
# Without a way to render the server's template, allow for a long system preamble.
ESTIMATED_OVERHEAD = TemplateOverhead(per_message=10, fixed=48, per_join=1)


class OpenAICompatRuntime:
    def __init__(
        self,
        base_url: str,
        *,
        model: str = "default",
        n_ctx: int | None = None,
        api_key: str | None = None,
        timeout_s: float = 300.0,
        client: httpx.Client | None = None,
    ) -> None:
        self.root = base_url.rstrip("/").removesuffix("/v1")
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._own_client = client is None
        self._client = client if client is not None else httpx.Client(timeout=timeout_s, headers=headers)
        # Which llama-server extras this server has; None until asked.
        self._exact: bool | None = None  # /tokenize
        self._templated: bool | None = None  # /apply-template
        self._overhead: TemplateOverhead | None = None
        notes: list[str] = []
        if n_ctx is None:
            n_ctx = self._server_n_ctx()
            if n_ctx is None:
                n_ctx = DEFAULT_SERVER_N_CTX
                notes.append(f"{self.root} did not report its context size: assuming {n_ctx} (pass --n-ctx)")
        self.n_ctx = n_ctx
        self._notes = tuple(notes)

    # --- HTTP ------------------------------------------------------------------------------

    def _unreachable(self, exc: Exception) -> RuntimeUnavailable:
        return RuntimeUnavailable(
            f"no OpenAI-compatible server answering at {self.root} ({exc}): "
            f"start llama-server or Ollama there, or fix --llm-url"
        )

    def _optional(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any | None:
        """JSON of an endpoint only some servers have; None when this one lacks it."""
        try:
            if method == "GET":
                response = self._client.get(self.root + path)
            else:
                response = self._client.post(self.root + path, json=body)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc
        if response.status_code >= 400:
            return None
        try:
            return response.json()
        except ValueError:
            return None

    def _server_n_ctx(self) -> int | None:
        props = self._optional("GET", "/props")
        if not isinstance(props, dict):
            return None
        settings = props.get("default_generation_settings") or {}
        value = props.get("n_ctx") or (settings.get("n_ctx") if isinstance(settings, dict) else None)
        return int(value) if isinstance(value, int) and value > 0 else None

    # --- counting --------------------------------------------------------------------------

    def _tokenize(self, text: str) -> int | None:
        if self._exact is False:
            return None
        result = self._optional("POST", "/tokenize", {"content": text, "add_special": False, "parse_special": True})
        tokens = result.get("tokens") if isinstance(result, dict) else None
        self._exact = isinstance(tokens, list)
        return len(tokens) if isinstance(tokens, list) else None

    def count_tokens(self, text: str) -> int:
        exact = self._tokenize(text) if text else 0
        return exact if exact is not None else estimate_tokens(text)

    def count_messages(self, messages: Sequence[Message]) -> int:
        if self._exact is not False and self._templated is not False:
            body = {"messages": [{"role": m.role, "content": m.content} for m in messages]}
            result = self._optional("POST", "/apply-template", body)
            rendered = result.get("prompt") if isinstance(result, dict) else None
            self._templated = isinstance(rendered, str)
            exact = self._tokenize(rendered) if isinstance(rendered, str) else None
            if exact is not None:
                return exact + 1  # the server may add BOS when it tokenizes for generation
        overhead = ESTIMATED_OVERHEAD
        return overhead.fixed + sum(self.count_tokens(m.content) + overhead.per_message for m in messages)

    def _probe(self) -> None:
        if self._exact is None or self._templated is None:
            self.count_messages([Message("user", "probe")])  # learns which extras the server has

    def template_overhead(self) -> TemplateOverhead:
        if self._overhead is None:
            self._probe()
            if self._exact and self._templated:
                self._overhead = measure_overhead(self.count_messages, self.count_tokens)
            else:
                self._overhead = ESTIMATED_OVERHEAD
        return self._overhead

    @property
    def info(self) -> RuntimeInfo:
        self._probe()
        return RuntimeInfo(
            kind="openai-compatible",
            model=f"{self.model} at {self.root}",
            n_ctx=self.n_ctx,
            trained_context=None,
            gpu_layers=None,
            cache_type=None,
            flash_attn=None,
            exact_tokens=bool(self._exact and self._templated),
            notes=self._notes
            + (() if self._exact and self._templated else ("prompt token counts are estimates with a safety margin",)),
        )

    # --- generation ------------------------------------------------------------------------

    def _stream(
        self, body: dict[str, Any], on_token: OnToken | None, stop_when: StopWhen | None = None
    ) -> tuple[dict[str, Any], float | None]:
        """Send a streaming chat request; return the merged final state and time of the first token."""
        state: dict[str, Any] = {"pieces": [], "chunks": 0, "usage": None, "timings": None, "finish": None}
        first: float | None = None
        url = self.root + "/v1/chat/completions"
        try:
            with self._client.stream("POST", url, json=body) as response:
                if response.status_code >= 400:
                    detail = response.read().decode("utf-8", "replace")[:300]
                    raise GenerationError(
                        f"{url} answered {response.status_code} ({detail}): check the model name and the server log"
                    )
                for line in response.iter_lines():
                    data = line.removeprefix("data:").strip() if line.startswith("data:") else ""
                    if not data:
                        continue
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if "error" in chunk:
                        raise GenerationError(f"{url} reported an error ({chunk['error']}): check the server log")
                    for choice in chunk.get("choices") or ():
                        piece = (choice.get("delta") or {}).get("content") or ""
                        if piece:
                            first = first if first is not None else time.perf_counter()
                            state["pieces"].append(piece)
                            state["chunks"] += 1
                            if on_token is not None:
                                on_token(piece)
                            if stop_when is not None and stop_when(piece):
                                # Leaving the stream closes the connection; the server stops generating.
                                state["finish"] = "stopped"
                                return state, first
                        state["finish"] = choice.get("finish_reason") or state["finish"]
                    state["usage"] = chunk.get("usage") or state["usage"]
                    state["timings"] = chunk.get("timings") or state["timings"]
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc
        except json.JSONDecodeError as exc:
            raise GenerationError(
                f"{url} sent a stream that is not JSON ({exc}): is --llm-url an OpenAI-compatible API?"
            ) from exc
        return state, first

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
        if prefix:
            raise ValueError("an OpenAI-compatible server cannot continue a reply begun with a prefix: pass none")
        check_fits(self.count_messages(messages), max_tokens, self.n_ctx)
        body = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": max_tokens,
            "temperature": decoding.temperature,
            "top_p": decoding.top_p,
            "frequency_penalty": decoding.frequency_penalty,
            "presence_penalty": decoding.presence_penalty,
            "seed": decoding.seed,
        }
        start = time.perf_counter()
        state, first = self._stream(body, on_token, stop_when)
        end = time.perf_counter()
        return _generation(state, start, first, end)

    def lead(self, messages: Sequence[Message], names: Sequence[str]) -> str | None:
        return None  # as `cite`: no portable grammar, so no prefix to continue either

    def cite(self, messages: Sequence[Message], answer: str, citations: Sequence[str]) -> str | None:
        return None  # an OpenAI-compatible API has no portable way to constrain generation by a grammar

    def measure_prefill(self, n_tokens: int) -> float:
        if not 1 <= n_tokens < self.n_ctx:
            raise BudgetError(
                f"cannot prefill {n_tokens} tokens in n_ctx {self.n_ctx}: pick 1..{self.n_ctx - 1} tokens"
            )
        line = filler_text(1)
        per_line = max(1, self.count_tokens(line))
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": line * max(1, n_tokens // per_line)}],
            "stream": True,
            "max_tokens": 1,
            "cache_prompt": False,  # llama-server: do not reuse a cached prefix
        }
        start = time.perf_counter()
        state, first = self._stream(body, None)
        timings = state["timings"] or {}
        if isinstance(timings.get("prompt_ms"), (int, float)):
            return float(timings["prompt_ms"])
        return ((first or time.perf_counter()) - start) * 1000

    def close(self) -> None:
        if self._own_client:
            self._client.close()

    def __enter__(self) -> OpenAICompatRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _generation(state: dict[str, Any], start: float, first: float | None, end: float) -> Generation:
    """Prefer the server's own timings (llama-server); else time to first token and the rest."""
    usage = state["usage"] or {}
    timings = state["timings"] or {}
    completion = int(usage.get("completion_tokens") or timings.get("predicted_n") or state["chunks"])
    cached = int(timings.get("cache_n") or 0)
    prompt = int(usage.get("prompt_tokens") or (timings.get("prompt_n", 0) + cached))
    if "prompt_ms" in timings:
        prefill_ms = float(timings["prompt_ms"])
        prefill_rate = float(timings.get("prompt_per_second") or tokens_per_s(prompt - cached, prefill_ms))
        decode_ms = float(timings.get("predicted_ms", 0))
        decode_rate = float(timings.get("predicted_per_second") or tokens_per_s(completion, decode_ms))
    else:
        prefill_ms = ((first or end) - start) * 1000
        prefill_rate = tokens_per_s(prompt, prefill_ms)
        decode_rate = tokens_per_s(completion - 1, (end - first) * 1000) if first is not None else 0.0
    return Generation(
        text="".join(state["pieces"]),
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_tokens=cached,
        prefill_ms=prefill_ms,
        prefill_tokens_per_s=prefill_rate,
        decode_tokens_per_s=decode_rate,
        total_ms=(end - start) * 1000,
        finish_reason=state["finish"] if state["finish"] in ("length", "stopped") else "stop",
    )
