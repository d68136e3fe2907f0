"""How many indexed files changed on disk since their generation was built, off the search path.

Every search result says it (`IndexInfo.stale_files`), and counting stats every indexed file: 0.3 s at
100,000 files, which a search paid every TTL seconds when it counted in line (bench/archive/RESULTS-journal.md). So the
first count of a generation, and any asked for `fresh` (a status), is made at once; after that a count
up to TTL old is reused, and an older one is returned while one background thread counts again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path

from index.files import stat_signature
from index.store import FileEntry

__all__ = ["TTL", "StaleCount"]

TTL = 2.0  # seconds a count is reused before it is counted again


class StaleCount:
    """The last count of one index's stale files, per generation."""

    def __init__(self) -> None:
        self._last: tuple[float, str, int] | None = None  # (counted at, generation, count)
        self._recounting = threading.Lock()  # held by the one background recount

    def get(self, generation: str, root: Path, files: Mapping[str, FileEntry], fresh: bool = False) -> int:
        """Files of `files` (the generation's manifest) whose size or mtime under `root` differs from
        the build, or that are gone."""
        last = self._last
        if fresh or last is None or last[1] != generation:
            return self._count(generation, root, files)
        if time.monotonic() - last[0] >= TTL and self._recounting.acquire(blocking=False):
            threading.Thread(
                target=self._recount, args=(generation, root, files), name="bridge-stale-count", daemon=True
            ).start()
        return last[2]

    def _count(self, generation: str, root: Path, files: Mapping[str, FileEntry]) -> int:
        counted_at = time.monotonic()
        stale = sum(stat_signature(root, p) != (e.size, e.mtime_ns) for p, e in files.items())
        self._last = (counted_at, generation, stale)
        return stale

    def _recount(self, generation: str, root: Path, files: Mapping[str, FileEntry]) -> None:
        try:
            self._count(generation, root, files)
        finally:
            self._recounting.release()
