"""Helpers shared by the CLI commands: the stderr console, errors, JSON output, index location."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

__all__ = [
    "MilvusOpt",
    "MilvusTokenOpt",
    "ProgressBars",
    "console",
    "emit_json",
    "fail",
    "milvus_token",
    "read_query",
    "resolve_index",
    "to_jsonable",
]

console = Console(stderr=True, highlight=False, soft_wrap=True)


def _milvus_installed(uri: str | None) -> str | None:
    """Any --milvus-uri needs the milvus extra: say so before anything else runs."""
    if uri:
        from bridge.extras import require

        require("pymilvus", "--milvus-uri")
    return uri


MilvusOpt = typer.Option(
    None, "--milvus-uri", envvar="BRIDGE_MILVUS_URI", callback=_milvus_installed,
    help="Keep the index on Milvus: http(s)://HOST:PORT for a server, a local path for embedded Milvus Lite.",
)
MilvusTokenOpt = typer.Option(None, "--milvus-token-env", help="Environment variable holding the Milvus token.")


def milvus_token(token_env: str | None) -> str | None:
    """The Milvus token from the variable `--milvus-token-env` names (None without the option)."""
    import os

    if not token_env:
        return None
    token = os.environ.get(token_env)
    if not token:
        fail(f"--milvus-token-env {token_env}: that variable is empty; export the Milvus token in it")
    return token


def fail(message: str, code: int = 1) -> NoReturn:
    console.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)  # "[chat]" is text
    raise SystemExit(code)


def read_query(text: str) -> str:
    """The query argument, or standard input when it is `-` (a pasted report: `bridge search - < bug.md`)."""
    if text != "-":
        return text
    if sys.stdin.isatty():
        fail("`-` reads the query from standard input: pipe or redirect it, e.g. `bridge search - < report.md`", code=2)
    # Bytes of another encoding (a Latin-1 log) become U+FFFD rather than a crash in a tokenizer.
    return sys.stdin.buffer.read().decode("utf-8", "replace")


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(to_jsonable(value), ensure_ascii=False) + "\n")
    sys.stdout.flush()


def resolve_index(repo: Path | None, index_dir: Path | None) -> tuple[Path | None, Path]:
    """(repository root or None, index folder) from `--repo` / `--index-dir`. Without either: the
    working directory, or the nearest folder above it that has an index (searching from `src/`
    of an indexed repository searches the repository)."""
    from index.store import IndexDir, default_index_dir

    if repo is not None and not repo.expanduser().is_dir():
        fail(f"no folder at {repo}: pass the repository root with --repo")
    if index_dir is not None:
        return (repo.expanduser().resolve() if repo else None), index_dir.expanduser().resolve()
    if repo is not None:
        root = repo.expanduser().resolve()
        return root, default_index_dir(root)
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if IndexDir(default_index_dir(folder)).exists():
            return folder, default_index_dir(folder)
    return here, default_index_dir(here)


class ProgressBars:
    """Renders `index.types.Progress` callbacks as rich progress bars on stderr."""

    _LABELS = {"discover": "files", "chunk": "chunking", "lexical": "BM25", "subjects": "commits", "embed": "embedding",
               "write": "writing"}

    def __init__(self, enabled: bool = True) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description:>10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not enabled,
            transient=False,
        )
        self._tasks: dict[str, Any] = {}
        self._started: dict[str, float] = {}

    def __enter__(self) -> ProgressBars:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.__exit__(*exc)

    def __call__(self, p: Any) -> None:
        import time

        now = time.perf_counter()
        if p.stage not in self._tasks:
            self._started[p.stage] = now
            self._tasks[p.stage] = self._progress.add_task(self._LABELS.get(p.stage, p.stage), total=p.total, rate="")
        elapsed = now - self._started[p.stage]
        rate = f"{p.done / elapsed:,.0f}/s" if elapsed > 0.5 and p.done else ""
        self._progress.update(self._tasks[p.stage], completed=p.done, total=p.total, rate=rate)
