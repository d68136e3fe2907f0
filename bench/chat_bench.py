"""Chat benchmark: what retrieval saves over stuffing the context, on the bundled SmolLM2-135M.

    python bench/chat_bench.py [--embedder static] [--full-tokens 8000] [--question Q]

1. Copies the CPython stdlib (as bench/load_bench.py does: about 10k chunks) to a temporary
   folder and indexes it (BM25 + vectors, `static` embedder by default; `minilm` is the
   default of `bridge index` and loads torch into every process that embeds a query).
2. Runs `bridge ask QUESTION --repo COPY --index-dir INDEX` as a subprocess, as a user would:
   time to first token from the command's start (loading the model, starting the in-process
   MCP server, retrieving, prefilling) and the process's peak RSS (VmHWM, followed while it runs).
3. In this process, the same run: one turn of the chat loop (retrieve over MCP, plan, generate)
   with n_ctx 8192, then `measure_prefill(FULL)` on the same runtime: the prefill time of the
   budgeted retrieval prompt against that of a full-context prompt of FULL tokens (measured once).
   The ratio divides by the median of three prefills of a prompt of the retrieval prompt's size,
   made like the full one (`measure_prefill`); all from an empty KV cache after a warm-up.

Prints a table and writes bench/out/chat.json. Targets: full-context prefill >= 10x the
retrieval prompt's; peak RSS of `bridge ask` <= 1.2 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_bench import copy_corpus  # noqa: E402

OUT = ROOT / "bench" / "out" / "chat.json"
QUESTION = "How does json.dumps detect circular references?"
RSS_TARGET_MB = 1200.0
RATIO_TARGET = 10.0


def build(corpus: Path, index_dir: Path, embedder: str) -> dict:
    from index.build import BuildOptions, build_index
    from index.fill import fill_vectors

    t0 = time.perf_counter()
    report = build_index(corpus, index_dir, BuildOptions(embedder=embedder))
    fill = fill_vectors(index_dir)
    return {"files": report.files, "chunks": report.chunks, "embedded": fill.embedded_chunks, "embedder": embedder,
            "build_s": round(time.perf_counter() - t0, 1)}


def peak_rss_mb(pid: int, done: threading.Event, out: list[float]) -> None:
    """Follow VmHWM (the high-water mark of this process's own memory) until the process ends.

    Not ru_maxrss from wait4: Linux carries the parent's high-water mark across fork and exec
    into the child's, so a child of a large parent (this one, after indexing) reads as large.
    """
    while not done.is_set():
        try:
            text = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        for line in text.splitlines():
            if line.startswith("VmHWM:"):
                out.append(int(line.split()[1]) / 1024)
        done.wait(0.05)


def ask_subprocess(corpus: Path, index_dir: Path, question: str) -> dict:
    """`bridge ask` as a user runs it: time to its first answer byte on stdout, and its peak RSS."""
    command = [sys.executable, "-m", "bridge", "ask", question, "--repo", str(corpus), "--index-dir", str(index_dir)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, cwd=ROOT, env=env)
        assert proc.stdout is not None
        done, marks = threading.Event(), list[float]()
        watcher = threading.Thread(target=peak_rss_mb, args=(proc.pid, done, marks), daemon=True)
        watcher.start()
        first = proc.stdout.read(1)
        first_at = time.perf_counter()
        rest = proc.stdout.read()
        proc.wait()
        end = time.perf_counter()
        done.set()
        watcher.join()
        err.seek(0)
        stderr = err.read()
    if proc.returncode != 0 or not first:
        raise SystemExit(f"bridge ask failed ({proc.returncode}):\n{stderr}")
    return {
        "command": shlex.join(["bridge", *command[3:]]),
        "ttft_ms": round((first_at - start) * 1000, 1),
        "wall_s": round(end - start, 2),
        "peak_rss_mb": round(max(marks, default=0.0), 1),
        "answer": (first + rest).decode("utf-8", "replace").strip(),
        "report": stderr.strip().splitlines()[-4:],
    }


def in_process(corpus: Path, index_dir: Path, question: str, full_tokens: int) -> dict:
    from bridge.chat.retrieval import McpRetriever, local_server
    from bridge.chat.session import ChatSession
    from bridge.chat.settings import Settings
    from bridge.llm.llama import LlamaCppRuntime

    with (
        local_server(corpus, index_dir) as server,
        McpRetriever(server.url, server.token) as retriever,
        LlamaCppRuntime(n_ctx=8192) as runtime,
    ):
        warm_ms = runtime.measure_prefill(32)  # one-time allocations, kept out of both timings
        turn = ChatSession(runtime, retriever, Settings()).ask(question)
        g = turn.generation
        # The same number of tokens, prefilled the way the full prompt is: like for like, and
        # the median of three damps the noise of a shared machine.
        same_size = statistics.median(runtime.measure_prefill(g.prompt_tokens) for _ in range(3))
        full_ms = runtime.measure_prefill(full_tokens)
        info = runtime.info
    return {
        "model": info.model,
        "n_ctx": info.n_ctx,
        "gpu_layers": info.gpu_layers,
        "warm_up_prefill_32_ms": round(warm_ms, 1),
        "retrieval_ms": round(turn.retrieval_ms, 1),
        "sources": [s.citation for s in turn.sources],
        "sections": turn.plan.budget_dict()["sections"],
        "retrieval_prompt_tokens": g.prompt_tokens,
        "retrieval_prefill_ms": round(g.prefill_ms, 1),
        "retrieval_prefill_tokens_per_s": round(g.prefill_tokens_per_s, 1),
        "first_token_ms": round(turn.first_token_ms or 0.0, 1),
        "decode_tokens": g.completion_tokens,
        "decode_tokens_per_s": round(g.decode_tokens_per_s, 1),
        "retrieval_size_prefill_ms_median_of_3": round(same_size, 1),
        "full_prompt_tokens": full_tokens,
        "full_prefill_ms": round(full_ms, 1),
        "full_prefill_tokens_per_s": round(full_tokens / (full_ms / 1000), 1),
        "prefill_ratio": round(full_ms / same_size, 1),
        "prefill_ratio_vs_the_turn": round(full_ms / g.prefill_ms, 1),
        "answer": turn.answer,
    }


def table(result: dict) -> str:
    t, a, idx = result["turn"], result["ask"], result["index"]
    rows = [
        ("index", f"{idx['files']} files, {idx['chunks']} chunks, {idx['embedded']} embedded ({idx['embedder']})"),
        ("retrieval prompt", f"{t['retrieval_prompt_tokens']} tokens: prefill {t['retrieval_prefill_ms']:.0f} ms "
                             f"({t['retrieval_prefill_tokens_per_s']:.0f} tok/s)"),
        ("same size, median of 3", f"{t['retrieval_size_prefill_ms_median_of_3']:.0f} ms"),
        ("full-context prompt", f"{t['full_prompt_tokens']} tokens: prefill {t['full_prefill_ms']:.0f} ms "
                                f"({t['full_prefill_tokens_per_s']:.0f} tok/s)"),
        ("prefill ratio", f"{t['prefill_ratio']:.1f}x cheaper (target >= {RATIO_TARGET:.0f}x): "
                          f"{'met' if t['prefill_ratio'] >= RATIO_TARGET else 'MISSED'}; "
                          f"{t['prefill_ratio_vs_the_turn']:.1f}x against the turn's own prefill"),
        ("retrieval over MCP", f"{t['retrieval_ms']:.1f} ms"),
        ("first token, warm turn", f"{t['first_token_ms']:.0f} ms (retrieve + plan + prefill)"),
        ("decode", f"{t['decode_tokens']} tokens at {t['decode_tokens_per_s']:.1f} tok/s"),
        ("bridge ask: first token", f"{a['ttft_ms']:.0f} ms from the command's start"),
        ("bridge ask: wall time", f"{a['wall_s']:.1f} s"),
        ("bridge ask: peak RSS", f"{a['peak_rss_mb']:.0f} MB (target <= {RSS_TARGET_MB:.0f}): "
                                 f"{'met' if a['peak_rss_mb'] <= RSS_TARGET_MB else 'MISSED'}"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default="static", help="static (default), minilm or hash")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--full-tokens", type=int, default=8000, help="size of the full-context prompt (<= 8191)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="chat-bench-") as tmp:
        corpus = copy_corpus(Path(tmp) / "stdlib")
        index_dir = Path(tmp) / "index"
        print("indexing the stdlib copy ...", file=sys.stderr)
        index = build(corpus, index_dir, args.embedder)
        print("bridge ask as a subprocess ...", file=sys.stderr)
        ask = ask_subprocess(corpus, index_dir, args.question)
        print(f"one turn in process, then a {args.full_tokens}-token prefill (slow) ...", file=sys.stderr)
        turn = in_process(corpus, index_dir, args.question, args.full_tokens)
    result = {
        "question": args.question,
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine()},
        "index": index,
        "ask": ask,
        "turn": turn,
        "targets": {"prefill_ratio": RATIO_TARGET, "peak_rss_mb": RSS_TARGET_MB},
        "reproduce": f"python bench/chat_bench.py --embedder {args.embedder} --full-tokens {args.full_tokens}",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    print(f"written {args.out}; reproduce with: {result['reproduce']}", file=sys.stderr)


if __name__ == "__main__":
    main()
