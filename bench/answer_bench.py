"""Answer quality: retrieval under the budget vs the same model given the first n_ctx tokens of the repository.

    python -m bench.answer_bench [--questions bench/answer_questions.jsonl] [--flask PATH] [--n-ctx 2048]
                                 [--answer-reserve 256] [--llm-url URL] [--limit N] [--arms retrieval,full]

Repositories, by the `repo` field of each question: `self` (this checkout), `stdlib` (a copy of this
Python's standard library without tests, made under $BRIDGE_BENCH_HOME/answer), `flask` (a tree given
by --flask or BRIDGE_BENCH_FLASK, e.g. a shared/bench corpus). Questions of a repository that is not
at hand are skipped and counted. Each repository gets a BM25 index (plus static vectors with
--embedder static), built once.

Arms, on the same runtime (the bundled SmolLM2 by default, or --llm-url):
- retrieval: one `bridge ask` turn through the in-process MCP server (ChatSession), as a user gets it;
- full: no retrieval; the prompt holds the repository's files in path order, each headed by its
  `path:1-N` citation, cut at the room n_ctx leaves after the system prompt, the question and the
  answer reserve (the truncated "whole repository in the context" baseline). The same decoding,
  loop guard and answer checks as the product, but no opening name (it has no best snippet to take
  names from; bridge/chat/lead.py). The context is identical for every question of a
  repository, so llama.cpp reuses it from the KV cache after the first question: its time is the
  question's prefill plus decoding, which favours this arm.

Answers of a small model are grounded as the product grounds them (bridge/chat/grounding.py; the
full arm against its context); per arm the report counts shown answers with a code line found in no
retrieved snippet and with a citation of a source not retrieved, and answer_contains in the shown
words and in the model's text before grounding.

`--seed N` samples with another seed than the product's 0 (what sampling alone moves); `--fences on`
lets a grounded small model open ``` blocks, as it could before 2026-12-07, and `--lead off` lets its
answer open freely rather than with a name the best snippet defines (the comparisons for those changes).

Per arm: loop rate (the model's text had a word 6-gram three times, i.e. the loop guard fired),
free-text citation rate and citation rate with the grammar-picked Sources line (see bridge.chat.session),
loop rate of the shown answer, citation rate (the model's own text cites a source it was given as
path:start-end), unknown-citation rate, answer_contains rate (every listed string appears,
case-insensitive), gold-in-context rate, usable rate, median and total seconds. Writes
bench/out/answers.json and bench/out/answers.md (table plus every answer).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench.answer_scoring import Question, Scored, by_repo, load_questions, score, summary, table
from bench.paths import OUT, REPO, bench_home
from bridge.chat.answers import LoopGuard, Span, finish_answer
from bridge.chat.grounding import ground, grounds
from bridge.chat.prompt import render_question, render_snippet, system_prompt
from bridge.chat.session import ChatSession, open_runtime, pick_sources
from bridge.chat.settings import Settings, load_settings
from bridge.llm.runtime import Decoding, Message, Runtime, decoding_for

QUESTIONS = REPO / "bench" / "answer_questions.jsonl"


# --- repositories ------------------------------------------------------------------------------


def stdlib_copy() -> Path:
    from bench.load_bench import copy_corpus

    where = bench_home() / "answer" / "stdlib"
    if not where.is_dir():
        where.parent.mkdir(parents=True, exist_ok=True)
        copy_corpus(where)
    return where


def repo_roots(flask: Path | None, wanted: set[str]) -> dict[str, Path]:
    roots: dict[str, Path] = {}
    if "self" in wanted:
        roots["self"] = REPO
    if "stdlib" in wanted:
        roots["stdlib"] = stdlib_copy()
    if "flask" in wanted and flask is not None:
        if not flask.is_dir():
            raise SystemExit(f"no folder at {flask}: pass a flask source tree with --flask")
        roots["flask"] = flask.resolve()
    return roots


def index_dir_for(name: str, embedder: str | None) -> Path:
    return bench_home() / "answer" / "indexes" / f"{name}-{embedder or 'lexical'}"


def ensure_index(root: Path, index_dir: Path, embedder: str | None) -> None:
    from index.build import BuildOptions, build_index, fill_vectors

    build_index(root, index_dir, BuildOptions(embedder=embedder))
    if embedder is not None:
        fill_vectors(index_dir)


def repo_files(index_dir: Path) -> list[tuple[str, str]]:
    """(path, text) of every indexed file, in path order, read from the index's own chunks."""
    from index.store import IndexDir, open_table

    table = open_table(IndexDir(index_dir).current())  # a delta generation's live chunks too
    try:
        by_path: dict[str, dict[int, str]] = {}
        for chunk in table.all():
            lines = by_path.setdefault(chunk.path, {})
            for offset, line in enumerate(chunk.text.split("\n")):
                lines.setdefault(chunk.start_line + offset, line)
    finally:
        table.close()
    files = []
    for path in sorted(by_path):
        lines = by_path[path]
        files.append((path, "\n".join(lines.get(i, "") for i in range(1, max(lines) + 1))))
    return files


# --- the two arms ----------------------------------------------------------------------------


def full_context(
    runtime: Runtime, files: Sequence[tuple[str, str]], room: int
) -> tuple[str, tuple[Span, ...]]:
    """Files in order, each headed by its citation, until `room` tokens; the last one cut by lines."""
    blocks: list[str] = []
    spans: list[Span] = []
    used = 0
    for path, text in files:
        lines = text.split("\n")
        block = render_snippet(path, 1, len(lines), text).text
        cost = runtime.count_tokens(block) + 1
        if used + cost > room:
            lo, hi = 0, len(lines)  # the most lines that still fit
            while lo < hi:
                mid = (lo + hi + 1) // 2
                part = render_snippet(path, 1, mid, "\n".join(lines[:mid])).text
                lo, hi = (mid, hi) if used + runtime.count_tokens(part) + 1 <= room else (lo, mid - 1)
            if lo > 0:
                blocks.append(render_snippet(path, 1, lo, "\n".join(lines[:lo])).text)
                spans.append(Span(path, 1, lo))
            break
        blocks.append(block)
        spans.append(Span(path, 1, len(lines)))
        used += cost
    return "".join(blocks), tuple(spans)


def ask_retrieval(session: ChatSession, q: Question) -> Scored:
    session.reset()
    start = time.perf_counter()
    turn = session.ask(q.query)
    spans = [Span(s.path, s.start_line, s.end_line) for s in turn.sources]
    seconds = time.perf_counter() - start
    snippets = [s.code or s.text for s in turn.plan.snippets]
    symbols = [s.symbol for s in turn.plan.snippets if s.symbol]
    return score(q, "retrieval", turn.checked, spans, turn.generation, seconds, turn.picked is not None, snippets,
                 symbols)


def ask_full(
    runtime: Runtime, settings: Settings, context: tuple[str, tuple[Span, ...]], q: Question, decoding: Decoding
) -> Scored:
    text, spans = context
    small = grounds(settings.grounding, getattr(getattr(runtime, "facts", None), "parameters", None))
    messages = [Message("system", system_prompt()), Message("user", text + render_question(q.query))]
    guard = LoopGuard()
    start = time.perf_counter()
    generation = runtime.generate(
        messages, max_tokens=settings.answer_reserve, decoding=decoding, stop_when=guard.feed
    )
    looped = guard.cut is not None
    kept = guard.kept() if looped else generation.text
    picked = pick_sources(runtime, messages, kept, spans)
    grounded = ground(kept, spans, [text], [q.query]) if small else None  # before the picked line, as the product does
    if picked:
        kept = f"{kept.rstrip()}\n\nSources: {picked}"
        if grounded is not None:
            grounded = replace(grounded, text=f"{grounded.text}\n\nSources: {picked}")
    seconds = time.perf_counter() - start
    answer = finish_answer(kept, spans, looped=looped, best=None, grounded=grounded)
    return score(q, "full", answer, spans, generation, seconds, picked is not None, [text])


def room_for_context(runtime: Runtime, settings: Settings, questions: Sequence[Question]) -> int:
    """Tokens left for the repository once the system prompt, the longest question and the reserve are in."""
    overhead = runtime.template_overhead()
    longest = max(runtime.count_tokens(render_question(q.query)) for q in questions)
    fixed = runtime.count_tokens(system_prompt()) + longest + 2 * overhead.per_message + overhead.fixed + 8
    return runtime.info.n_ctx - settings.answer_reserve - fixed


# --- main --------------------------------------------------------------------------------------


def log_row(out: Path, row: Scored) -> None:
    """One JSON line per answer as it comes, so a long run that is stopped still leaves its rows."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.with_suffix(".rows.jsonl").open("a") as f:
        f.write(json.dumps(asdict(row)) + "\n")
    print(f"{row.id} {row.arm}: loop {row.looped}, cites {row.cites_source} (free {row.free_cites}), "
          f"contains {row.contains}, {row.seconds} s", flush=True)


def write_report(out: Path, report: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    text = table(report["summary"])
    answers = "\n".join(f"### {r['id']} ({r['arm']})\n\n{r['answer']}\n" for r in report["rows"])
    out.with_suffix(".md").write_text(text + "\n" + answers)
    print(text)


def _load_run(path: Path) -> dict[str, Any]:
    """A report (.json), or the rows a stopped run logged (.rows.jsonl)."""
    if path.name.endswith(".rows.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return {"command": f"(rows of {path.name})", "rows": rows, "wall_s": sum(r["seconds"] for r in rows)}
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def merge(paths: Sequence[Path], out: Path) -> int:
    """One report from runs of separate arms (e.g. `--arms retrieval` and `--arms full` run side by side)."""
    reports = [_load_run(p) for p in paths]
    rows = [Scored(**r) for rep in reports for r in rep["rows"]]
    questions = load_questions(QUESTIONS) + load_questions(REPO / "bench" / "answer_heldout.jsonl")
    arms = list(dict.fromkeys(r.arm for r in rows))
    merged = dict(next((rep for rep in reports if "summary" in rep), reports[0]))
    merged.update(
        command=" + ".join(rep["command"] for rep in reports),
        summary={arm: summary([r for r in rows if r.arm == arm]) for arm in arms},
        by_repo=by_repo(rows, [q for q in questions if q.id in {r.id for r in rows}]),
        wall_s=max(rep["wall_s"] for rep in reports),
        rows=[asdict(r) for r in rows],
    )
    write_report(out, merged)
    return 0


def repos_in_order(questions: Sequence[Question]) -> Iterator[str]:
    yield from dict.fromkeys(q.repo for q in questions)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--flask", type=Path, default=os.environ.get("BRIDGE_BENCH_FLASK") or None)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--answer-reserve", type=int, default=256)
    parser.add_argument("--snippet-tokens", type=int, default=600)
    parser.add_argument("--embedder", default=None, help="static: hybrid search over static vectors (default: BM25 only)")
    parser.add_argument("--llm-url", default=None, help="an OpenAI-compatible server instead of the bundled model")
    parser.add_argument("--llm-model", default=None)
    parser.add_argument("--arms", default="retrieval,full")
    parser.add_argument("--limit", type=int, default=0, help="first N questions only")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (the product's: 0); another shows what "
                        "sampling alone moves")
    parser.add_argument("--fences", choices=("product", "on"), default="product",
                        help="on: a grounded small model may open ``` blocks, as before 2026-12-07 (for comparison)")
    parser.add_argument("--lead", choices=("product", "off"), default="product",
                        help="off: a grounded small model's answer does not open with a name the best snippet "
                        "defines, as before 2026-12-07 (for comparison)")
    parser.add_argument("--ids", default="", help="comma-separated question ids only")
    parser.add_argument("--out", type=Path, default=OUT / "answers")
    parser.add_argument(
        "--merge", type=Path, nargs="+", default=None,
        help="only combine the .json reports of runs of separate arms into OUT.json/.md (no model runs)",
    )
    args = parser.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out)

    questions = load_questions(args.questions)
    if args.ids:
        wanted_ids = set(args.ids.split(","))
        questions = [q for q in questions if q.id in wanted_ids]
    if args.limit:
        questions = questions[: args.limit]
    arms = [a for a in args.arms.split(",") if a]
    roots = repo_roots(args.flask, {q.repo for q in questions})
    skipped = [q.id for q in questions if q.repo not in roots]
    questions = [q for q in questions if q.repo in roots]
    cli: dict[str, Any] = {
        "n_ctx": args.n_ctx, "answer_reserve": args.answer_reserve, "snippet_tokens": args.snippet_tokens,
        "llm_url": args.llm_url, "llm_model": args.llm_model, "mode": "hybrid",
    }
    settings = load_settings(cli, env={})
    runtime = open_runtime(settings)
    small = grounds(settings.grounding, getattr(getattr(runtime, "facts", None), "parameters", None))
    # As ChatSession decodes (bridge/chat/session.py), with the seed and fences asked for.
    decoding = replace(decoding_for(runtime.info.model), seed=args.seed, fences=not small or args.fences == "on")
    rows: list[Scored] = []
    started = time.perf_counter()
    try:
        for repo in repos_in_order(questions):
            asked = [q for q in questions if q.repo == repo]
            index_dir = index_dir_for(repo, args.embedder)
            ensure_index(roots[repo], index_dir, args.embedder)
            if "retrieval" in arms:
                from bridge.chat.retrieval import McpRetriever, local_server

                with ExitStack() as stack:
                    server = stack.enter_context(local_server(roots[repo], index_dir))
                    retriever = stack.enter_context(McpRetriever(server.url, server.token))
                    session = ChatSession(runtime, retriever, settings)
                    session.decoding = decoding
                    session.leads = session.leads and args.lead == "product"
                    for q in asked:
                        rows.append(ask_retrieval(session, q))
                        log_row(args.out, rows[-1])
            if "full" in arms:
                context = full_context(runtime, repo_files(index_dir), room_for_context(runtime, settings, asked))
                for q in asked:
                    rows.append(ask_full(runtime, settings, context, q, decoding))
                    log_row(args.out, rows[-1])
    finally:
        runtime.close()
    summaries = {arm: summary([r for r in rows if r.arm == arm]) for arm in arms}
    report = {
        "command": "python -m bench.answer_bench " + " ".join(argv or []),
        "runtime": asdict(replace(runtime.info, notes=tuple(runtime.info.notes))),
        "settings": {k: v for k, v in cli.items() if v is not None} | {"embedder": args.embedder, "lead": args.lead},
        "decoding": asdict(decoding),
        "skipped": skipped,
        "summary": summaries,
        "by_repo": by_repo(rows, questions),
        "wall_s": round(time.perf_counter() - started, 1),
        "rows": [asdict(r) for r in rows],
    }
    write_report(args.out, report)
    if skipped:
        print(f"skipped {len(skipped)} question(s) whose repository was not given: {', '.join(skipped)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
