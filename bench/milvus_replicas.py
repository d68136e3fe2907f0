"""Two `bridge serve` replicas over one Milvus (a real `milvus-lite server`): identical answers for N
queries before, during and after a re-index, and the memory of a replica next to a local server.

    python bench/milvus_replicas.py REPO [--queries 100] [--embedder hash] [--json OUT.json]

Replicas are `bridge serve --milvus-uri URI` processes; queries are the first lines of a
deterministic sample of chunks, sent as `search_code` (hybrid). During: a rebuild of the same tree
(a new collection, then the alias moves) runs while the queries are asked. After: a file is added,
the one writer re-indexes, and both replicas must answer alike again (and find the new file).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import anyio
from support.milvus import MilvusLiteServer

from bridge.server.connect import connect
from index.milvus import MilvusStore, build_milvus
from index.search import Searcher


@contextmanager
def serve(args: list[str], env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """`bridge serve ... --port 0`: (URL, pid) once it prints its endpoint."""
    proc = subprocess.Popen([sys.executable, "-m", "bridge", "serve", *args, "--port", "0", "--audit-log", "off"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "MCP endpoint:" in line:
                url = line.split("MCP endpoint:", 1)[1].strip()
                threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
                yield url, proc.pid
                return
        raise RuntimeError(f"bridge serve {' '.join(args)} exited with {proc.wait()}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def ask(urls: list[str], queries: list[str]) -> list[list[list[tuple[str, int]]]]:
    """Each query to every URL in turn: answers[query][replica] = [(path, start_line), ...]."""
    async def main() -> list[list[list[tuple[str, int]]]]:
        out: list[list[list[tuple[str, int]]]] = []
        async with connect(urls[0]) as a, connect(urls[1]) as b:
            for q in queries:
                row = []
                for client in (a, b):
                    result = await client.call_tool("search_code", {"query": q, "k": 5})
                    row.append([(h["path"], h["start_line"]) for h in result.structured_content["hits"]])
                out.append(row)
        return out

    return anyio.run(main)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("repo", type=Path)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--embedder", default="hash")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="milvus-replicas-"))
    root = work / "repo"
    shutil.copytree(args.repo, root, ignore=shutil.ignore_patterns(".git"))
    env = dict(os.environ, BRIDGE_HOME=str(work / "home"))
    os.environ["BRIDGE_HOME"] = env["BRIDGE_HOME"]
    result: dict[str, Any] = {"repo": args.repo.name, "embedder": args.embedder}
    with ExitStack() as stack:
        milvus = MilvusLiteServer(work / "milvus").start()
        stack.callback(milvus.stop)
        store = MilvusStore(milvus.uri, root)
        build_milvus(root, store, embedder=args.embedder)
        reader = Searcher(store=store)
        rng = random.Random(13)
        queries: list[str] = []
        for cid in rng.sample(range(reader.manifest.chunks), args.queries * 3):
            line = next((x.strip() for x in reader.read_chunks([cid])[cid].text.splitlines() if len(x.strip()) > 8), "")
            if line and len(queries) < args.queries:
                queries.append(line[:300])
        urls, pids = [], []
        for _ in range(2):
            url, pid = stack.enter_context(serve(["--repo", str(root), "--milvus-uri", milvus.uri], env))
            urls.append(url)
            pids.append(pid)
        before = ask(urls, queries)
        rebuild = threading.Thread(target=lambda: build_milvus(root, MilvusStore(milvus.uri, root), embedder=args.embedder,
                                                               rebuild=True))
        rebuild.start()
        during = ask(urls, queries)
        overlapped = rebuild.is_alive()
        rebuild.join()
        (root / "quota_limits_bench.py").write_text("def enforce_quota_limit_bench(user):\n    return user.quota\n")
        build_milvus(root, MilvusStore(milvus.uri, root), embedder=args.embedder)
        after = ask(urls, [*queries, "enforce_quota_limit_bench"])
        result["queries"] = len(queries)
        result["identical"] = {name: sum(a == b for a, b in rows) for name, rows in
                               (("before", before), ("during", during), ("after", after[:-1]))}
        result["rebuild_still_running_after_during_queries"] = overlapped
        result["new_file_found_by_both"] = all(r[0][0] == "quota_limits_bench.py" for r in after[-1])
        result["replica_rss_mb"] = round(rss_mb(pids[0]), 1)
        url, pid = stack.enter_context(serve(["--repo", str(root), "--no-watch", "--embedder", args.embedder], env))
        ask([url, url], queries[:20])
        result["local_server_rss_mb"] = round(rss_mb(pid), 1)
        result["chunks"] = reader.manifest.chunks
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
