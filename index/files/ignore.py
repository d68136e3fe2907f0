"""Which paths git would list: `git ls-files` inside a work tree; elsewhere a walk that applies the
.gitignore files with git's rules. Also the pattern matchers for a Selection's lists.

Both halves only decide by name; what is then read (size, binary, symlinks, secrets) is
index/files/discovery.py's business.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from pathspec import GitIgnoreSpec

__all__ = ["Matcher", "any_of", "git_files", "is_listed", "matcher", "walk"]

# Inherited from a hook or an outer tool, these would point git at some other repository.
_GIT_ENV = frozenset(
    {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
     "GIT_NAMESPACE", "GIT_PREFIX", "GIT_CONFIG_PARAMETERS"}
)

# (directory relative to the root, its rules, one regex that matches wherever any of them does)
_Ignores = tuple[tuple[str, GitIgnoreSpec, re.Pattern[str] | None], ...]


@lru_cache(maxsize=64)
def _spec(patterns: tuple[str, ...]) -> GitIgnoreSpec | None:
    return GitIgnoreSpec.from_lines(patterns) if patterns else None


class Matcher(Protocol):
    def match_file(self, file: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class _AnyOf:
    """A pattern list without negations matches a path when any of its patterns does, so one
    alternation of their regular expressions decides it in one search instead of one per pattern
    (the secret patterns were a third of the time of listing a large tree)."""

    regex: re.Pattern[str]

    def match_file(self, file: str) -> bool:
        return self.regex.search(file) is not None


@lru_cache(maxsize=64)
def matcher(patterns: tuple[str, ...]) -> Matcher | None:
    spec = _spec(patterns)
    if spec is None:
        return None
    regexes = [getattr(p, "regex", None) for p in spec.patterns if p.include is not None]
    if any(p.include is not True for p in spec.patterns if p.include is not None) or None in regexes:
        return spec  # negations: the last matching pattern decides, as pathspec does it
    alternation = any_of(spec)
    return _AnyOf(alternation) if alternation is not None and regexes else spec


def git_files(base: str, only: str | None = None) -> list[str] | None:
    """Paths git would track under `base` (relative to it), or None outside a usable work tree.

    A root that its enclosing repository ignores (a vendored or generated folder) is treated as a
    plain folder: git would list nothing there, which is never what the user pointed us at.
    """
    probe = _git(base, ["check-ignore", "-q", "."])
    if probe is None or probe.returncode != 1:  # 0: the root is ignored; 128: no work tree
        return None
    options = ["--literal-pathspecs"] if only is not None else []
    listing = ["ls-files", "--cached", "--others", "--exclude-standard", "-z"]
    done = _git(base, options + listing + (["--", only] if only is not None else []))
    if done is None or done.returncode != 0:
        return None
    # An untracked nested repository is listed as "dir/"; the stat check drops it.
    return [os.fsdecode(item).rstrip("/") for item in done.stdout.split(b"\0") if item]


def _git(base: str, arguments: list[str]) -> subprocess.CompletedProcess[bytes] | None:
    # A repository's own config must not run programs while we only list files.
    command = ["git", "-c", "core.fsmonitor=false", "-C", base, *arguments]
    env = {key: value for key, value in os.environ.items() if key not in _GIT_ENV}
    try:
        return subprocess.run(command, capture_output=True, env=env, check=False)
    except OSError:  # git is not installed
        return None


def walk(base: str, index_dirs: tuple[str, ...], skipped: Counter[str]) -> list[str]:
    """Files under `base` that the .gitignore files keep; symlinks are listed, never followed."""
    found: list[str] = []
    pending: list[tuple[str, _Ignores]] = [("", ())]
    while pending:
        rel_dir, inherited = pending.pop()
        folder = os.path.join(base, rel_dir)
        try:
            with os.scandir(folder) as entries:
                listing = [(entry.name, _is_real_dir(entry)) for entry in entries]
        except OSError:
            skipped["unreadable"] += 1
            continue
        ignores = inherited
        if any(name == ".gitignore" for name, _ in listing):
            ignores = inherited + _ignore_file(folder, rel_dir)
        for name, is_dir in listing:
            if name == ".git":
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if _ignored(ignores, rel, is_dir):
                continue
            if not is_dir:
                found.append(rel)
            elif rel not in index_dirs:
                pending.append((rel, ignores))
    return found


def _is_real_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _ignore_file(folder: str, rel_dir: str) -> _Ignores:
    try:
        with open(os.path.join(folder, ".gitignore"), encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return ()
    spec = GitIgnoreSpec.from_lines(lines)
    return ((rel_dir, spec, any_of(spec)),) if len(spec) else ()


def any_of(spec: GitIgnoreSpec) -> re.Pattern[str] | None:
    """One alternation of the spec's patterns: most paths match none, and one search says so.
    (The `ps_d` group only ranks a directory match against a file match, which deciding whether
    anything matches never needs; the same group name in every alternative would not compile.)"""
    regexes = [getattr(p, "regex", None) for p in spec.patterns if p.include is not None]
    if None in regexes:
        return None
    return re.compile("|".join(f"(?:{r.pattern.replace('(?P<ps_d>/)', '/')})" for r in regexes if r is not None))


def _ignored(ignores: _Ignores, rel: str, is_dir: bool) -> bool:
    # git: a deeper .gitignore overrides a shallower one; within a file the last match wins.
    for rel_dir, spec, alternation in reversed(ignores):
        local = rel[len(rel_dir) + 1 :] if rel_dir else rel
        name = local + "/" if is_dir else local
        if alternation is not None and alternation.search(name) is None:
            continue  # no pattern of this file matches: no verdict, as check_file would say
        verdict = spec.check_file(name).include
        if verdict is not None:
            return verdict
    return False


def is_listed(base: str, rel: str) -> bool:
    """Would discovery list `rel`? Asks git about that one path, or replays the walk's rules."""
    listed = git_files(base, only=rel)
    if listed is not None:
        return rel in listed
    parts = rel.split("/")
    ignores: _Ignores = ()
    for depth in range(len(parts)):
        rel_dir = "/".join(parts[:depth])
        ignores += _ignore_file(os.path.join(base, rel_dir), rel_dir)
        is_dir = depth < len(parts) - 1
        if _ignored(ignores, "/".join(parts[: depth + 1]), is_dir):
            return False
    return True
