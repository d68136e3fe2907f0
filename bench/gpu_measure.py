"""Prefill and decode speed and KV bytes of one GGUF at several prompt lengths (the measuring part of gpu_check.sh).

    python bench/gpu_measure.py [--model FILE.gguf] [--gpu-layers -1] [--tokens 512,4096,8192] [--decode 128]

One llama.cpp context of n_ctx = largest prompt + decode tokens. For each prompt length N, from an
empty KV cache: prefill N tokens of code-like filler (timed), then decode `--decode` tokens greedily
(timed; end-of-generation tokens are ignored, so every length decodes the same number). Each length
is measured `--repeats` times after one untimed warm-up (the first CUDA call compiles and uploads);
the median is reported. KV bytes: the context's state size after the prefill
(llama_state_get_size, which is dominated by the KV cells in use) next to the GGUF formula
2 x layers x kv_heads x head_dim x 2 bytes x N; the offloaded layer count and the allocated KV cache
come from llama.cpp's own log lines. Prints a table and writes OUT/gpu.json and OUT/gpu.md.
Runs on CPU too (`--gpu-layers 0`), which is how its parts are tested without a GPU.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import platform
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bridge.llm.gguf import bundled_model_path, kv_bytes_per_token, read_gguf  # noqa: E402
from bridge.llm.runtime import filler_text  # noqa: E402

OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
KV_SIZE = re.compile(r"size\s*=\s*([\d.]+)\s*MiB\s*\(\s*(\d+) cells")


@dataclass(frozen=True, slots=True)
class Row:
    tokens: int
    prefill_ms: float
    prefill_tokens_per_s: float
    decode_tokens: int
    decode_ms: float
    decode_tokens_per_s: float
    state_bytes: int  # llama_state_get_size after the prefill
    kv_formula_bytes: int


class LogCapture:
    """llama.cpp's log lines, kept instead of printed (the callback must outlive the context)."""

    def __init__(self) -> None:
        import llama_cpp

        self.lines: list[str] = []

        @llama_cpp.llama_log_callback
        def keep(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
            if level != 4:  # debug lines come per graph node, thousands per prefill
                self.lines.append(text.decode("utf-8", "replace"))

        self._callback = keep
        llama_cpp.llama_log_set(keep, ctypes.c_void_p(0))

    def stop(self) -> None:
        """Hand logging back to llama-cpp-python: a Python callback per line slows every eval."""
        import llama_cpp
        from llama_cpp import _logger

        llama_cpp.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def offloaded(self) -> tuple[int, int] | None:
        found = OFFLOADED.search(self.text)
        return (int(found.group(1)), int(found.group(2))) if found else None

    def kv_cache(self) -> tuple[float, int] | None:
        """(MiB allocated, cells) from llama.cpp's KV cache line."""
        found = KV_SIZE.search(self.text)
        return (float(found.group(1)), int(found.group(2))) if found else None


def filler(llama: Any, n_tokens: int) -> list[int]:
    lines = n_tokens // 8 + 1
    tokens: list[int] = llama.tokenize(filler_text(lines).encode(), add_bos=False)
    while len(tokens) < n_tokens:
        lines *= 2
        tokens = llama.tokenize(filler_text(lines).encode(), add_bos=False)
    return tokens[:n_tokens]


def once(llama: Any, tokens: list[int], decode: int) -> tuple[float, float, int, int]:
    """(prefill ms, decode ms, tokens decoded, state bytes after prefill), from an empty cache."""
    import llama_cpp

    llama.reset()
    start = time.perf_counter()
    llama.eval(tokens)
    prefilled = time.perf_counter()
    state = int(llama_cpp.llama_state_get_size(llama.ctx))
    decoded = 0
    begin = time.perf_counter()
    for _token in llama.generate(tokens, temp=0.0):
        decoded += 1
        if decoded >= decode:
            break
    end = time.perf_counter()
    return (prefilled - start) * 1000, (end - begin) * 1000, decoded, state


def measure(model: Path, gpu_layers: int, lengths: list[int], decode: int, repeats: int) -> dict[str, Any]:
    import llama_cpp

    log = LogCapture()
    facts = read_gguf(model)
    per_token = kv_bytes_per_token(facts, "f16")
    n_ctx = max(lengths) + decode + 8
    t0 = time.perf_counter()
    llama = llama_cpp.Llama(
        model_path=str(model), n_ctx=n_ctx, n_gpu_layers=gpu_layers, n_batch=512, verbose=False, seed=0
    )
    load_s = time.perf_counter() - t0
    log.stop()
    rows: list[Row] = []
    try:
        once(llama, filler(llama, min(lengths)), min(decode, 8))  # warm-up, not timed
        for n in lengths:
            tokens = filler(llama, n)
            runs = [once(llama, tokens, decode) for _ in range(repeats)]
            prefill = statistics.median(r[0] for r in runs)
            dec_ms = statistics.median(r[1] for r in runs)
            decoded = runs[0][2]
            rows.append(
                Row(
                    tokens=n,
                    prefill_ms=round(prefill, 2),
                    prefill_tokens_per_s=round(n / (prefill / 1000), 1),
                    decode_tokens=decoded,
                    decode_ms=round(dec_ms, 2),
                    decode_tokens_per_s=round(decoded / (dec_ms / 1000), 1) if dec_ms > 0 else 0.0,
                    state_bytes=runs[0][3],
                    kv_formula_bytes=per_token * n,
                )
            )
    finally:
        llama.close()
    offloaded = log.offloaded()
    kv = log.kv_cache()
    return {
        "model": str(model),
        "gpu_offload_supported": bool(llama_cpp.llama_supports_gpu_offload()),
        "gpu_layers_requested": gpu_layers,
        "layers_offloaded": offloaded[0] if offloaded else 0,
        "layers_total": offloaded[1] if offloaded else facts.layers + 1,
        "n_ctx": n_ctx,
        "kv_cache_allocated_mib": kv[0] if kv else None,
        "kv_cache_cells": kv[1] if kv else None,
        "kv_bytes_per_token_formula": per_token,
        "load_s": round(load_s, 2),
        "repeats": repeats,
        "rows": [asdict(r) for r in rows],
        "machine": platform.platform(),
        "llama_cpp_version": llama_cpp.__version__,
        "log": log.lines[-200:],
    }


def table(report: dict[str, Any]) -> str:
    head = (
        f"model {Path(report['model']).name}; layers offloaded {report['layers_offloaded']}/{report['layers_total']} "
        f"(GPU offload supported: {report['gpu_offload_supported']}); n_ctx {report['n_ctx']}; KV cache allocated "
        f"{report['kv_cache_allocated_mib']} MiB for {report['kv_cache_cells']} cells; load {report['load_s']} s; "
        f"median of {report['repeats']}\n\n"
    )
    lines = [
        "| prompt tokens | prefill ms | prefill tok/s | decode tokens | decode tok/s | state bytes after prefill | KV bytes (formula) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["rows"]:
        lines.append(
            f"| {r['tokens']:,} | {r['prefill_ms']:,.1f} | {r['prefill_tokens_per_s']:,.0f} | {r['decode_tokens']} | "
            f"{r['decode_tokens_per_s']:,.1f} | {r['state_bytes']:,} | {r['kv_formula_bytes']:,} |"
        )
    return head + "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="GGUF (default: the bundled SmolLM2-135M)")
    parser.add_argument("--gpu-layers", type=int, default=-1, help="n_gpu_layers (-1: all)")
    parser.add_argument("--tokens", default="512,4096,8192", help="prompt lengths, comma-separated")
    parser.add_argument("--decode", type=int, default=128, help="tokens decoded after each prefill")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--require-gpu", action="store_true", help="fail unless every layer was offloaded")
    args = parser.parse_args()
    lengths = sorted({int(x) for x in args.tokens.split(",") if x.strip()})
    if not lengths or lengths[0] < 1:
        parser.error("--tokens needs positive lengths, e.g. 512,4096,8192")
    model = args.model or bundled_model_path()
    report = measure(model, args.gpu_layers, lengths, args.decode, args.repeats)
    text = table(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "gpu.md").write_text(text)
    print(text)
    if args.require_gpu and report["layers_offloaded"] < report["layers_total"]:
        print(
            f"error: only {report['layers_offloaded']}/{report['layers_total']} layers were offloaded: "
            f"this llama.cpp build has no working GPU back end (see the log in {args.out / 'gpu.json'})",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
