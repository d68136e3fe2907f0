"""`bridge index`, `bridge search`, `bridge status`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from bridge.cli.common import ProgressBars, console, emit_json, fail, resolve_index, to_jsonable

__all__ = ["register", "search_json"]

RepoOpt = typer.Option(None, "--repo", help="Repository root (default: the current folder).")
IndexDirOpt = typer.Option(None, "--index-dir", help="Index folder (default: one per repository under BRIDGE_HOME).")
JsonOpt = typer.Option(False, "--json", help="Print one JSON document to stdout.")


def search_json(result: object) -> dict:
    """The `bridge search --json` shape of INTERFACES.md (also the MCP `search_code` result)."""
    data = to_jsonable(result)
    return {
        "query": data["query"],
        "mode": data["mode"],
        "took_ms": round(data["took_ms"], 3),
        "load_ms": round(data.get("load_ms", 0.0), 3),
        "hits": data["hits"],
        "truncated": data["truncated"],
        "index": data["index"],
    }


def index_cmd(
    path: Path = typer.Argument(..., help="Repository to index."),
    index_dir: Optional[Path] = IndexDirOpt,
    watch: bool = typer.Option(False, "--watch", help="Keep re-indexing changed files until interrupted."),
    no_vectors: bool = typer.Option(False, "--no-vectors", help="Lexical (BM25) only; no embedding."),
    embedder: str = typer.Option(
        "minilm", "--embedder", help="minilm (bundled all-MiniLM-L6-v2), static (fast), or a sentence-transformers folder."
    ),
    rebuild: bool = typer.Option(False, "--rebuild", help="Rebuild from scratch, ignoring the previous index."),
    max_file_bytes: int = typer.Option(1024 * 1024, "--max-file-bytes", min=1, help="Skip files larger than this."),
    exclude: list[str] = typer.Option([], "--exclude", help="Extra gitignore-style pattern to skip (repeatable)."),
    include: list[str] = typer.Option([], "--include", help="Pattern that overrides the secret-file rules (repeatable)."),
    json_out: bool = JsonOpt,
) -> None:
    """Index a repository: BM25 at once, then dense vectors (cached by content)."""
    from index.build import BuildOptions, build_index, fill_vectors
    from index.types import Selection

    if not path.exists():
        fail(f"no such folder: {path}: pass the repository root")
    root, where = resolve_index(path, index_dir)
    options = BuildOptions(
        selection=Selection(max_file_bytes=max_file_bytes, exclude=tuple(exclude), include=tuple(include)),
        embedder=None if no_vectors else _embedder_spec(embedder),
        rebuild=rebuild,
    )
    with ProgressBars(enabled=not json_out) as bars:
        report = build_index(root, where, options, bars)
        fill = None if no_vectors else fill_vectors(where, bars)
    if json_out and not watch:
        emit_json({"build": report, "vectors": fill})
    elif not json_out:
        _print_report(report, fill)
    if watch:
        from index.watch import watch_and_index

        console.print(f"watching {root} for changes (Ctrl-C to stop)")
        for kind, value in watch_and_index(root, where, options):
            if json_out:
                emit_json({"event": kind, "report": value if kind != "error" else str(value)})
            elif kind == "build":
                _print_report(value, None)
            elif kind == "fill":
                console.print(f"vectors: {value.embedded_chunks}/{value.chunks} chunks")
            else:
                console.print(f"[red]error:[/] {value}", markup=True)


def _embedder_spec(spec: str) -> str:
    if spec in ("minilm", "minilm-torch", "static", "hash"):
        return spec
    folder = Path(spec).expanduser()
    if not folder.is_dir():
        fail(f"--embedder {spec!r} is neither minilm, static nor a folder: pass a sentence-transformers folder")
    return str(folder.resolve())


def _print_report(report: object, fill: object) -> None:
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(report.skipped.items()) if n) or "none"
    if report.changed:
        console.print(
            f"indexed {report.files} files into {report.chunks} chunks "
            f"({report.reused_chunks} reused, {report.new_chunks} new); skipped: {skipped}"
        )
    else:
        console.print(f"index is up to date: {report.files} files, {report.chunks} chunks")
    if report.invalid_utf8:
        console.print(f"{report.invalid_utf8} files had invalid UTF-8 (decoded with replacement)")
    if fill is not None:
        state = "complete" if fill.complete else "partial (run `bridge index` again to finish)"
        console.print(f"vectors: {fill.embedded_chunks}/{fill.chunks} chunks, {state}")
    console.print(f"index: {report.index_dir}")


def search_cmd(
    query: str = typer.Argument(..., help="What to look for: identifiers, error text, or a description."),
    repo: Optional[Path] = RepoOpt,
    index_dir: Optional[Path] = IndexDirOpt,
    k: int = typer.Option(5, "-k", help="Number of hits (1-50)."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="Token budget for all hits together."),
    path_glob: Optional[str] = typer.Option(None, "--path-glob", help="Only paths matching this glob, e.g. 'src/**/*.py'."),
    mode: str = typer.Option("hybrid", "--mode", help="hybrid, lexical or vector."),
    json_out: bool = JsonOpt,
) -> None:
    """Search the index of a repository."""
    from index.search import Searcher

    _, where = resolve_index(repo, index_dir)
    result = Searcher(where).search(query, k=k, mode=mode, max_tokens=max_tokens, path_glob=path_glob)
    if json_out:
        emit_json(search_json(result))
        return
    for n, hit in enumerate(result.hits, 1):
        ranks = f"lexical #{hit.lexical_rank or '-'}, vector #{hit.vector_rank or '-'}"
        symbol = f"  {hit.symbol}" if hit.symbol else ""
        console.print(f"[bold]{n}. {hit.path}:{hit.start_line}-{hit.end_line}[/]{symbol}  ({hit.score:.4f}; {ranks})", markup=True)
        console.print(hit.text, markup=False, highlight=False)
        console.print()
    note = " (last hit cut to fit --max-tokens)" if result.truncated else ""
    load = f" (+{result.load_ms:.0f} ms loading the query model)" if result.load_ms else ""
    console.print(f"{len(result.hits)} hits in {result.took_ms:.1f} ms{load}{note}; {_freshness(result.index)}")


def _freshness(info: object) -> str:
    stale = f", {info.stale_files} files changed since" if info.stale_files else ""
    return f"index built {info.built_at}{stale}; {info.embedded_chunks}/{info.chunks} chunks embedded"


def status_cmd(repo: Optional[Path] = RepoOpt, index_dir: Optional[Path] = IndexDirOpt, json_out: bool = JsonOpt) -> None:
    """Show what is indexed, how fresh it is and how much is embedded."""
    from index.search import Searcher

    _, where = resolve_index(repo, index_dir)
    searcher = Searcher(where)
    searcher.verify()
    info = searcher.info()
    manifest = searcher.manifest
    data = {
        **to_jsonable(info),
        "index_dir": str(where),
        "embedder": manifest.embedder,
        "embedded_fraction": round(info.embedded_chunks / info.chunks, 4) if info.chunks else 0.0,
        "skipped": manifest.stats.get("skipped", {}),
        "invalid_utf8": manifest.stats.get("invalid_utf8", 0),
        "format_version": manifest.format_version,
    }
    if json_out:
        emit_json(data)
        return
    console.print(f"repository: {info.root}\nindex: {where}")
    console.print(f"{info.files} files, {info.chunks} chunks; {_freshness(info)}")
    console.print(f"embedder: {manifest.embedder or 'none (lexical only)'}; embedded {data['embedded_fraction']:.0%}")


def register(app: typer.Typer) -> None:
    app.command("index")(index_cmd)
    app.command("search")(search_cmd)
    app.command("status")(status_cmd)
