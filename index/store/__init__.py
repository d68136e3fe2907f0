"""One index generation on disk: the layout and manifest with the writer lock and atomic swap, BM25
(built in bounded memory), dense vectors in faiss, and generations made of segments.
"""

from __future__ import annotations

from index.store.layout import (
    FORMAT_VERSION,
    SEGMENTED_FORMAT,
    ChunkTable,
    ChunkWriter,
    FileEntry,
    IndexDir,
    Manifest,
    default_home,
    default_index_dir,
)
from index.store.lexical import K1, TERM_IDS, TERM_OFFSETS, B, CorpusBuilder, LexicalIndex, TermCorpus, bm25_idf, bm25_weights, term_ids
from index.store.postings import LexicalWriter, ReusedSlices
from index.store.segments import DELETED, DELETED_DF, DELTA, SEGMENTS, SegmentInfo, load_segments, open_lexical, open_table
from index.store.vector import VectorIndex, ivf_lists

__all__ = [
    "B", "bm25_idf", "bm25_weights", "ChunkTable", "ChunkWriter", "CorpusBuilder", "default_home",
    "default_index_dir", "DELETED", "DELETED_DF", "DELTA", "FileEntry", "FORMAT_VERSION", "IndexDir", "ivf_lists",
    "K1", "LexicalIndex", "LexicalWriter", "load_segments", "Manifest", "open_lexical", "open_table",
    "ReusedSlices", "SEGMENTED_FORMAT", "SegmentInfo", "SEGMENTS", "TERM_IDS", "term_ids", "TERM_OFFSETS",
    "TermCorpus", "VectorIndex",
]
