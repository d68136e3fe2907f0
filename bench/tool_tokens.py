"""What the MCP tool definitions cost a model's context: before (REV's tools) and after (this tree's).

    python -m bench.tool_tokens [--before cd91aed] [--llama-server PATH] [--runs 3]

For each tree (REV, extracted with `git archive`, and this working tree) a child process serves a
tiny repository's index and lists its tools through an in-memory MCP client. Counted with the
bundled model's tokenizer (SmolLM2-135M, as llama.cpp tokenizes it):
- `offered`: what a host hands the model, `[{"name", "description", "inputSchema"}]` per tool
  (llama-server, like OpenAI-style function calling, reads only these fields);
- `wire`: the whole tools/list result (with outputSchema and annotations), for reference.
Sets: `all` tools, the smallest useful set (`search_code,read_file`) and `search_code` alone; for
this tree each set is also served with `serve --tools` itself.

With a llama-server built by `bash scripts/setup.sh --llama-server` (or `--llama-server PATH`), also
through llama.cpp itself: llama-server hosts each tree's `serve --stdio` (`--mcp-servers-config`),
the tool definitions come from its `GET /tools`, and `/v1/chat/completions` gets the same one-line
message with and without them (max_tokens 1); `usage.prompt_tokens` gives the difference and
`timings.prompt_ms` the prefill time (median of --runs). SmolLM2's own chat template renders no
tools, so llama-server runs with a small ChatML template that lists them (TOOLS_TEMPLATE).

Targets (issue 36): all tools <= 600 tokens, search_code alone <= 200 (offered, bundled tokenizer).
Prints a table and writes bench/out/tool_tokens.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.paths import OUT, REPO, reproduce

__all__ = ["TOOLS_TEMPLATE", "count_tokens", "main", "run"]

SETS = {"all": None, "smallest": ("search_code", "read_file"), "search_code": ("search_code",)}
TARGETS = {"all": 600, "search_code": 200}
MESSAGE = "Where is the configuration file parsed?"
# ChatML that lists the offered tools in the system turn, so llama-server keeps them (SmolLM2's own
# template has no tools, and llama-server then drops them silently).
TOOLS_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nYou may call these tools:\n"
    "{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}<|im_end|>\n{%- endif %}"
    "{%- for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)
# Lists the tools of a tiny repository's server in a child process, for one tree and one set.
_DUMP = r"""
import asyncio, inspect, json, sys
from pathlib import Path
from mcp import Client
from bridge.server.app import ServeOptions, build_server, open_service
from bridge.server.repos import RepoSpec

repo, index_dir, names = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
service = open_service(ServeOptions(repos=(RepoSpec(repo, index_dir, no_vectors=True),), watch=False, audit_log=None))
try:
    subset = names != "all" and "tools" in inspect.signature(build_server).parameters
    server = build_server(service, tuple(names.split(","))) if subset else build_server(service)

    async def listing():
        async with Client(server) as client:
            return (await client.list_tools()).model_dump(mode="json", by_alias=True, exclude_none=True)

    print(json.dumps({"served_subset": subset, "result": asyncio.run(listing())}))
finally:
    service.close()
"""


def count_tokens(text: str, tokenizer: Any) -> int:
    return len(tokenizer.tokenize(text.encode("utf-8"), add_bos=False, special=False))


def _offered(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{key: tool[key] for key in ("name", "description", "inputSchema") if key in tool} for tool in tools]


def _tiny_repo(root: Path) -> Path:
    (root / "app").mkdir(parents=True)
    (root / "app" / "config.py").write_text(
        '"""Reads the settings file."""\n\n\ndef parse_config(path):\n    """Parse the TOML settings at path."""\n'
        "    with open(path) as f:\n        return f.read()\n"
    )
    (root / "app" / "main.py").write_text("from app.config import parse_config\n\n\ndef main():\n    parse_config('a.toml')\n")
    return root


def _tree(rev: str, work: Path) -> Path:
    """The project as of `rev`, extracted into `work` (the bench never checks anything out)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", rev], capture_output=True, check=True).stdout
    work.mkdir(parents=True)
    archive_path = work.parent / f"{work.name}.tar"
    archive_path.write_bytes(archive)
    with tarfile.open(archive_path) as tar:
        tar.extractall(work, filter="data")
    return work


def _list_tools(tree: Path, repo: Path, index_dir: Path, names: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "BRIDGE_HOME": str(index_dir.parent / "home")}
    # cwd=tree: `python -c` puts the working folder first on sys.path
    proc = subprocess.run([sys.executable, "-c", _DUMP, str(repo), str(index_dir), names],
                          cwd=tree, env=env, capture_output=True, text=True, check=False, timeout=300)
    if proc.returncode:
        raise RuntimeError(f"listing the tools of {tree} failed: {proc.stderr.strip()[-600:]}")
    data: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return data


def _token_rows(tree: Path, label: str, repo: Path, work: Path, tokenizer: Any) -> list[dict[str, Any]]:
    listing = _list_tools(tree, repo, work / f"index-{label}", "all")
    every = listing["result"]["tools"]
    rows = []
    for set_name, names in SETS.items():
        served = _list_tools(tree, repo, work / f"index-{label}", ",".join(names)) if names else listing
        tools = served["result"]["tools"] if served["served_subset"] or not names else every
        chosen = [t for t in tools if names is None or t["name"] in names]
        offered = _offered(chosen)
        rows.append({
            "tree": label, "set": set_name, "tools": [t["name"] for t in chosen],
            "served_with_tools_option": bool(names) and served["served_subset"],
            "offered_tokens": count_tokens(json.dumps(offered), tokenizer),
            "offered_chars": len(json.dumps(offered)),
            "wire_tokens": count_tokens(json.dumps({"tools": chosen}), tokenizer),
            "per_tool": {t["name"]: count_tokens(json.dumps(_offered([t])), tokenizer) for t in chosen},
        })
    return rows


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _http(url: str, body: dict[str, Any] | None = None, timeout: float = 120) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


@contextlib.contextmanager
def llama_server(exe: Path, model: Path, config: dict[str, Any], work: Path, template: str | None = None,
                 start_timeout: float = 180, env: dict[str, str] | None = None) -> Iterator[str]:
    """A llama-server hosting the MCP servers of `config` on a free loopback port; yields its URL.
    `env` (default: this process's) is also the MCP servers' environment, which llama-server passes on."""
    config_path = work / "mcp.json"
    config_path.write_text(json.dumps(config))
    port = _free_port()
    argv = [str(exe), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", "4096", "-t", "2",
            "--no-webui", "--mcp-servers-config", str(config_path)]
    if template is not None:
        (work / "template.jinja").write_text(template)
        argv += ["--jinja", "--chat-template-file", str(work / "template.jinja")]
    log = (work / "llama-server.log").open("w")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama-server exited {proc.returncode}: {(work / 'llama-server.log').read_text()[-800:]}")
            with contextlib.suppress(OSError, ValueError):
                if _http(f"{url}/health", timeout=2).get("status") == "ok":
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama-server not ready within {start_timeout:.0f} s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _prompt(url: str, tools: list[dict[str, Any]] | None) -> tuple[int, float]:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": MESSAGE}], "max_tokens": 1, "cache_prompt": False}
    if tools:
        body["tools"] = tools
    answer = _http(f"{url}/v1/chat/completions", body)
    return int(answer["usage"]["prompt_tokens"]), float(answer.get("timings", {}).get("prompt_ms", 0.0))


def _llama_rows(exe: Path, model: Path, trees: dict[str, Path], repo: Path, work: Path, runs: int) -> list[dict[str, Any]]:
    rows = []
    for label, tree in trees.items():
        server_work = work / f"llama-{label}"
        server_work.mkdir()
        config = {"mcpServers": {"bridge": {
            "command": sys.executable,
            "args": ["-m", "bridge", "serve", "--stdio", "--repo", str(repo), "--index-dir", str(work / f"index-{label}"),
                     "--no-watch", "--audit-log", "off"],
            "env": {"PYTHONPATH": str(tree), "BRIDGE_HOME": str(work / "home")},
            "cwd": str(tree),
            "timeout_ms": 120000,
        }}}
        with llama_server(exe, model, config, server_work, TOOLS_TEMPLATE) as url:
            listed = [t for t in _http(f"{url}/tools") if t.get("type") == "mcp"]
            for set_name, names in SETS.items():
                chosen = [t["definition"] for t in listed if names is None or t["tool"].removeprefix("bridge_") in names]
                bare = [_prompt(url, None) for _ in range(runs)]
                offered = [_prompt(url, chosen) for _ in range(runs)]
                rows.append({
                    "tree": label, "set": set_name, "tools": len(chosen),
                    "prompt_tokens_without": bare[0][0], "prompt_tokens_with": offered[0][0],
                    "added_tokens": offered[0][0] - bare[0][0],
                    "prefill_ms_without": round(statistics.median(ms for _, ms in bare), 1),
                    "prefill_ms_with": round(statistics.median(ms for _, ms in offered), 1),
                })
    return rows


def _cpu() -> dict[str, Any]:
    flags: list[str] = []
    model = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = sorted(f for f in line.split(":", 1)[1].split() if f.startswith(("avx", "amx", "fma", "f16c")))
                break
    return {"model": model, "cpus": os.cpu_count(), "features": flags}


def default_llama_server() -> Path | None:
    """The llama-server `scripts/setup.sh --llama-server` built (BRIDGE_LLAMA_SERVER wins), if any."""
    if os.environ.get("BRIDGE_LLAMA_SERVER"):
        return Path(os.environ["BRIDGE_LLAMA_SERVER"])
    root = Path(os.environ.get("BRIDGE_LLAMA_SERVER_DIR") or Path.home() / ".cache" / "mcp-retrieval-bridge" / "llama-server")
    found = sorted(root.glob("*/bin/llama-server"))
    return found[0] if found else None


def run(before: str, exe: Path | None, runs: int, work: Path) -> dict[str, Any]:
    from llama_cpp import Llama

    from bridge.llm.gguf import bundled_model_path

    model = bundled_model_path()
    tokenizer = Llama(model_path=str(model), vocab_only=True, verbose=False)
    repo = _tiny_repo(work / "repo")
    trees = {"before": _tree(before, work / "before"), "after": REPO}
    rows = [row for label, tree in trees.items() for row in _token_rows(tree, label, repo, work, tokenizer)]
    llama = _llama_rows(exe, model, trees, repo, work, runs) if exe is not None and exe.is_file() else []
    after = {row["set"]: row["offered_tokens"] for row in rows if row["tree"] == "after"}
    return {
        "before": before, "tokenizer": model.name, "message": MESSAGE, "cpu": _cpu(),
        "tokens": rows, "llama_server": llama or f"not measured: no llama-server ({exe or 'none built'})",
        "targets": {name: {"limit": limit, "after": after[name], "met": after[name] <= limit} for name, limit in TARGETS.items()},
    }


def _table(result: dict[str, Any]) -> str:
    lines = [f"{'tree':7} {'set':12} {'offered':>8} {'wire':>6}  per tool (offered)"]
    for row in result["tokens"]:
        per = ", ".join(f"{name} {n}" for name, n in row["per_tool"].items())
        lines.append(f"{row['tree']:7} {row['set']:12} {row['offered_tokens']:8d} {row['wire_tokens']:6d}  {per}")
    if isinstance(result["llama_server"], list):
        lines.append(f"\nllama-server, {result['message']!r}: prompt tokens without -> with tools (prefill ms)")
        for row in result["llama_server"]:
            lines.append(f"{row['tree']:7} {row['set']:12} {row['prompt_tokens_without']:5d} -> {row['prompt_tokens_with']:5d}"
                         f"  +{row['added_tokens']:5d}  ({row['prefill_ms_without']} -> {row['prefill_ms_with']} ms)")
    else:
        lines.append(f"\nllama-server: {result['llama_server']}")
    for name, target in result["targets"].items():
        lines.append(f"target {name} <= {target['limit']}: {target['after']} ({'met' if target['met'] else 'MISSED'})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="cd91aed", help="Revision whose tools are 'before' (default: cd91aed).")
    parser.add_argument("--llama-server", type=Path, default=None, help="llama-server executable (default: the built one).")
    parser.add_argument("--runs", type=int, default=3, help="Requests per measurement (median prefill time).")
    parser.add_argument("--out", type=Path, default=OUT / "tool_tokens.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tool-tokens-") as tmp:
        result = run(args.before, args.llama_server or default_llama_server(), args.runs, Path(tmp))
    result["reproduce"] = reproduce("bench.tool_tokens", argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(_table(result))
    print(json.dumps(result["targets"]))
    print(result["reproduce"])


if __name__ == "__main__":
    main()
