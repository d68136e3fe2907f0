"""Context without tool calls: the `ask_repo` MCP prompt and the repository files as MCP resources.

Small models call tools unreliably; hosts that show MCP prompts and resources (llama.cpp's Web UI,
VS Code, Claude Desktop) can give any model the context instead:

- `ask_repo(question, repo?)`: one user message with the same context `bridge ask` builds: the
  instructions of prompts/system.txt, then the hits of a hybrid search for the question (k=5) rendered
  with prompts/snippet.txt, packed greedily in rank order within the 600-token snippet budget of
  `bridge ask`, then the question as prompts/question.txt words it. The host's model and tokenizer are
  unknown here, so tokens are `index.tokenize.estimate_tokens` (which errs high: a budget it keeps, the
  real tokenizer keeps).
- `repo://{repo}/{+path}`: a file of a served repository, under the same path rules as `read_file`
  (only files the index may contain; no secrets, no escaping the root).

The templates live in the `prompts` package; `bridge.chat.prompt` renders them through this module too.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from bridge.errors import BridgeError, PromptError
from index.errors import IndexingError
from index.search import DEFAULT_MAX_TOKENS
from index.tokenize import estimate_tokens

if TYPE_CHECKING:
    from bridge.server.opening import OpeningRepos
    from bridge.server.repos import Repo, RepoSet

__all__ = ["ASK_K", "SNIPPET_BUDGET", "ask_repo_text", "load_template", "register_context", "render_template"]

ASK_K = 5  # bridge ask's default k (bridge.chat.settings.Settings.k)
SNIPPET_BUDGET = DEFAULT_MAX_TOKENS  # bridge ask's default snippet budget (bridge.chat.budget.DEFAULT_SNIPPET_BUDGET)


@functools.cache
def load_template(name: str) -> str:
    """Text of prompts/<name>; placeholders are str.format fields."""
    try:
        return resources.files("prompts").joinpath(name).read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        raise PromptError(
            f"prompt template prompts/{name} is missing from the installation: reinstall mcp-retrieval-bridge"
        ) from exc


def render_template(name: str, **fields: str) -> str:
    try:
        return load_template(name).format(**fields)
    except (KeyError, IndexError, ValueError) as exc:
        raise PromptError(f"prompt template prompts/{name} does not render ({exc!r}): fix its {{fields}}") from exc


def ask_repo_text(repo: Repo, question: str, k: int = ASK_K, budget: int = SNIPPET_BUDGET) -> tuple[str, list[str]]:
    """The `ask_repo` message for `question`, and the citations of the snippets it carries."""
    result = repo.searcher.search(question, k=k, mode="hybrid", max_tokens=budget)
    blocks: list[tuple[str, str]] = []
    used = 0
    for hit in result.hits:  # greedy in rank order, as bridge ask packs: a later, smaller block may still fit
        citation = f"{hit.path}:{hit.start_line}-{hit.end_line}"
        block = render_template("snippet.txt", citation=citation, language=hit.language or "", text=hit.text.rstrip("\n"))
        cost = estimate_tokens(block)
        if used + cost <= budget:
            blocks.append((citation, block))
            used += cost
    citations = [c for c, _ in blocks]
    ask = render_template("question.txt", question=question.strip(), citation=citations[0] if citations else "path:start-end")
    system = load_template("system.txt").strip()
    return system + "\n\n" + "".join(b for _, b in blocks) + ask.strip(), citations


def register_context(server: Any, repos: RepoSet | OpeningRepos) -> None:
    """Add the `ask_repo` prompt and the `repo://{repo}/{+path}` resource template to `server`."""
    from mcp.server.mcpserver.exceptions import ResourceError
    from mcp.server.mcpserver.prompts.base import UserMessage
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    from bridge.server import ops

    @server.prompt(
        name="ask_repo", title="Ask about the code",
        description="Your question with the repository's code that answers it (hybrid search, within bridge ask's "
                    "snippet budget), for any model: no tool call needed.",
    )
    def ask_repo(
        question: Annotated[str, Field(description="What to ask about the code.")],
        repo: Annotated[str | None, Field(description="Repository name (default: the first served one).")] = None,
    ) -> list[Any]:
        try:
            text, _ = ask_repo_text(repos.get(repo), question)
        except (IndexingError, BridgeError) as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None  # other exceptions reach the client as "Error rendering prompt"
        return [UserMessage(text)]

    @server.resource(
        "repo://{repo}/{+path}", name="repository_file", title="Repository file", mime_type="text/plain",
        description="A file of a served repository, e.g. repo://NAME/src/app.py (only files the index may contain).",
    )
    def repository_file(repo: str, path: str) -> str:
        try:
            return ops.source_text(repos.get(repo), path)
        except (IndexingError, BridgeError) as exc:
            raise ResourceError(str(exc)) from None
