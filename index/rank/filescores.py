"""File scores as arrays, and exact "best first" orders that never sort more than they must.

Hybrid search scores every file with some evidence (tens of thousands at a million chunks) but
answers with a handful. Sorting them all in Python dicts cost about a third of a hybrid query at
1.15M chunks (bench/archive/RESULTS-journal.md), so scores stay numpy arrays and:

- `best_first` picks the n best of many by a partition, then sorts only those n;
- `ordered` sorts all of them (a signal's ranking needs every rank) with numpy's SIMD sort,
  which is not stable, and then puts tied values in id order, instead of a slower `lexsort`.

Every order here is the one `sorted(ids, key=lambda i: (-value[i], i))` gives: best value first,
ties to the lower id. Nothing is approximated. `glob_mask` says which files a path glob allows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from index.errors import BadQuery

__all__ = ["FileScores", "best_first", "glob_mask", "mask", "ordered", "ranking"]


def ordered(ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`ids` (ascending) by `values` (aligned with them), best first, ties by id.

    The unstable SIMD argsort is about five times faster than a stable sort here; equal values it
    may leave in any order, so runs of equal values are then put in id order by a second argsort
    over a unique key (run number, position), which is as fast."""
    if len(ids) < 2:
        return ids.copy()
    idx = np.argsort(-values)
    ranked = values[idx]
    changes = ranked[1:] != ranked[:-1]
    if changes.all():
        return ids[idx]
    run = np.concatenate(([0], np.cumsum(changes)))
    # ids ascend, so the position in `ids` orders ties as the ids do.
    return ids[idx[np.argsort(run * len(ids) + idx)]]


def ranking(values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The indices where `keep`, by `values`, best first, ties by index."""
    kept = np.flatnonzero(keep)
    return ordered(kept, values[kept])


def mask(files: Sequence[int] | frozenset[int] | np.ndarray, n: int) -> np.ndarray:
    """A boolean mask over n files, true for `files`."""
    out = np.zeros(n, dtype=bool)
    if isinstance(files, np.ndarray):
        out[files] = True
    else:
        out[np.fromiter(files, dtype=np.int64, count=len(files))] = True
    return out


def best_first(ids: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """The n best of `ids` by `values` (aligned), in `ordered`'s order, without sorting the rest.

    The n-th best value is found by a partition; every id above it is in, and of those tied with
    it the lowest ids fill the remaining places, as a full sort would have placed them."""
    if n <= 0 or len(ids) == 0:
        return ids[:0].copy()
    if n >= len(ids):
        order = np.argsort(ids, kind="stable")
        return ordered(ids[order], values[order])
    kth = np.partition(values, len(values) - n)[len(values) - n]
    above = values > kth
    tied = ids[values == kth]
    tied.sort()
    chosen = np.concatenate([ids[above], tied[: n - int(above.sum())]])
    chosen_values = values[above]
    chosen_values = np.concatenate([chosen_values, np.full(len(chosen) - len(chosen_values), kth)])
    order = np.argsort(chosen, kind="stable")
    return ordered(chosen[order], chosen_values[order])


@dataclass(frozen=True, eq=False)  # equality is the Mapping's: same files, same scores
class FileScores(Mapping[int, float]):
    """The score of every file with some evidence: `files` ascending, `scores` aligned with them.

    Read-only mapping of file number to score (as the dict it replaces), plus `best(n)`, the n
    best file numbers, and `ordered()`, all of them, best first, ties by file number."""

    files: np.ndarray
    scores: np.ndarray

    def best(self, n: int) -> np.ndarray:
        return best_first(self.files, self.scores, n)

    def ordered(self) -> np.ndarray:
        return ordered(self.files, self.scores)

    def __getitem__(self, file: int) -> float:
        at = int(np.searchsorted(self.files, file))
        if at == len(self.files) or self.files[at] != file:
            raise KeyError(file)
        return float(self.scores[at])

    def __iter__(self) -> Iterator[int]:
        return iter(self.files.tolist())

    def __len__(self) -> int:
        return len(self.files)


def glob_mask(paths: Sequence[str] | np.ndarray, path_glob: str | None) -> np.ndarray | None:
    """Which of `paths` a gitignore-style glob keeps (None: no glob); BadQuery for a bad glob or one
    that keeps none of them."""
    if not path_glob:
        return None
    import pathspec

    try:
        spec = pathspec.GitIgnoreSpec.from_lines([path_glob])
    except (ValueError, TypeError) as exc:
        raise BadQuery(f"bad path glob {path_glob!r} ({exc}): use a pattern like 'src/**/*.py'") from exc
    allowed = np.fromiter((spec.match_file(p) for p in paths), dtype=bool, count=len(paths))
    if not allowed.any():  # a typo, '../**' or '/etc/**' would otherwise read as "nothing relevant"
        raise BadQuery(f"path glob {path_glob!r} matches none of the {len(paths)} indexed files: globs are relative "
                       "to the repository root, e.g. 'src/**/*.py' (MCP: list_files shows the paths)")
    return allowed
