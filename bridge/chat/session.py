"""The chat loop's turn: retrieve (MCP `search_code`) -> plan (token and KV budget) -> generate.

Retrieval is any `Retriever` (bridge.chat.retrieval: the MCP `search_code` tool external clients
use, in-process or on a running `bridge serve`). The REPL itself lives in the CLI; `ChatSession`
keeps the history between turns.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bridge.chat.answers import MIN_WORDS, Answer, LoopGuard, Span, check_citations, finish_answer
from bridge.chat.budget import Plan, Snippet, check_fixed, kv_limit, plan_prompt
from bridge.chat.condense import Condensed, condense
from bridge.chat.grounding import Grounder, ground, grounds
from bridge.chat.lead import lead_names, lead_text
from bridge.chat.prompt import build_messages, render_question, system_prompt
from bridge.chat.retrieval import Retrieval, Retriever
from bridge.chat.settings import Settings
from bridge.errors import ChatError, ConfigError
from bridge.llm.gguf import ModelFacts, choose_n_ctx, kv_bytes_per_token, read_gguf
from bridge.llm.runtime import Decoding, Generation, Message, OnToken, Runtime, decoding_for
from index.rank import as_text
from index.search import MAX_QUERY_BYTES, too_long

__all__ = ["EMPTY_QUESTION", "ChatSession", "OnPlan", "Source", "Turn", "ask_report", "open_runtime", "pick_sources"]

OnPlan = Callable[[Plan], None]
EMPTY_QUESTION = "the question is empty: ask something about the repository"


@dataclass(frozen=True, slots=True)
class Source:
    path: str
    start_line: int
    end_line: int
    score: float

    @property
    def citation(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


@dataclass(frozen=True, slots=True)
class Turn:
    question: str
    answer: str
    sources: tuple[Source, ...]  # the snippets that went into the prompt, in rank order
    retrieved: int  # hits the server returned (some may not have fit)
    plan: Plan
    generation: Generation
    retrieval_ms: float
    first_token_ms: float | None  # from the start of the turn
    total_ms: float
    checked: Answer  # the model's text checked for loops and citations; `answer` is checked.text
    picked: str | None = None  # the Sources line the model picked under a grammar, when it cited nothing
    condensed: Condensed | None = None  # what the model read instead of a report too long for the context
    streamed: str = ""  # what on_token was given: the model's pieces, or with grounding the checked lines
    lead: str | None = None  # the name the answer opens with, the model's pick among the best snippet's


def pick_sources(runtime: Runtime, messages: Sequence[Message], text: str, spans: Sequence[Span]) -> str | None:
    """When the model's text cites no retrieved source, let it pick its sources under a grammar.

    Small models rarely cite unprompted (bench/archive/RESULTS-journal.md); a grammar limited to the retrieved
    citations makes whatever it picks valid. Skipped for a reply too short to be an answer.
    """
    if not spans or len(text.split()) < MIN_WORDS or check_citations(text, spans).valid:
        return None
    return runtime.cite(messages, text, [s.citation for s in spans])


# --- the model -----------------------------------------------------------------------------


def open_runtime(settings: Settings) -> Runtime:
    """llama.cpp in process, or the OpenAI-compatible server at `settings.llm_url`."""
    if settings.llm_url is None:
        from bridge.llm.llama import LlamaCppRuntime

        return LlamaCppRuntime(
            settings.model,
            n_ctx=settings.n_ctx,
            gpu_layers=settings.gpu_layers,
            cache_type=settings.cache_type,
            kv_budget_bytes=settings.kv_budget,
        )
    from bridge.llm.openai import OpenAICompatRuntime

    facts = read_gguf(settings.model) if settings.model is not None else None
    n_ctx = settings.n_ctx
    if facts is not None:
        n_ctx = choose_n_ctx(facts, n_ctx, settings.kv_budget, settings.cache_type)
    elif settings.kv_budget is not None:
        raise ConfigError(
            "--kv-budget with --llm-url needs the model's facts: pass --model FILE.gguf (the file the server runs)"
        )
    return OpenAICompatRuntime(settings.llm_url, model=settings.llm_model, n_ctx=n_ctx)


def _facts_of(runtime: Runtime, settings: Settings) -> ModelFacts | None:
    facts = getattr(runtime, "facts", None)
    if isinstance(facts, ModelFacts):
        return facts
    return read_gguf(settings.model) if settings.model is not None else None


# --- one turn ------------------------------------------------------------------------------


class ChatSession:
    """Turns that share a runtime, a retriever and a history (trimmed oldest first when it must be)."""

    def __init__(self, runtime: Runtime, retriever: Retriever, settings: Settings) -> None:
        self.runtime, self.retriever, self.settings = runtime, retriever, settings
        facts = _facts_of(runtime, settings)
        cache_type = runtime.info.cache_type or settings.cache_type
        # 0: an OpenAI-compatible server whose model is unknown; KV bytes are then reported as 0.
        self.kv_bytes_per_token = kv_bytes_per_token(facts, cache_type) if facts is not None else 0  # type: ignore[arg-type]
        self.history: list[Message] = []
        self.last: Turn | None = None
        self._system = system_prompt()
        # A small model's answers show only code and citations the retrieved snippets hold (bridge/chat/grounding.py).
        self.grounded = grounds(settings.grounding, facts.parameters if facts is not None else None)
        # Grounded, it writes no ``` block: its blocks were inventions, withheld whole, and its answer with them.
        self.decoding: Decoding = replace(decoding_for(runtime.info.model), fences=not self.grounded)
        # Grounded, its answer opens with a name the best snippet defines (bridge/chat/lead.py).
        self.leads = self.grounded

    def _limit(self) -> int:
        return kv_limit(self.runtime.info.n_ctx, self.kv_bytes_per_token, self.settings.kv_budget)

    def _condensed(self, question: str) -> Condensed | None:
        """A report that would leave the retrieved code less than its snippet budget, condensed
        (bridge/chat/condense.py); None for a question that leaves it (or is one line)."""
        s, count, overhead = self.settings, self.runtime.count_tokens, self.runtime.template_overhead()
        room = (self._limit() - s.answer_reserve - s.snippet_tokens - count(self._system)
                - 2 * overhead.per_message - overhead.fixed)
        return condense(question, lambda text: count(render_question(text)) <= room)

    def _check_fixed(self, question: str) -> None:
        s = self.settings
        check_fixed(
            n_ctx=self.runtime.info.n_ctx,
            limit=self._limit(),
            answer_reserve=s.answer_reserve,
            system=self._system,
            question=render_question(question),
            count=self.runtime.count_tokens,
            overhead=self.runtime.template_overhead(),
        )

    def _plan(self, question: str, snippets: Sequence[Snippet]) -> Plan:
        s = self.settings
        return plan_prompt(
            n_ctx=self.runtime.info.n_ctx,
            answer_reserve=s.answer_reserve,
            kv_bytes_per_token=self.kv_bytes_per_token,
            system=self._system,
            question=render_question(question, *(snippets[0].citation,) if snippets else ()),
            count=self.runtime.count_tokens,
            history=self.history,
            snippets=snippets,
            snippet_budget=s.snippet_tokens,
            kv_budget_bytes=s.kv_budget,
            overhead=self.runtime.template_overhead(),
        )

    def _lead(self, messages: Sequence[Message], snippets: Sequence[Snippet]) -> str | None:
        """The name a grounded model's answer opens with: its pick among those the best snippet defines
        (bridge/chat/lead.py); None when there is none to pick or the backend cannot constrain its pick."""
        best = snippets[0] if self.leads and snippets else None
        names = lead_names(best.code or best.text, best.symbol) if best is not None else ()
        return self.runtime.lead(messages, names) if names else None

    def ask(self, question: str, on_token: OnToken | None = None, on_plan: OnPlan | None = None) -> Turn:
        """Retrieve, plan and generate one answer; the turn joins the history afterwards."""
        question = as_text(question.strip())
        if not question:
            raise ChatError(EMPTY_QUESTION)
        size = len(question.encode("utf-8"))
        if size > MAX_QUERY_BYTES:
            raise ChatError(f"the question {too_long(size)}")
        start = time.perf_counter()
        condensed = self._condensed(question)
        asked = condensed.text if condensed is not None else question  # what the model reads
        self._check_fixed(asked)  # a question too long for the context fails here, before any search
        retrieval = Retrieval((), 0.0)
        # A turn of punctuation alone ("?") has nothing to search for; the model answers from the turns so far.
        if self.settings.snippet_tokens > 0 and any(ch.isalnum() for ch in question):
            retrieval = self.retriever.search(
                question, k=self.settings.k, max_tokens=self.settings.snippet_tokens, mode=self.settings.mode
            )
        plan = self._plan(asked, retrieval.snippets)
        if condensed is not None:
            told = condensed.notice(self.runtime.count_tokens(question), self.runtime.count_tokens(asked))
            plan = replace(plan, notice="; ".join(n for n in (told, plan.notice) if n))
        if on_plan is not None:
            on_plan(plan)
        first: list[float] = []
        streamed: list[str] = []
        spans = [Span(s.path, s.start_line, s.end_line) for s in plan.snippets]
        codes = [s.code or s.text for s in plan.snippets]
        also_known = [question, *(s.symbol for s in plan.snippets if s.symbol)]
        grounder = Grounder(spans, codes, also_known) if self.grounded else None

        def token(piece: str) -> None:
            if not first:
                first.append(time.perf_counter())
            shown = grounder.feed(piece) if grounder is not None else piece
            if shown:
                streamed.append(shown)
                if on_token is not None:
                    on_token(shown)

        guard = LoopGuard()
        messages = build_messages(plan)
        lead = self._lead(messages, plan.snippets)
        opening = lead_text(lead) if lead else ""
        # The opening is part of the answer: its tokens come out of the answer's reserve, or it is left out.
        reserve = plan.answer_reserve - (self.runtime.count_tokens(opening) if opening else 0)
        if reserve < 1:
            lead, opening, reserve = None, "", plan.answer_reserve
        if opening:
            token(opening)
            guard.feed(opening)
        generation = self.runtime.generate(
            messages,
            max_tokens=reserve,
            decoding=self.decoding,
            on_token=token,
            stop_when=guard.feed,
            prefix=opening,
        )
        looped = guard.cut is not None
        best = plan.snippets[0].text if plan.snippets else None
        text = guard.kept() if looped else opening + generation.text
        picked = pick_sources(self.runtime, messages, text, spans)
        # Grounded before the picked Sources line joins it: a fence the model left open must not swallow the line.
        grounded = ground(text, spans, codes, also_known) if self.grounded else None
        if picked:
            text = f"{text.rstrip()}\n\nSources: {picked}"
            if grounded is not None:
                grounded = replace(grounded, text=f"{grounded.text}\n\nSources: {picked}")
        checked = finish_answer(text, spans, looped=looped, best=best, grounded=grounded)
        end = time.perf_counter()  # the grammar-picked Sources line is part of the answer's time
        # An unusable reply stays out of the history: the model would copy it, or the snippet shown instead.
        remembered = checked.text if checked.usable else "I could not answer that from the retrieved code."
        self.history += [Message("user", asked), Message("assistant", remembered)]
        turn = Turn(
            question=question,
            answer=checked.text,
            sources=tuple(Source(s.path, s.start_line, s.end_line, s.score) for s in plan.snippets),
            retrieved=len(retrieval.snippets),
            plan=plan,
            generation=generation,
            retrieval_ms=retrieval.took_ms,
            first_token_ms=(first[0] - start) * 1000 if first else None,
            total_ms=(end - start) * 1000,
            checked=checked,
            picked=picked,
            condensed=condensed,
            streamed="".join(streamed),
            lead=lead,
        )
        self.last = turn
        return turn

    def reset(self) -> None:
        self.history.clear()


def _grounding_report(turn: Turn) -> dict[str, Any]:
    g = turn.checked.grounding
    if g is None:
        return {"mode": "free"}
    return {"mode": "grounded", "withheld_code_blocks": g.withheld_blocks, "withheld_block_lines": g.withheld_block_lines,
            "withheld_code_lines": g.withheld_lines, "withheld_citations": g.withheld_citations,
            "withheld_sentences": g.withheld_sentences, "note": g.note,
            "lead": turn.lead}


def ask_report(turn: Turn, runtime: Runtime) -> dict[str, Any]:
    """The `bridge ask --json` document (docs/INTERFACES.md)."""
    info, g = runtime.info, turn.generation
    return {
        "answer": turn.answer,
        "sources": [
            {"path": s.path, "start_line": s.start_line, "end_line": s.end_line, "score": s.score} for s in turn.sources
        ],
        "model": {
            "path": info.model,
            "n_ctx": info.n_ctx,
            "trained_context": info.trained_context,
            "gpu_layers": info.gpu_layers,
            "cache_type": info.cache_type,
        },
        "budget": turn.plan.budget_dict(),
        "notice": turn.plan.notice,
        "checks": {
            "looped": turn.checked.looped,
            "usable": turn.checked.usable,
            "citations": [c.span.citation for c in turn.checked.citations.valid],
            "unknown_citations": [c.text for c in turn.checked.citations.unknown],
        },
        "grounding": _grounding_report(turn),
        "timings": {
            "retrieval_ms": round(turn.retrieval_ms, 3),
            "prefill_ms": round(g.prefill_ms, 3),
            "prefill_tokens_per_s": round(g.prefill_tokens_per_s, 3),
            "decode_tokens_per_s": round(g.decode_tokens_per_s, 3),
            "total_ms": round(turn.total_ms, 3),
        },
    }
