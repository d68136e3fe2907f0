"""Decoding and prompt-format variants for the bundled model, measured on a fixed question set.

    python -m bench.decode_bench [--ids std-01,...] [--decodings greedy,rp11,...] [--formats plain,...] [--max-tokens 200]

For each question (default: the stdlib questions of bench/answer_questions.jsonl) the snippets are
retrieved once, through the in-process MCP server as `bridge ask` does, then every (format,
decoding) pair generates one answer with the same snippets. The formats differ only in the system
prompt and in the text around the snippets, or (lead_*) in the opening the answer is made to start
with: "According to `" or "According to [" that the model continues freely, or "According to `"
plus one retrieved citation the model picks under a GBNF grammar, or (tail_*) in a closing: an
answer that cites no retrieved source is continued with " (see " and the model writes the rest;
the decodings only in sampling. No loop guard runs
here: the raw text is scored. Per pair: loop rate (a word 6-gram three times), rate of answers
that cite a retrieved source as path:start-end, answer_contains rate, unknown-citation rate,
rate of answers whose citation names a gold file, median words, median seconds. Prints a table; writes bench/out/decode.json.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.answer_bench import QUESTIONS, ensure_index, index_dir_for, repo_roots
from bench.answer_scoring import contains_all, load_questions
from bench.paths import OUT
from bridge.chat.answers import Span, check_citations, has_loop
from bridge.chat.budget import Snippet
from bridge.chat.prompt import render_question, system_prompt
from bridge.llm.llama import LlamaCppRuntime
from bridge.llm.runtime import Decoding, Message

DECODINGS: dict[str, Decoding] = {
    "greedy": Decoding(),
    "rp11": Decoding(repeat_penalty=1.1),
    "rp13": Decoding(repeat_penalty=1.3),
    "freq05": Decoding(frequency_penalty=0.5, presence_penalty=0.5),
    "rp11_freq03": Decoding(repeat_penalty=1.1, frequency_penalty=0.3),
    "t03_minp": Decoding(temperature=0.3, top_p=1.0, min_p=0.1, repeat_penalty=1.1),
    "t07_topp": Decoding(temperature=0.7, top_p=0.9, min_p=0.0, repeat_penalty=1.1),
    # the same with another seed: a second sample of each answer, to tell a format's effect from chance
    "t03_minp_s1": Decoding(temperature=0.3, top_p=1.0, min_p=0.1, repeat_penalty=1.1, seed=1),
}

SHORT_SYSTEM = (
    "You answer questions about a code repository using only the numbered snippets the user gives you. "
    "Name the function or class that answers the question, say in two or three sentences how it works, "
    "and cite the snippet you used by its path:start-end."
)


# Openings the answer is made to start with (the product's prompt; the model continues after them).
# lead_grammar: the model picks one retrieved citation under a GBNF grammar after "According to `".
LEADS = {"lead_tick": "According to `", "lead_bracket": "According to [", "lead_grammar": "According to `"}
# Closings: when the answer cites no retrieved source, it is continued with this text and the model
# writes the citation freely (up to the closing parenthesis or the end of the line).
TAILS = {"tail_see": " (see "}


def close_with(runtime: LlamaCppRuntime, messages: Sequence[Message], text: str, tail: str, decoding: Decoding) -> str:
    """`text` continued with `tail` and what the model writes after it, up to ")" or a line end."""
    g = runtime.generate(
        messages, max_tokens=40, decoding=decoding, prefix=text.rstrip() + tail,
        stop_when=lambda piece: ")" in piece or "\n" in piece,
    )
    said = g.text.split("\n")[0]
    said = said[: said.index(")") + 1] if ")" in said else said
    return text.rstrip() + tail + said


def render(fmt: str, snippets: Sequence[Snippet], question: str) -> list[Message]:
    body = "".join(s.text for s in snippets)
    first = snippets[0].citation if snippets else "path:start-end"
    if fmt == "plain":  # the prompt of issue 14's first stage (prompts/*.txt, no citation example)
        return [Message("system", system_prompt()), Message("user", body + render_question(question))]
    if fmt == "product" or fmt in LEADS or fmt in TAILS:  # the product's prompt today: the first citation as the example
        return [Message("system", system_prompt()), Message("user", body + render_question(question, first))]
    if fmt == "question_first":
        return [
            Message("system", system_prompt()),
            Message("user", f"Question: {question}\n\nSnippets:\n{body}" + render_question(question)),
        ]
    if fmt == "short_system":
        return [Message("system", SHORT_SYSTEM), Message("user", body + f"Question: {question}\nAnswer:")]
    if fmt == "example":  # an answer shape to copy, with the first snippet's citation in it
        tail = (
            f"Question: {question}\nAnswer in two or three sentences that name the function or class, "
            f"then cite it like this: (see {first})."
        )
        return [Message("system", system_prompt()), Message("user", body + tail)]
    if fmt == "cite_first":  # ask for the citation first: copying a snippet header is easy for a small model
        tail = (
            f"Question: {question}\nStart your answer with the path:start-end of the snippet that answers the "
            f"question, then explain it in two or three sentences."
        )
        return [Message("system", system_prompt()), Message("user", body + tail)]
    raise SystemExit(
        f"unknown format {fmt!r}: use plain, product, question_first, short_system, example, cite_first, "
        f"{', '.join([*LEADS, *TAILS])}"
    )


def opening(runtime: LlamaCppRuntime, fmt: str, messages: Sequence[Message], spans: Sequence[Span]) -> str:
    """The text the answer is made to begin with for a lead format ("" otherwise)."""
    lead = LEADS.get(fmt, "")
    if fmt == "lead_grammar" and spans:
        pick = runtime.pick_citations(messages, lead, [s.citation for s in spans], most=1)
        lead = f"{lead}{pick}`," if pick else ""
    return lead


def gbnf_literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def cite_with_grammar(runtime: Any, messages: Sequence[Message], answer: str, citations: Sequence[str]) -> str:
    """Continue the answer with "Sources: " and let the model pick retrieved citations under a GBNF grammar.

    Uses the llama.cpp runtime's own tokenizer and context (bench-only access to its internals).
    """
    from llama_cpp import LlamaGrammar

    choice = " | ".join(gbnf_literal(c) for c in citations)
    grammar = LlamaGrammar.from_string(f'root ::= cite (", " cite){{0,2}}\ncite ::= {choice}\n', verbose=False)
    llama = runtime._llama
    prefix = answer.rstrip() + "\n\nSources: "
    tokens = runtime._tokens(messages) + llama.tokenize(prefix.encode(), add_bos=False, special=False)
    out: list[int] = []
    for token in llama.generate(tokens, temp=0.0, grammar=grammar):
        if llama.token_eos() == token or runtime._is_eog(runtime._vocab, token) or len(out) >= 60:
            break
        out.append(token)
    return str(llama.detokenize(out).decode("utf-8", "replace"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--ids", default="", help="question ids (default: every stdlib question)")
    parser.add_argument("--decodings", default=",".join(DECODINGS))
    parser.add_argument("--formats", default="plain")
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--out", type=Path, default=OUT / "decode.json")
    parser.add_argument("--grammar", action="store_true", help="also pick citations under a GBNF grammar")
    args = parser.parse_args(argv)

    questions = load_questions(args.questions)
    ids = set(args.ids.split(",")) if args.ids else None
    questions = [q for q in questions if (q.id in ids if ids else q.repo == "stdlib")]
    decodings = {name: DECODINGS[name] for name in args.decodings.split(",")}
    formats = args.formats.split(",")
    roots = repo_roots(None, {q.repo for q in questions})

    from bridge.chat.retrieval import McpRetriever, local_server

    runtime = LlamaCppRuntime(n_ctx=args.n_ctx)
    rows: list[dict[str, Any]] = []
    try:
        for repo in dict.fromkeys(q.repo for q in questions):
            index_dir = index_dir_for(repo, None)
            ensure_index(roots[repo], index_dir, None)
            with local_server(roots[repo], index_dir) as server, McpRetriever(server.url, server.token) as retriever:
                for q in [q for q in questions if q.repo == repo]:
                    snippets = retriever.search(q.query, k=5, max_tokens=600, mode="hybrid").snippets
                    spans = [Span(s.path, s.start_line, s.end_line) for s in snippets]
                    for fmt in formats:
                        messages = render(fmt, snippets, q.query)
                        for name, decoding in decodings.items():
                            start = time.perf_counter()
                            lead = opening(runtime, fmt, messages, spans)
                            g = runtime.generate(messages, max_tokens=args.max_tokens, decoding=decoding, prefix=lead)
                            text = lead + g.text
                            if fmt in TAILS and not check_citations(text, spans).valid:
                                text = close_with(runtime, messages, text, TAILS[fmt], decoding)
                            check = check_citations(text, spans)
                            extra: dict[str, Any] = {}
                            if args.grammar and spans:
                                pick_text = cite_with_grammar(runtime, messages, text, [x.citation for x in spans])
                                picks = check_citations(pick_text, spans)
                                gold = set(q.gold_files)
                                extra = {
                                    "grammar_pick": pick_text,
                                    "grammar_valid": picks.cited_sources and not picks.unknown,
                                    "grammar_gold": any(c.span.path in gold for c in picks.valid[:1]),
                                    "rank1_gold": spans[0].path in gold,
                                    "free_gold": any(c.span.path in gold for c in check.valid),
                                }
                            rows.append({
                                "id": q.id, "format": fmt, "decoding": name,
                                "loop": has_loop(text), "cites": check.cited_sources,
                                "unknown": bool(check.unknown), "contains": contains_all(text, q.answer_contains),
                                "gold_cited": any(c.span.path in q.gold_files for c in check.valid),
                                "words": len(re.findall(r"\w+", text)), "seconds": round(time.perf_counter() - start, 2),
                                "finish": g.finish_reason, "text": text, **extra,
                            })
                            print(json.dumps({k: v for k, v in rows[-1].items() if k != "text"}), flush=True)
    finally:
        runtime.close()
    lines = [
        "| format | decoding | n | loop | cites source | cites gold file | unknown citation | answer_contains "
        "| median words | median s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    summary = []
    for fmt in formats:
        for name in decodings:
            picked = [r for r in rows if r["format"] == fmt and r["decoding"] == name]
            n = len(picked)
            if not n:
                continue
            s = {
                "format": fmt, "decoding": name, "n": n,
                "loop": sum(r["loop"] for r in picked) / n, "cites": sum(r["cites"] for r in picked) / n,
                "gold_cited": sum(r["gold_cited"] for r in picked) / n,
                "unknown": sum(r["unknown"] for r in picked) / n, "contains": sum(r["contains"] for r in picked) / n,
                "words": statistics.median(r["words"] for r in picked),
                "seconds": statistics.median(r["seconds"] for r in picked),
            }
            summary.append(s)
            lines.append(
                f"| {fmt} | {name} | {n} | {s['loop']:.2f} | {s['cites']:.2f} | {s['gold_cited']:.2f} | {s['unknown']:.2f} | "
                f"{s['contains']:.2f} | {s['words']:.0f} | {s['seconds']:.1f} |"
            )
    if args.grammar:
        graded = [row for row in rows if "grammar_valid" in row]
        n = max(len(graded), 1)
        lines.append("")
        lines.append(
            f"grammar: {len(graded)} answers; pick is a retrieved citation {sum(row['grammar_valid'] for row in graded) / n:.2f}; "
            f"first pick is a gold file {sum(row['grammar_gold'] for row in graded) / n:.2f} vs retrieval rank 1 gold "
            f"{sum(row['rank1_gold'] for row in graded) / n:.2f}; "
            f"free text cites a gold file {sum(row['free_gold'] for row in graded) / n:.2f}"
        )
    text = "\n".join(lines)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "decodings": {k: asdict(v) for k, v in decodings.items()}, "summary": summary, "rows": rows,
        "max_tokens": args.max_tokens, "n_ctx": args.n_ctx,
    }, indent=2) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
