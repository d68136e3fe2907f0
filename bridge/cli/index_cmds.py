"""`bridge index`, `bridge search`, `bridge status`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from bridge.cli.common import (
    MilvusOpt,
    MilvusTokenOpt,
    ProgressBars,
    console,
    emit_json,
    fail,
    milvus_token,
    read_query,
    resolve_index,
    to_jsonable,
)

if TYPE_CHECKING:
    from index.build import BuildOptions, BuildReport, FillReport
    from index.history import HistoryReport
    from index.milvus import MilvusStore
    from index.search import Searcher
    from index.types import IndexInfo

__all__ = ["register"]

RepoOpt = typer.Option(None, "--repo", help="Repository root (default: the current folder).")
IndexDirOpt = typer.Option(None, "--index-dir", help="Index folder (default: one per repository under BRIDGE_HOME).")
JsonOpt = typer.Option(False, "--json", help="Print one JSON document to stdout.")


def milvus_store(root: Path, uri: str, token_env: str | None) -> MilvusStore:
    """The Milvus store of one repository; the token comes from the named variable."""
    from index.milvus import MilvusStore

    return MilvusStore(uri, root, milvus_token(token_env))


def index_cmd(
    path: Path = typer.Argument(..., help="Repository to index."),
    index_dir: Path | None = IndexDirOpt,
    watch: bool = typer.Option(False, "--watch", help="Keep re-indexing changed files until interrupted."),
    no_vectors: bool = typer.Option(False, "--no-vectors", help="Lexical (BM25) only; no embedding."),
    embedder: str | None = typer.Option(
        None, "--embedder",
        help="minilm (bundled all-MiniLM-L6-v2; the default when the dense extra is installed, else BM25 only; "
             "int8 where the CPU has no AMX, BRIDGE_MINILM_PRECISION=fp32 keeps float), minilm-int8, "
             "static (fast), or a sentence-transformers folder.",
    ),
    rebuild: bool = typer.Option(False, "--rebuild", help="Rebuild from scratch, ignoring the previous index."),
    no_history: bool = typer.Option(False, "--no-history", help="Leave the git history out (no past-commit evidence)."),
    max_file_bytes: int = typer.Option(1024 * 1024, "--max-file-bytes", min=1, help="Skip files larger than this."),
    exclude: list[str] = typer.Option([], "--exclude", help="Extra gitignore-style pattern to skip (repeatable)."),
    include: list[str] = typer.Option([], "--include", help="Pattern that overrides the secret and lock-file rules (repeatable)."),
    json_out: bool = JsonOpt,
    milvus_uri: str | None = MilvusOpt,
    milvus_token_env: str | None = MilvusTokenOpt,
) -> None:
    """Index a repository: BM25 at once, then dense vectors (cached by content)."""
    from index.build import BuildOptions, build_index, fill_vectors
    from index.types import Selection

    if not path.exists():
        fail(f"no such folder: {path}: pass the repository root")
    if not path.is_dir():
        fail(f"{path} is a file: pass the folder of the repository to index")
    root, where = path.resolve(), resolve_index(path, index_dir)[1]
    spec = None if no_vectors else _embedder_spec(embedder)
    if spec is None and not no_vectors and not json_out:
        console.print(f"vectors: skipped, {NO_DENSE}", markup=False)
    options = BuildOptions(
        selection=Selection(max_file_bytes=max_file_bytes, exclude=tuple(exclude), include=tuple(include)),
        embedder=spec,
        rebuild=rebuild,
        history=not no_history,
    )
    if milvus_uri:
        if watch:
            fail("--watch writes a local index; with --milvus-uri run `bridge index` again after changes (one writer)")
        _index_milvus(root, milvus_store(root, milvus_uri, milvus_token_env), options, json_out)
        return
    with ProgressBars(enabled=not json_out) as bars:
        report = build_index(root, where, options, bars)
        fill = None if spec is None else fill_vectors(where, bars)
    names = _skipped_names(root, options, report)
    if json_out and not watch:
        emit_json({"build": report, "vectors": fill, "skipped_by_name": names})
    elif not json_out:
        _print_report(report, fill, names)
    if watch:
        from index.build import BuildReport, FillReport, watch_and_index

        console.print(f"watching {root} for changes (Ctrl-C to stop)")
        for kind, value in watch_and_index(root, where, options):
            if json_out:
                emit_json({"event": kind, "report": value if kind != "error" else str(value)})
            elif isinstance(value, BuildReport):
                _print_report(value, None)
            elif isinstance(value, FillReport):
                console.print(f"vectors: {value.embedded_chunks}/{value.chunks} chunks")
            else:
                console.print(f"[red]error:[/] {value}", markup=True)


def _index_milvus(root: Path, store: MilvusStore, options: BuildOptions, json_out: bool) -> None:
    from index.milvus import build_milvus

    with ProgressBars(enabled=not json_out) as bars:
        name, changed, manifest, seconds = build_milvus(
            root, store, options.selection, (options.target_tokens, options.max_tokens, options.overlap_lines),
            options.embedder, options.rebuild, bars,
        )
    data = {"milvus_uri": store.uri, "alias": store.alias, "collection": name, "changed": changed,
            "files": len(manifest.files), "chunks": manifest.chunks, "seconds": seconds}
    if json_out:
        emit_json(data)
    elif changed:
        console.print(f"indexed {data['files']} files into {manifest.chunks} chunks on {store.location}: {name}")
    else:
        console.print(f"index on {store.location} is up to date: {data['files']} files, {manifest.chunks} chunks")


NO_DENSE = "the dense extra is not installed: BM25 and history only (pip install 'mcp-retrieval-bridge[dense]' adds vectors)"


def _embedder_spec(spec: str | None) -> str | None:
    """The embedder to index with; None (BM25 only) when none was asked for and the dense extra is missing."""
    from bridge.extras import DENSE_MODULES, installed, require

    if spec is None:
        return "minilm" if all(installed(m) for m in DENSE_MODULES) else None
    if spec == "hash":  # the test embedder: no model, but its vectors live in faiss
        require("faiss", "--embedder hash")
        return spec
    require(DENSE_MODULES, f"--embedder {spec}")
    if spec in ("minilm", "minilm-int8", "minilm-torch", "static"):
        return spec
    folder = Path(spec).expanduser()
    if not folder.is_dir():
        fail(f"--embedder {spec!r} is none of minilm, minilm-int8, minilm-torch, static or a folder: "
             "pass one, or a sentence-transformers folder")
    return str(folder.resolve())


def _skipped_names(root: Path, options: BuildOptions, report: BuildReport) -> dict[str, list[str]]:
    """The secrets and lock files the build skipped, by name, when it skipped any."""
    from index.files import skipped_by_name

    if not (report.skipped.get("secret") or report.skipped.get("lock_file")):
        return {}
    return skipped_by_name(root, options.selection)


def _print_report(report: BuildReport, fill: FillReport | None, names: dict[str, list[str]] | None = None) -> None:
    from bridge.server.render import counted

    skipped = ", ".join(f"{n} {why}" for why, n in sorted(report.skipped.items()) if n) or "none"
    if report.changed:
        console.print(
            f"indexed {counted(report.files, 'file')} into {counted(report.chunks, 'chunk')} "
            f"({report.reused_chunks} reused, {report.new_chunks} new); skipped: {skipped}"
        )
    else:
        console.print(f"index is up to date: {counted(report.files, 'file')}, {counted(report.chunks, 'chunk')}")
    for reason, paths in (names or {}).items():
        shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        console.print(f"skipped as {reason.replace('_', ' ')}: {shown} (`--include PATTERN` indexes one)")
    if report.invalid_utf8:
        console.print(f"{report.invalid_utf8} files had invalid UTF-8 (decoded with replacement)")
    console.print(_history_built(report.history))
    if fill is not None:
        state = "complete" if fill.complete else "partial (run `bridge index` again to finish)"
        console.print(f"vectors: {fill.embedded_chunks}/{fill.chunks} chunks, {state}")
        console.print(_embedder_line(fill.embedder))
    console.print(f"index: {report.index_dir}")


def _embedder_line(spec: str | None) -> str:
    if spec is None:
        return "embedder: none (lexical only)"
    path = _embedder_path(spec)
    return f"embedder: {spec} ({path})" if path else f"embedder: {spec}"


def _embedder_path(spec: str | None) -> str | None:
    """How this machine computes a MiniLM index's vectors (None for other embedders, or without the dense extra)."""
    from bridge.extras import DENSE_MODULES, installed

    if spec not in ("minilm", "minilm-int8") or not all(installed(m) for m in DENSE_MODULES):
        return None
    from index.embed import describe_path

    return describe_path(spec)


def _known_mode(value: str) -> str:
    if value not in ("hybrid", "lexical", "vector"):
        raise typer.BadParameter(f"{value!r}: use hybrid, lexical or vector")
    return value


def search_cmd(
    query: str = typer.Argument(..., help="What to look for: identifiers, error text, a description, or a whole bug "
                                          "report (≤ 64 KB); `-` reads it from standard input."),
    repo: Path | None = RepoOpt,
    index_dir: Path | None = IndexDirOpt,
    k: int = typer.Option(5, "-k", min=1, max=50, help="Most hits to show (1-50)."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1, help="Token budget for all hits together."),
    path_glob: str | None = typer.Option(None, "--path-glob", help="Only paths matching this glob, e.g. 'src/**/*.py'."),
    mode: str = typer.Option("hybrid", "--mode", callback=_known_mode, help="hybrid, lexical or vector."),
    json_out: bool = JsonOpt,
    milvus_uri: str | None = MilvusOpt,
    milvus_token_env: str | None = MilvusTokenOpt,
) -> None:
    """Search the index of a repository."""
    query = read_query(query)
    searcher = _searcher(repo, index_dir, milvus_uri, milvus_token_env)
    result = searcher.search(query, k=k, mode=mode, max_tokens=max_tokens, path_glob=path_glob)
    from bridge.server.render import counted, no_word_in_common

    if result.note:  # e.g. vectors this install cannot read: searched without them (one line, on stderr)
        console.print(f"note: {result.note}", markup=False, highlight=False)
    if json_out:
        from bridge.server.models import SearchCodeResult

        emit_json(SearchCodeResult.from_result(result))
        return
    if result.truncated and not result.hits:
        fail(f"no hit fits in --max-tokens {max_tokens}: raise it (a hit is a few dozen tokens at least)")
    for n, hit in enumerate(result.hits, 1):
        ranks = f"lexical #{hit.lexical_rank or '-'}, vector #{hit.vector_rank or '-'}"
        symbol = f"  {hit.symbol}" if hit.symbol else ""
        console.print(f"[bold]{n}. {hit.path}:{hit.start_line}-{hit.end_line}[/]{symbol}  ({hit.score:.4f}; {ranks})", markup=True)
        for line in hit.evidence:
            console.print(f"  {line}", markup=False, highlight=False)
        console.print(hit.text, markup=False, highlight=False)
        console.print()
    note = " (last hit cut to fit --max-tokens)" if result.truncated else ""
    load = f" (+{result.load_ms:.0f} ms loading the query model)" if result.load_ms else ""
    console.print(f"{counted(len(result.hits), 'hit')} in {result.took_ms:.1f} ms{load}{note}; {_freshness(result.index)}")
    if no_word_in_common(result):
        console.print("No hit shares a word with the query: these are nearest by meaning only.")


def _freshness(info: IndexInfo) -> str:
    from bridge.server.render import counted

    stale = f", {counted(info.stale_files, 'file')} changed since" if info.stale_files else ""
    return f"index built {info.built_at}{stale}; {info.embedded_chunks}/{info.chunks} chunks embedded"


def _searcher(repo: Path | None, index_dir: Path | None, milvus_uri: str | None, token_env: str | None) -> Searcher:
    from index.search import Searcher
    from index.store import IndexDir

    root, where = resolve_index(repo, index_dir)
    if root is not None and not milvus_uri and index_dir is None and not IndexDir(where).exists():
        fail(f"{root} has no index yet: run `bridge index {root}` first")
    if milvus_uri:
        return Searcher(store=milvus_store(root or Path.cwd().resolve(), milvus_uri, token_env))
    return Searcher(where)


def status_cmd(
    repo: Path | None = RepoOpt, index_dir: Path | None = IndexDirOpt, json_out: bool = JsonOpt,
    milvus_uri: str | None = MilvusOpt, milvus_token_env: str | None = MilvusTokenOpt,
) -> None:
    """Show what is indexed, how fresh it is and how much is embedded."""
    searcher = _searcher(repo, index_dir, milvus_uri, milvus_token_env)
    where = searcher.store.location
    searcher.verify()
    info = searcher.info()
    manifest = searcher.manifest
    data = {
        **to_jsonable(info),
        "index_dir": where,
        "embedder": manifest.embedder,
        "embedder_path": _embedder_path(manifest.embedder),
        "embedded_fraction": round(info.embedded_chunks / info.chunks, 4) if info.chunks else 0.0,
        "skipped": manifest.stats.get("skipped", {}),
        "invalid_utf8": manifest.stats.get("invalid_utf8", 0),
        "format_version": manifest.format_version,
        "history": _history_status(searcher),
        "new_files": None if milvus_uri else _new_files(searcher),
        "note": searcher.dense_missing,  # e.g. vectors this install cannot read: counted as 0 embedded here
    }
    if json_out:
        emit_json(data)
        return
    console.print(f"repository: {info.root}\nindex: {where}")
    console.print(f"{info.files} files, {info.chunks} chunks; {_freshness(info)}")
    if data["new_files"]:
        n = data["new_files"]
        console.print(f"{n} new {'file' if n == 1 else 'files'} on disk not indexed yet: run `bridge index {info.root}`")
    console.print(f"{_embedder_line(manifest.embedder)}; embedded {data['embedded_fraction']:.0%}")
    if searcher.dense_missing:
        console.print(f"note: {searcher.dense_missing}", markup=False, highlight=False)
    console.print(_history_line(data["history"], manifest.embedder is not None, info.root))


_NOT_GIT = "history: none (not a git repository)"


def _history_built(history: HistoryReport | None) -> str:
    if history is None:
        return "history: off (--no-history); a plain `bridge index` indexes it again"
    if history.head is None:
        return _NOT_GIT
    return f"history: {history.commits} past commits ({history.new_commits} new)"


def _new_files(searcher: Searcher) -> int | None:
    """How many selected text files on disk the index lacks (added since the build); None when
    the repository folder is gone."""
    from index.build import selection_from_json
    from index.errors import IndexingError
    from index.files import unindexed_paths

    manifest = searcher.manifest
    try:
        return len(unindexed_paths(Path(manifest.root), selection_from_json(manifest.selection), manifest.files,
                                   (Path(searcher.store.location),)))
    except IndexingError:
        return None


def _history_status(searcher: Searcher) -> dict[str, object] | None:
    history = searcher.history()
    if history is None:
        return None
    return {"commits": len(history.commits), "subjects_embedded": history.subjects is not None}


def _history_line(history: dict[str, object] | None, embedded: bool, root: str = "") -> str:
    if history is None:
        from index.history import git_location

        if root and git_location(Path(root)) is not None:
            return "history: off (indexed with --no-history; a plain `bridge index` indexes it again)"
        return _NOT_GIT
    line = f"history: {history['commits']} past commits"
    if embedded and not history["subjects_embedded"]:
        line += "; their subjects are not embedded yet (`bridge index` embeds them)"
    return line


def register(app: typer.Typer) -> None:
    app.command("index")(index_cmd)
    app.command("search")(search_cmd)
    app.command("status")(status_cmd)
