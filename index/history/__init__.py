"""The repository's own history: the git log per file, what past commits said about each file, and
commit subjects by meaning; past commits like a question vote for the files they touched.
"""

from __future__ import annotations

from index.history.commits import (
    History,
    HistoryReport,
    LiveHistory,
    fill_subjects,
    remove_history,
    update_from_git,
    update_history,
    vote_scores,
)
from index.history.git_log import git_location, read_commits
from index.history.subjects import SubjectEncoder, SubjectVectors, per_file, subject_spec, subject_votes

__all__ = [
    "fill_subjects", "git_location", "History", "HistoryReport", "LiveHistory", "per_file", "read_commits",
    "remove_history", "subject_spec", "subject_votes", "SubjectEncoder", "SubjectVectors", "update_from_git",
    "update_history", "vote_scores",
]
