"""The read path: the live generation (local or on Milvus), lexical and dense rankings fused, files
ranked, the best chunks chosen, packed under a token budget, and which files changed since the build.
"""

from __future__ import annotations

from index.search.dense import lexical_only
from index.search.hits import fit_prefix
from index.search.probe import chunk_rows, file_features, file_ranking
from index.search.searcher import DEFAULT_MAX_TOKENS, MAX_K, MAX_QUERY_BYTES, Searcher, too_long
from index.search.source import file_evidence
from index.search.stale import TTL

__all__ = [
    "chunk_rows", "file_features", "file_ranking",
    "DEFAULT_MAX_TOKENS", "file_evidence", "fit_prefix", "lexical_only", "MAX_K", "MAX_QUERY_BYTES", "Searcher",
    "too_long", "TTL",
]
