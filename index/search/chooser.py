"""The chunk stage as a search asks it: of each file a report's hits come from, its chunks ranked against
the report (index/rank/chunks.py), the first shown, the ranking and the chunks kept for the lead file's
further chunks (index/search/lead.py)."""

from __future__ import annotations

from collections.abc import Mapping

from index.rank import ChunkStage, QueryEvidence, chunk_features
from index.types import Chunk

__all__ = ["StageChooser", "chunk_chooser"]


class StageChooser:
    """The chunk stage for one report's evidence (index/rank/chunks.py), as `files_first` asks it. It
    remembers each file's chunk ids it ranked, best first (`ranked`, by path), for the windows a
    report's lead file adds (index/search/lead.py), and its chunks in file order (`chunks`)."""

    def __init__(self, stage: ChunkStage, evidence: QueryEvidence) -> None:
        self.stage = stage
        self.evidence = evidence
        self.dense = dict(evidence.dense)
        self.ranked: dict[str, tuple[int, ...]] = {}
        self.chunks: dict[str, tuple[Chunk, ...]] = {}

    def __call__(self, rows: Mapping[int, Chunk], fused_first: int | None) -> int | None:
        ids = sorted(rows)
        if not ids:
            return None
        e = self.evidence
        features = chunk_features(e.question, ids, [rows[i] for i in ids], e.chunk_scores, e.title_scores, self.dense,
                                  fused_first)
        ranked = tuple(ids[i] for i in self.stage.order(features))
        path = rows[ids[0]].path
        self.ranked[path], self.chunks[path] = ranked, tuple(rows[i] for i in ids)
        return ranked[0]


def chunk_chooser(stage: ChunkStage | None, evidence: QueryEvidence) -> StageChooser | None:
    """The chunk stage for one report's evidence, or None without a stage."""
    return StageChooser(stage, evidence) if stage is not None else None
