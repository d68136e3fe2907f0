"""Chat test helpers: a fake runtime with the bundled model's shape and a small repository."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from bridge.llm.gguf import ModelFacts, Rope
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
)

FILES = {
    "src/config.py": (
        "import os\n\n\n"
        "def parse_config(path):\n"
        "    \"\"\"Read the settings file and return its key/value pairs.\"\"\"\n"
        "    pairs = {}\n"
        "    for line in open(path):\n"
        "        key, _, value = line.partition('=')\n"
        "        pairs[key.strip()] = value.strip()\n"
        "    return pairs\n"
    ),
    "src/server.py": (
        "from src.config import parse_config\n\n\n"
        "def start_server(port):\n"
        "    \"\"\"Open a listening socket on the port and serve requests forever.\"\"\"\n"
        "    settings = parse_config('server.ini')\n"
        "    return ('listening', port, settings)\n"
    ),
    "src/retry.py": (
        "import time\n\n\n"
        "def retry(call, attempts=3, delay=0.5):\n"
        "    \"\"\"Call `call` until it succeeds, sleeping `delay` seconds between attempts.\"\"\"\n"
        "    for attempt in range(attempts):\n"
        "        try:\n"
        "            return call()\n"
        "        except OSError:\n"
        "            time.sleep(delay * (attempt + 1))\n"
        "    raise RuntimeError('gave up')\n"
    ),
    "README.md": "# Demo\n\nA small service: `start_server` reads its settings with `parse_config`.\n",
}

# The shape of the bundled SmolLM2-135M (30 layers, 3 KV heads of 64): 23,040 KV bytes/token at f16.
FAKE_FACTS = ModelFacts(
    name="fake", architecture="llama", layers=30, heads=9, kv_heads=3, head_dim=64, trained_context=8192,
    rope=Rope(freq_base=100_000.0, scaling_type=None), weights_bytes=1000, path="fake.gguf",
)
OVERHEAD = TemplateOverhead(per_message=4, fixed=6, per_join=1)
CITATION = re.compile(r"\[([^\]\s]+:\d+-\d+)\]")


def make_repo(root: Path) -> Path:
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


class FakeRuntime:
    """One token per whitespace-separated word, a template of exactly OVERHEAD, and an answer that
    cites the first snippet it was shown, then says answer_words filler words. It refuses any
    prompt that would overflow n_ctx."""

    def __init__(
        self, n_ctx: int = 2048, answer_words: int = 6, cache_type: str = "f16", filler: Sequence[str] = ()
    ) -> None:
        self.facts = FAKE_FACTS
        self.silent = False  # True: answer with nothing at all
        self.silent_citation = False  # True: answer without citing
        self.can_cite = True  # cite() picks the last citation offered (False: a backend without grammars)
        self.cited: list[tuple[str, ...]] = []
        self.offered: list[tuple[str, ...]] = []  # the names lead() was offered; it picks the last, as cite()
        self.prefixes: list[str] = []  # what each reply was begun with
        self.filler = list(filler)  # words cycled after the citation; none: w0 w1 w2 ... (never a loop)
        self.n_ctx = n_ctx
        self.answer_words = answer_words
        self.calls: list[tuple[tuple[Message, ...], int]] = []
        self.closed = False
        self._info = RuntimeInfo(
            kind="fake", model="fake.gguf", n_ctx=n_ctx, trained_context=8192, gpu_layers=0,
            cache_type=cache_type, flash_attn=False, exact_tokens=True, notes=("fake runtime: 0 layers offloaded",),
        )

    @property
    def info(self) -> RuntimeInfo:
        return self._info

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def count_messages(self, messages: Sequence[Message]) -> int:
        return OVERHEAD.fixed + sum(self.count_tokens(m.content) + OVERHEAD.per_message for m in messages)

    def template_overhead(self) -> TemplateOverhead:
        return OVERHEAD

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
        self.prefixes.append(prefix)
        prompt = self.count_messages(messages)
        check_fits(prompt, max_tokens, self.n_ctx)
        self.calls.append((tuple(messages), max_tokens))
        cited = CITATION.findall(messages[-1].content)
        if cited and not self.silent_citation:
            base = f"See {cited[0]} for it."
        else:
            base = "It reads the settings file." if cited else "I could not find it in the retrieved code."
        filler = [self.filler[i % len(self.filler)] if self.filler else f"w{i}" for i in range(self.answer_words)]
        words = [] if self.silent else [*base.split(), *filler][:max_tokens]
        said: list[str] = []
        finish = "stop"
        for word in words:
            said.append(word)
            if on_token is not None:
                on_token(word + " ")
            if stop_when is not None and stop_when(word + " "):
                finish = "stopped"
                break
        return Generation(
            text=" ".join(said), prompt_tokens=prompt, completion_tokens=len(said), cached_tokens=0,
            prefill_ms=10.0, prefill_tokens_per_s=prompt / 0.01, decode_tokens_per_s=100.0, total_ms=20.0,
            finish_reason=finish,
        )

    def lead(self, messages: Sequence[Message], names: Sequence[str]) -> str | None:
        self.offered.append(tuple(names))
        return names[-1] if names and self.can_cite else None

    def cite(self, messages: Sequence[Message], answer: str, citations: Sequence[str]) -> str | None:
        self.cited.append(tuple(citations))
        return citations[-1] if citations and self.can_cite else None

    def measure_prefill(self, n_tokens: int) -> float:
        return n_tokens / 100

    def close(self) -> None:
        self.closed = True
