"""What the history says about one question: the similar past commits' votes per file (and the
evidence hits show), how well each file's commit text matches the question and its title, and
which files the commits whose subjects mean what the title means touched.

index/history/commits.py stores and searches the commits, index/history/commit_text.py ranks files by their
commit text, index/history/subjects.py finds subjects by meaning; this gathers them for a search, per
file number of the searched generation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from index.history import History, SubjectVectors, per_file, subject_votes, vote_scores
from index.rank import Question
from index.types import Hit

__all__ = ["EVIDENCE_COSINE", "NO_VOTES", "Votes", "gather_votes", "with_evidence"]


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
    by_subject: dict[str, list[tuple[int, float]]] | None = None  # path -> those commits, for evidence


NO_VOTES = Votes(None, {}, None)
# A commit is shown as titled like the question from this cosine up. On shared/bench the 30th
# nearest subject to a report's title has cosine 0.47 (median; 10th percentile 0.39), and the
# voters that touched the gold file 0.54 (10th percentile 0.45). In a short history the 30 nearest
# reach down to unrelated subjects, which still vote but should not be shown as alike.
EVIDENCE_COSINE = 0.4


def gather_votes(history: History | None, question: Question, numbers: Mapping[str, int], n_files: int,
                 read_title: Callable[[SubjectVectors, str], np.ndarray | None] | None = None) -> Votes:
    """`numbers`: the generation's path -> file number, of `n_files` files; `read_title(vectors,
    title)`: the title's vector by the model that made the subject vectors (None: not that model;
    no `read_title`: the subjects are not asked)."""
    if history is None:
        return NO_VOTES
    by_path = history.votes(question.terms)
    votes = Votes(history, by_path, vote_scores(by_path, numbers, n_files))
    title = question.title
    text = history.commit_text()
    if text is not None:
        votes = replace(votes, text=text.scores(question.terms, numbers, n_files),
                        title_text=text.scores(question.title_terms, numbers, n_files) if title else None)
    subjects = history.subjects
    title_vector = read_title(subjects, title) if title and subjects is not None and read_title else None
    if subjects is not None and title_vector is not None:
        by_subject = subject_votes(subjects, lambda i: history.commits[i].files, title_vector)
        summed, count = per_file(by_subject, numbers, n_files)
        votes = replace(votes, subject_votes=summed, subject_voters=count, by_subject=by_subject)
    return votes


def with_evidence(hits: list[Hit], votes: Votes) -> list[Hit]:
    """Hits whose file similar past commits touched say so, with the commits to check: those whose
    messages share the question's words, then those whose subjects read like its title."""
    history = votes.history
    if history is None:
        return hits
    by_subject = {path: alike for path, commits in (votes.by_subject or {}).items()
                  if (alike := [(c, cosine) for c, cosine in commits if cosine >= EVIDENCE_COSINE])}

    def evidence(path: str) -> tuple[str, ...]:
        lines = [history.describe(votes.by_path[path])] if path in votes.by_path else []
        if path in by_subject:
            lines.append(history.describe(by_subject[path], kind="past", why=" titled like the question"))
        return tuple(lines)

    return [replace(h, evidence=evidence(h.path)) if h.path in votes.by_path or h.path in by_subject else h
            for h in hits]
