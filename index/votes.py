"""What the history says about one question: the similar past commits' votes per file (and the
evidence hits show), how well each file's commit text matches the question and its title, and
which files the commits whose subjects mean what the title means touched.

index/history.py stores and searches the commits, index/commit_text.py ranks files by their
commit text, index/subjects.py finds subjects by meaning; this gathers them for a search, per
file number of the searched generation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from index.history import History, vote_scores
from index.rank import title_of
from index.subjects import SubjectVectors, subject_votes
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
    subject_votes: np.ndarray | None = None  # summed cosine of the title's nearest subjects' commits
    subject_voters: np.ndarray | None = None  # how many of those commits touched the file


NO_VOTES = Votes(None, {}, None)


def gather_votes(history: History | None, query: str, numbers: Mapping[str, int], n_files: int,
                 read_title: Callable[[SubjectVectors, str], np.ndarray | None] | None = None) -> Votes:
    """`numbers`: the generation's path -> file number, of `n_files` files; `read_title(vectors,
    title)`: the title's vector by the model that made the subject vectors (None: not that model;
    no `read_title`: the subjects are not asked)."""
    if history is None:
        return NO_VOTES
    query_terms = terms(query)
    by_path = history.votes(query_terms)
    votes = Votes(history, by_path, vote_scores(by_path, numbers, n_files))
    title = title_of(query)
    text = history.commit_text()
    if text is not None:
        votes = replace(votes, text=text.scores(query_terms, numbers, n_files),
                        title_text=text.scores(terms(title), numbers, n_files) if title else None)
    subjects = history.subjects
    title_vector = read_title(subjects, title) if title and subjects is not None and read_title else None
    if subjects is not None and title_vector is not None:
        by_meaning, voters = subject_votes(subjects, lambda i: history.commits[i].files, title_vector,
                                           numbers, n_files)
        votes = replace(votes, subject_votes=by_meaning, subject_voters=voters)
    return votes


def with_evidence(hits: list[Hit], votes: Votes) -> list[Hit]:
    """Hits whose file similar past commits touched say so, with the commits to check."""
    if votes.history is None or not votes.by_path:
        return hits
    history = votes.history
    return [replace(h, evidence=(history.describe(votes.by_path[h.path]),)) if h.path in votes.by_path else h
            for h in hits]
