"""Which files of a repository are indexed (and may be read through the server).

Inside a git work tree the candidates are exactly what git would track; elsewhere a walk applies
the .gitignore files with git's rules (both in index/files/ignore.py). Names that must stay out (likely secrets,
dependency lock files, the index's own directory: index/files/name_rules.py), binaries, big files and anything that
leaves the root through a symlink are then dropped and counted.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass
from pathlib import Path

from index.errors import NotARepository, PathNotAllowed
from index.files.ignore import git_files, is_listed, matcher, walk
from index.files.languages import language_for
from index.files.name_rules import CONTROL, LOCK_FILES, SECRET_PATTERNS, NameRules, in_git_dir, name_problem, under_any
from index.types import Discovery, Selection, SourceFile

__all__ = [
    "Listing", "discover", "iter_files", "iter_listed", "list_candidate_paths", "resolve_path", "skipped_by_name",
    "source_file", "stat_signature", "unindexed_paths",
]

_SNIFF_BYTES = 8192  # git's own binary heuristic looks at the same window
_DRIVE = re.compile(r"^[A-Za-z]:")
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)

_REFUSALS: dict[str, str] = {
    "git_dir": "is inside .git: only files of the working tree can be read",
    "index_dir": "is inside the index directory: only files of the repository can be read",
    "secret": "looks like a secret and is not served: index it with `bridge index --include PATTERN` if it is safe",
    "lock_file": "is a dependency lock file, which is not indexed: index it with `bridge index --include PATTERN`",
    "excluded": "is excluded by the exclude patterns: call list_files to see the readable files",
    "ignored": "is ignored by git or .gitignore: call list_files to see the readable files",
    "missing": "does not exist: call list_files to see the readable files",
    "directory": "is a directory: pass a file path, or call list_files to see the files in it",
    "not_a_file": "is not a regular file: pass the path of a text file",
    "symlink_outside_root": "is a symlink that leaves the repository: pass a path inside it",
    "symlink_parent": "goes through a symlinked directory: pass the path of the real file",
    "broken_symlink": "is a broken or looping symlink: pass the path of a real file",
    "too_large": "is larger than the {limit}-byte limit: use search_code to find the part you need",
    "binary": "is a binary file: only text files can be read",
    "unreadable": "cannot be read: check its permissions",
    "undecodable_name": "has a name that is not valid UTF-8: rename the file",
    "control_name": "has control characters in its name: rename the file",
}

@dataclass(frozen=True, slots=True)
class _Candidate:
    path: str  # relative to the root, forward slashes
    real: str  # absolute real path of the file to open
    info: os.stat_result


def discover(
    root: Path, selection: Selection = Selection(), exclude_dirs: tuple[Path, ...] = ()
) -> Discovery:
    """Read every selected file under `root`, sorted by path; skipped files are counted by reason."""
    skipped: Counter[str] = Counter()
    files = tuple(iter_files(root, selection, exclude_dirs, skipped))
    invalid = sum(1 for source in files if source.invalid_utf8)
    return Discovery(files=files, skipped=dict(sorted(skipped.items())), invalid_utf8=invalid)


def iter_files(
    root: Path,
    selection: Selection,
    exclude_dirs: tuple[Path, ...],
    skipped: Counter[str],
    skip: Container[str] = (),
) -> Iterator[SourceFile]:
    """The files `discover` returns, one at a time, so that a caller may hold one file's text
    at a time; skipped files are counted into `skipped` as the iteration goes. Paths in `skip`
    are selected as usual but neither read nor yielded (the caller already knows them)."""
    base = _real_root(root)
    rules = _rules(root, base, selection, exclude_dirs)
    for candidate in _select(base, rules, skipped):
        if candidate.path in skip:
            continue
        source = _read(candidate, rules.max_bytes, skipped)
        if source is not None:
            yield source


@dataclass(frozen=True, slots=True)
class Listing:
    """A selected file known by its name and stat alone (not read)."""

    path: str
    size: int
    mtime_ns: int


def iter_listed(
    root: Path,
    selection: Selection,
    exclude_dirs: tuple[Path, ...],
    skipped: Counter[str],
    must_read: Callable[[Listing], bool],
) -> Iterator[SourceFile | Listing]:
    """The files `iter_files` yields, except that a file for which `must_read` says False is
    yielded as its `Listing`, unread: a re-index need not read files whose stat shows them unchanged."""
    base = _real_root(root)
    rules = _rules(root, base, selection, exclude_dirs)
    for candidate in _select(base, rules, skipped):
        listing = Listing(candidate.path, candidate.info.st_size, candidate.info.st_mtime_ns)
        if not must_read(listing):
            yield listing
        elif (source := _read(candidate, rules.max_bytes, skipped)) is not None:
            yield source


def list_candidate_paths(
    root: Path, selection: Selection = Selection(), exclude_dirs: tuple[Path, ...] = ()
) -> list[str]:
    """The selected paths, sorted, decided from names and stat alone (no file is read)."""
    base = _real_root(root)
    rules = _rules(root, base, selection, exclude_dirs)
    return [candidate.path for candidate in _select(base, rules, Counter())]


def unindexed_paths(
    root: Path, selection: Selection, indexed: Container[str], exclude_dirs: tuple[Path, ...] = ()
) -> list[str]:
    """Selected text files on disk that `indexed` lacks: files added since the build (names and
    stat decide; only those new candidates are sniffed for binary content)."""
    base = _real_root(root)
    rules = _rules(root, base, selection, exclude_dirs)
    return [c.path for c in _select(base, rules, Counter()) if c.path not in indexed and not _sniff_binary(c.real)]


def skipped_by_name(root: Path, selection: Selection = Selection(), reasons: Container[str] = ("secret", "lock_file")
                    ) -> dict[str, list[str]]:
    """reason -> the paths the name rules skip for it (those a user may want back with --include),
    from one more listing: names only, no file is opened."""
    base = _real_root(root)
    rules = _rules(root, base, selection, ())
    listed = git_files(base)
    found: dict[str, list[str]] = {}
    for rel in sorted(set(listed if listed is not None else walk(base, (), Counter()))):
        if (reason := rules.reason(rel)) in reasons:
            found.setdefault(str(reason), []).append(rel)
    return found


def stat_signature(root: Path, path: str) -> tuple[int, int] | None:
    """(size, mtime_ns) of a repository file, or None when it is gone; a cheap staleness check."""
    try:
        info = os.stat(os.path.join(root, path))
    except (OSError, ValueError):
        return None
    return info.st_size, info.st_mtime_ns


def resolve_path(
    root: Path, user_path: str, selection: Selection = Selection(), exclude_dirs: tuple[Path, ...] = (),
    known: Container[str] = (),
) -> Path:
    """The real path of a selected file named relative to `root`, or PathNotAllowed saying why not.

    `known`: paths a discovery under the same selection listed (an index's files); for those the
    ignore rules need not be asked again, which spares a git process per call. Every other check
    (names, secrets, symlinks, size, binary) still runs.
    """
    base = _real_root(root)
    rel = _normalise(user_path)
    rules = _rules(root, base, selection, exclude_dirs)
    reason = name_problem(rel) or rules.reason(rel) or _symlinked_parent(base, rel)
    if reason is None:
        checked = _check(base, rel, rules)
        if isinstance(checked, str):
            reason = checked
        elif rel not in known and not is_listed(base, rel):
            reason = "ignored"
        elif _sniff_binary(checked.real):
            reason = "binary"
        else:
            return Path(checked.real)
    raise PathNotAllowed(f"path {user_path!r} {_REFUSALS[reason].format(limit=rules.max_bytes)}")


def _real_root(root: Path) -> str:
    if not os.path.isdir(root):
        raise NotARepository(f"no directory at {root}: check the path")
    return os.path.realpath(root)


def _rules(root: Path, base: str, selection: Selection, exclude_dirs: tuple[Path, ...]) -> NameRules:
    index_dirs = []
    for folder in exclude_dirs:
        absolute = folder if Path(folder).is_absolute() else Path(root) / folder
        inside = _inside(base, os.path.realpath(absolute))
        if inside:  # an index dir that *is* the root would exclude everything: ignore it
            index_dirs.append(inside)
    return NameRules(
        secrets=matcher(SECRET_PATTERNS) if selection.skip_secrets else None,
        lock_files=matcher(LOCK_FILES),
        include=matcher(tuple(selection.include)),
        exclude=matcher(tuple(selection.exclude)),
        index_dirs=tuple(index_dirs),
        max_bytes=selection.max_file_bytes,
    )


def _select(base: str, rules: NameRules, skipped: Counter[str]) -> list[_Candidate]:
    listed = git_files(base)
    if listed is None:
        listed = walk(base, rules.index_dirs, skipped)
    chosen = []
    for rel in sorted(set(listed)):
        if in_git_dir(rel) or under_any(rel, rules.index_dirs):
            continue  # never user files: not worth a count
        if problem := name_problem(rel):
            skipped[problem] += 1
            continue
        checked = rules.reason(rel) or _check(base, rel, rules)
        if isinstance(checked, str):
            skipped[checked] += 1
        else:
            chosen.append(checked)
    return chosen


def _check(base: str, rel: str, rules: NameRules) -> _Candidate | str:
    """The file to open for `rel`, or the reason to skip it, from lstat/stat alone."""
    path = os.path.join(base, rel)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "unreadable"
    real = path
    if stat.S_ISLNK(info.st_mode):
        real = os.path.realpath(path)
        target = _inside(base, real)
        if target is None:
            return "symlink_outside_root"
        # A link must not smuggle out what its target's own name would keep hidden.
        reason = rules.reason(target) if target else None
        if reason is not None:
            return reason
        try:
            info = os.stat(real)
        except OSError:
            return "broken_symlink"
    if stat.S_ISDIR(info.st_mode):
        return "directory"
    if not stat.S_ISREG(info.st_mode):
        return "not_a_file"
    if info.st_size > rules.max_bytes:
        return "too_large"
    return _Candidate(path=rel, real=real, info=info)


def _read(candidate: _Candidate, max_bytes: int, skipped: Counter[str]) -> SourceFile | None:
    try:
        data = _head(candidate.real, max_bytes + 1)
    except FileNotFoundError:
        skipped["missing"] += 1  # vanished since it was listed
        return None
    except OSError:
        skipped["unreadable"] += 1
        return None
    if len(data) > max_bytes:
        skipped["too_large"] += 1  # grew since it was listed
        return None
    if b"\0" in data[:_SNIFF_BYTES]:
        skipped["binary"] += 1
        return None
    # The mtime is taken before the read, so a racing edit looks stale.
    return source_file(candidate.path, data, candidate.info.st_mtime_ns)


def source_file(path: str, data: bytes, mtime_ns: int) -> SourceFile:
    """A file's bytes as the index reads them: UTF-8 (invalid bytes replaced and flagged), hashed."""
    try:
        text, invalid = data.decode("utf-8"), False
    except UnicodeDecodeError:
        text, invalid = data.decode("utf-8", errors="replace"), True
    return SourceFile(path=path, size=len(data), mtime_ns=mtime_ns, sha=hashlib.sha1(data).hexdigest(), text=text,
                      language=language_for(path), invalid_utf8=invalid)


def _sniff_binary(real: str) -> bool:
    try:
        return b"\0" in _head(real, _SNIFF_BYTES)
    except OSError:
        return True  # unreadable now: refuse rather than guess


def _head(real: str, limit: int) -> bytes:
    # O_NOFOLLOW: a symlink swapped in after the checks is refused, not followed.
    with os.fdopen(os.open(real, _OPEN_FLAGS), "rb") as handle:
        return handle.read(limit)


def _normalise(user_path: str) -> str:
    """A user's path as forward-slash parts under the root; refuses anything that could escape."""
    problem = None
    slashed = user_path.replace("\\", "/")
    parts = [part for part in slashed.split("/") if part not in ("", ".")]
    if not user_path.strip():
        problem = "is empty: pass a file path relative to the repository root"
    elif CONTROL.search(user_path):
        problem = "contains control characters: pass a plain path relative to the repository root"
    elif slashed.startswith("/") or _DRIVE.match(slashed):
        problem = "is absolute: pass a path relative to the repository root"
    elif ".." in parts and _climbs_out(parts):
        problem = "leaves the repository: pass a path relative to the repository root"
    elif ".." in parts:
        problem = "contains '..': pass the path relative to the repository root without '..'"
    elif not parts:
        problem = "is the repository root: pass a file path relative to it"
    if problem is not None:
        raise PathNotAllowed(f"path {user_path!r} {problem}")
    return "/".join(parts)


def _climbs_out(parts: list[str]) -> bool:
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else 1
        if depth < 0:
            return True
    return False


def _symlinked_parent(base: str, rel: str) -> str | None:
    # Discovery never walks through a symlinked directory, so no file beneath one is selected.
    parts = rel.split("/")
    for depth in range(1, len(parts)):
        folder = os.path.join(base, *parts[:depth])
        try:
            info = os.lstat(folder)
        except OSError:
            return "missing"
        if stat.S_ISLNK(info.st_mode):
            inside = _inside(base, os.path.realpath(folder)) is not None
            return "symlink_parent" if inside else "symlink_outside_root"
    return None


def _inside(base: str, real: str) -> str | None:
    """`real` relative to `base` with forward slashes ("" for base itself), or None if outside."""
    if real == base:
        return ""
    prefix = base if base.endswith(os.sep) else base + os.sep
    if not real.startswith(prefix):
        return None
    return real[len(prefix) :].replace(os.sep, "/")
