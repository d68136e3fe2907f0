"""Reading a question and ranking files: the question's title, frames and names, the focus of a long
report, reciprocal rank fusion, file-level evidence and the learned second stage.
"""

from __future__ import annotations

from index.rank.chunks import CHUNK_FEATURES, ChunkStage, chunk_features, is_quoted, load_chunk_stage
from index.rank.evidence import DENSE_CHUNKS, SIGNALS, FileEvidence, QueryEvidence
from index.rank.filescores import FileScores, glob_mask
from index.rank.focus import focus_report
from index.rank.fusion import rrf, top_k
from index.rank.question import Frame, Question, as_text, line_mentions, named_symbols, only_a_name, title_of, traceback_frames
from index.rank.ranker import FEATURES, RERANK, Ranker, load_ranker

__all__ = [
    "CHUNK_FEATURES", "ChunkStage", "chunk_features", "is_quoted", "load_chunk_stage",
    "as_text", "DENSE_CHUNKS", "FEATURES", "FileEvidence", "FileScores", "focus_report", "Frame",
    "glob_mask", "line_mentions", "load_ranker", "named_symbols", "only_a_name", "QueryEvidence", "Question", "Ranker",
    "RERANK", "rrf", "SIGNALS", "title_of", "top_k", "traceback_frames",
]
