"""The settings of the chat loop: one frozen object, from the command line, then `BRIDGE_*`, then defaults.

Each field `name` may be set by the environment variable `BRIDGE_<NAME>` (e.g. BRIDGE_N_CTX,
BRIDGE_KV_BUDGET=256MiB, BRIDGE_LLM_URL); a value given on the command line wins over it.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridge.chat.budget import DEFAULT_ANSWER_RESERVE, DEFAULT_SNIPPET_BUDGET
from bridge.chat.grounding import GROUNDINGS, Grounding
from bridge.errors import ConfigError
from bridge.llm.gguf import CACHE_TYPES, CacheType
from bridge.llm.runtime import GpuLayers
from index.types import MODES, Mode

__all__ = ["ConfigError", "ENV_PREFIX", "Settings", "load_settings", "parse_bytes", "parse_gpu_layers"]

ENV_PREFIX = "BRIDGE_"
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


@dataclass(frozen=True, slots=True)
class Settings:
    model: Path | None = None  # GGUF to run (None: the bundled SmolLM2); with llm_url, only its facts are read
    n_ctx: int | None = None  # None: min(8192, trained context)
    kv_budget: int | None = None  # bytes of KV cache allowed; caps n_ctx
    cache_type: CacheType = "f16"
    gpu_layers: GpuLayers = "auto"
    llm_url: str | None = None  # an OpenAI-compatible server instead of llama.cpp in process
    llm_model: str = "default"  # the model name sent to that server
    server: str | None = None  # an MCP server URL instead of the in-process one
    token_env: str | None = None  # variable holding that server's bearer token
    k: int = 5
    mode: Mode = "hybrid"
    snippet_tokens: int = DEFAULT_SNIPPET_BUDGET
    answer_reserve: int = DEFAULT_ANSWER_RESERVE
    grounding: Grounding = "auto"  # withhold code and citations the snippets lack: auto (small models), strict, free


def parse_bytes(text: str | int) -> int:
    """'268435456', '256MiB', '1.5 GB' -> bytes (binary units are KiB/MiB/GiB, decimal KB/MB/GB)."""
    if isinstance(text, int):
        value = text
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
        unit = match.group(2).lower() if match else ""
        if match is None or unit not in _UNITS:
            raise ConfigError(f"{text!r} is not a size: write bytes, or a number with KiB, MiB, GiB, KB, MB or GB")
        value = int(float(match.group(1)) * _UNITS[unit])
    if value < 1:
        raise ConfigError(f"size {text!r} is not positive: pass at least 1 byte")
    return value


def parse_gpu_layers(text: str | int) -> GpuLayers:
    if isinstance(text, int) or text.strip().lstrip("-").isdigit():
        return int(text)
    if text.strip().lower() == "auto":
        return "auto"
    raise ConfigError(f"gpu layers {text!r} is neither a number nor auto: pass e.g. --gpu-layers 0 or auto")


def _positive(text: str | int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{text!r} is not a whole number: pass e.g. 4096") from None
    if value < 1:
        raise ConfigError(f"{value} is not positive: pass 1 or more")
    return value


def _non_negative(text: str | int) -> int:
    return 0 if str(text).strip() == "0" else _positive(text)


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise ConfigError(f"{text!r} is not one of {', '.join(choices)}")
        return text

    return parse


def _text(text: str) -> str | None:
    return text.strip() or None


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "model": lambda v: Path(v).expanduser(),
    "n_ctx": _positive,
    "kv_budget": parse_bytes,
    "cache_type": _choice(CACHE_TYPES),
    "gpu_layers": parse_gpu_layers,
    "llm_url": _text,
    "llm_model": lambda v: _text(v) or "default",
    "server": _text,
    "token_env": _text,
    "k": _positive,
    "mode": _choice(MODES),
    "snippet_tokens": _non_negative,
    "answer_reserve": _positive,
    "grounding": _choice(GROUNDINGS),
}


def load_settings(cli: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """A command-line value that is not None wins, then BRIDGE_<NAME>, then the default."""
    cli = cli or {}
    env = os.environ if env is None else env
    unknown = set(cli) - {f.name for f in dataclasses.fields(Settings)}
    if unknown:
        raise ConfigError(f"unknown settings {sorted(unknown)}: use the fields of bridge.chat.settings.Settings")
    values: dict[str, Any] = {}
    for field in dataclasses.fields(Settings):
        given = cli.get(field.name)
        source = f"--{field.name.replace('_', '-')}"
        if given is None:
            var = ENV_PREFIX + field.name.upper()
            if var not in env:
                continue
            given, source = env[var], var
        try:
            values[field.name] = _PARSERS[field.name](given)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
    return Settings(**values)
