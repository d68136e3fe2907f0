"""The write path: discover, chunk and publish a generation (a delta when little changed), fill its
vectors progressively, and keep it fresh while files change.
"""

from __future__ import annotations

from index.build.changes import selection_from_json
from index.build.fill import FillReport, fill_vectors, write_vectors
from index.build.pipeline import BuildOptions, BuildReport, build_index
from index.build.watch import LiveIndex, watch_and_index

__all__ = [
    "build_index", "BuildOptions", "BuildReport", "fill_vectors", "FillReport", "LiveIndex", "selection_from_json",
    "watch_and_index", "write_vectors",
]
