"""What the history says about one question: the similar past commits' votes per file (and the
evidence hits show), and how well each file's commit text matches the question and its title.

index/history.py stores and searches the commits, index/commit_text.py ranks files by their
commit text; this gathers both for a search, per file number of the searched generation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from index.history import History, vote_scores
from index.rank import title_of
from index.tokenize import terms
from index.types import Hit

__all__ = ["NO_VOTES", "Votes", "gather_votes", "with_evidence"]


@dataclass(frozen=True)
class Votes:
    """Past commits like the query, per file: the history signal and the hits' evidence; and how
    well each file's commit text matches the query and its title (None: no history, one line)."""

    history: History | None
    by_path: dict[str, list[tuple[int, float]]]
    scores: np.ndarray | None
    text: np.ndarray | None = None
    title_text: np.ndarray | None = None


NO_VOTES = Votes(None, {}, None)


def gather_votes(history: History | None, query: str, numbers: Mapping[str, int], n_files: int) -> Votes:
    """`numbers`: the generation's path -> file number, of `n_files` files."""
    if history is None:
        return NO_VOTES
    query_terms = terms(query)
    by_path = history.votes(query_terms)
    votes = vote_scores(by_path, numbers, n_files)
    text = history.commit_text()
    if text is None:
        return Votes(history, by_path, votes)
    title = title_of(query)
    return Votes(history, by_path, votes, text.scores(query_terms, numbers, n_files),
                 text.scores(terms(title), numbers, n_files) if title else None)


def with_evidence(hits: list[Hit], votes: Votes) -> list[Hit]:
    """Hits whose file similar past commits touched say so, with the commits to check."""
    if votes.history is None or not votes.by_path:
        return hits
    history = votes.history
    return [replace(h, evidence=(history.describe(votes.by_path[h.path]),)) if h.path in votes.by_path else h
            for h in hits]
