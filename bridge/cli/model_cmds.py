"""`bridge model`: a model's shape, its KV-cache cost per token and per context, and the context contract."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from bridge.cli.common import console, emit_json, fail

if TYPE_CHECKING:
    from bridge.llm.gguf import CacheType, ModelFacts

__all__ = ["CONTEXT_SIZES", "human_bytes", "model_json", "register"]

# Context sizes shown in the KV table (those within the model's limit), plus the chosen n_ctx.
CONTEXT_SIZES = (2048, 4096, 8192, 16384, 32768, 65536, 131072)


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def model_json(facts: ModelFacts, cache_type: CacheType, n_ctx: int, memory: int | None) -> dict[str, Any]:
    """The `bridge model --json` document: docs/INTERFACES.md's fields and a few more."""
    from bridge.llm.gguf import (
        CACHE_TYPES,
        context_limit,
        kv_bytes,
        kv_bytes_per_token,
        kv_bytes_per_token_by_type,
        max_context_for_memory,
    )

    limit = context_limit(facts)
    sizes = sorted({n for n in CONTEXT_SIZES if n <= limit} | {n_ctx})
    rope = facts.rope
    data: dict[str, Any] = {
        "name": facts.name,
        "path": facts.path,
        "architecture": facts.architecture,
        "layers": facts.layers,
        "heads": facts.heads,
        "kv_heads": facts.kv_heads,
        "head_dim": facts.head_dim,
        "trained_context": facts.trained_context,
        "context_limit": limit,
        "rope": {
            "freq_base": rope.freq_base,
            "scaling_type": rope.scaling_type,
            "factor": rope.factor,
            "original_context": rope.original_context,
            "low_freq_factor": rope.low_freq_factor,
            "high_freq_factor": rope.high_freq_factor,
        },
        "quantization": facts.quantization,
        "parameters": facts.parameters,
        "weights_bytes": facts.weights_bytes,
        "weights_by_format": dict(facts.weights_by_format),
        "cache_type": cache_type,
        "n_ctx": n_ctx,
        "kv_bytes_per_token": kv_bytes_per_token(facts, cache_type),
        "kv_bytes_per_token_by_type": kv_bytes_per_token_by_type(facts),
        "kv_bytes": kv_bytes(facts, n_ctx, cache_type),
        "kv_bytes_by_context": [{"tokens": n, **{t: kv_bytes(facts, n, t) for t in CACHE_TYPES}} for n in sizes],
        "memory": None,
    }
    if memory is not None:
        room = max(0, memory - facts.weights_bytes)
        data["memory"] = {
            "budget_bytes": memory,
            "kv_room_bytes": room,  # what the weights leave for the KV cache
            "max_context": {t: min(limit, max_context_for_memory(facts, room, t)) for t in CACHE_TYPES},
        }
    return data


def _print(data: dict[str, Any]) -> None:
    rope = data["rope"]
    scaling = (
        f"{rope['scaling_type']} scaling x{rope['factor']:g} of {rope['original_context']:,}"
        if rope["scaling_type"] and rope["factor"] and rope["original_context"]
        else "no scaling"
    )
    where = data["path"] or "preset (published config)"
    console.print(f"[bold]{data['name']}[/] ({data['architecture']}), {where}", markup=True)
    console.print(
        f"{data['layers']} layers, {data['heads']} heads, {data['kv_heads']} KV heads, head dim {data['head_dim']}; "
        f"trained context {data['trained_context']:,}; RoPE base {rope['freq_base']}, {scaling}"
    )
    weights = ", ".join(f"{fmt} {human_bytes(n)}" for fmt, n in data["weights_by_format"].items())
    console.print(f"weights: {weights}; context limit (trained or declared scaling): {data['context_limit']:,} tokens")
    per = data["kv_bytes_per_token_by_type"]
    console.print("KV cache per token: " + ", ".join(f"{t} {n:,} B" for t, n in per.items()))
    console.print(f"{'context':>10}  {'f16':>11}  {'q8_0':>11}  {'q4_0':>11}")
    for row in data["kv_bytes_by_context"]:
        mark = " <- n_ctx" if row["tokens"] == data["n_ctx"] else ""
        cells = "  ".join(f"{human_bytes(row[t]):>11}" for t in ("f16", "q8_0", "q4_0"))
        console.print(f"{row['tokens']:>10,}  {cells}{mark}")
    console.print(f"n_ctx {data['n_ctx']:,} at {data['cache_type']}: {human_bytes(data['kv_bytes'])} of KV cache")
    memory = data["memory"]
    if memory is not None:
        fits = ", ".join(f"{t} {n:,}" for t, n in memory["max_context"].items())
        console.print(
            f"in {human_bytes(memory['budget_bytes'])} (weights + KV cache, compute buffers not counted): "
            f"largest context {fits} tokens (capped at the context limit)"
        )


def model_cmd(
    gguf: Path | None = typer.Argument(None, help="A .gguf file (default: the bundled SmolLM2-135M-Instruct)."),
    preset_name: str | None = typer.Option(
        None, "--preset", help="A published model instead of a file: llama-3.1-8b, -70b, -405b, llama-3.2-1b, -3b."
    ),
    n_ctx: int | None = typer.Option(None, "--n-ctx", help="Context to check against the model's contract."),
    cache_type: str = typer.Option("f16", "--cache-type", help="KV cache type: f16, q8_0 or q4_0."),
    memory: str | None = typer.Option(
        None, "--memory", help="Memory budget, e.g. 16GiB: the largest context that fits."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
) -> None:
    """Show a model's facts: shape, RoPE, KV bytes per token and per context, weights, what fits."""
    from bridge.chat.settings import parse_bytes
    from bridge.llm.gguf import CACHE_TYPES, bundled_model_path, choose_n_ctx, preset, read_gguf

    if gguf is not None and preset_name is not None:
        fail("pass either a GGUF file or --preset, not both", code=2)
    if cache_type not in CACHE_TYPES:
        fail(f"--cache-type {cache_type!r} is unknown: use one of {', '.join(CACHE_TYPES)}", code=2)
    facts = preset(preset_name) if preset_name is not None else read_gguf(gguf or bundled_model_path())
    chosen = choose_n_ctx(facts, n_ctx)
    budget = parse_bytes(memory) if memory is not None else None
    data = model_json(facts, cache_type, chosen, budget)
    if json_out:
        emit_json(data)
    else:
        _print(data)


def register(app: typer.Typer) -> None:
    app.command("model")(model_cmd)
