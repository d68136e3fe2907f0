"""What is indexed and how it is cut: which files git would list, what their names keep out, their
language and kind, and syntax-aware chunks. Reads the disk; knows nothing of stores or search.
"""

from __future__ import annotations

from index.files.chunk import chunk_file
from index.files.discovery import (
    Listing,
    discover,
    iter_files,
    iter_listed,
    resolve_path,
    skipped_by_name,
    source_file,
    stat_signature,
    unindexed_paths,
)
from index.files.file_kinds import is_auxiliary, is_auxiliary_code, path_kinds
from index.files.languages import language_for
from index.files.syntax import outline

__all__ = [
    "chunk_file", "discover", "is_auxiliary", "is_auxiliary_code", "iter_files", "iter_listed", "language_for",
    "Listing", "outline", "path_kinds", "resolve_path", "skipped_by_name", "source_file", "stat_signature", "unindexed_paths",
]
