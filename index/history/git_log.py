"""Reading a repository's git log for the history (index/history/commits.py): which commits touched which
files, each file named as at the indexed HEAD.

Only non-merge commits that touch 1..MAX_FILES files are kept: merges and mass changes (renames of
whole trees, reformatting, licence headers) touch everything and say little. Their renames still
count, so the commits before them name today's files.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MAX_FILES", "LoggedCommit", "PastCommit", "git_location", "is_ancestor", "read_commits", "renamed_paths"]

MAX_FILES = 50
_GIT_TIMEOUT = 120.0


@dataclass(frozen=True)
class PastCommit:
    sha: str
    time: int  # committer time, unix seconds
    subject: str
    files: tuple[str, ...]  # paths relative to the indexed root


@dataclass(frozen=True)
class LoggedCommit:
    commit: PastCommit
    message: str  # subject and body


def _git(args: Sequence[str], cwd: Path | None = None) -> str | None:
    """stdout of a git command, or None when git is missing or the command fails."""
    try:
        done = subprocess.run(["git", "-c", "core.quotePath=false", *args], cwd=cwd, capture_output=True,
                              timeout=_GIT_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


def git_location(root: Path) -> tuple[Path, str, str] | None:
    """(git dir, HEAD sha, the root's path inside the repository) or None outside git."""
    out = _git(["rev-parse", "--absolute-git-dir", "--show-prefix", "HEAD"], cwd=root)
    lines = out.splitlines() if out else []
    if len(lines) != 3 or len(lines[2]) not in (40, 64):  # no repository, or one without commits yet
        return None
    return Path(lines[0]), lines[2], lines[1]


def is_ancestor(git_dir: Path, old: str, new: str) -> bool:
    return _git(["--git-dir", str(git_dir), "merge-base", "--is-ancestor", old, new]) is not None


def read_commits(git_dir: Path, head: str, limit: int, prefix: str = "",
                 since: str | None = None) -> tuple[list[LoggedCommit], dict[str, str]]:
    """Non-merge commits reachable from `head` (not from `since`), newest first, at most `limit`,
    keeping those that touch 1..MAX_FILES files under `prefix` (paths made relative to it); and
    the renames among them, as {path before: path at `head`}.

    Each commit's paths are named as at `head`: a file renamed since (pytest's move to src/, xarray's
    from xray/) still gets the votes and the text of the commits made under its old name. Without
    that, 65 % of the files pytest's past commits touched, 44 % of xarray's, were paths no longer
    there; following renames leaves 33 % and 7 % (files deleted since)."""
    spec = [head] + ([f"^{since}"] if since else [])
    # The rename limit is git's default, pinned: a user's git config does not change what is followed.
    out = _git(["--git-dir", str(git_dir), "-c", "diff.renameLimit=1000", "log", "--no-merges", "-M", f"-n{limit}",
                "--format=%x1e%H%x1f%ct%x1f%B%x1f", "--name-status", *spec, "--"])
    later: dict[str, str] = {}  # a path as older commits name it -> its name at `head`
    if out is None:
        return [], later
    found = []
    for record in out.split("\x1e")[1:]:
        parts = record.split("\x1f", 3)
        if len(parts) != 4:
            continue
        sha, when, message, names = parts
        touched, renames = _changes(names)
        files = _under(prefix, (later.get(path, path) for path in touched))
        if 0 < len(files) <= MAX_FILES:
            subject = message.strip().split("\n", 1)[0][:200]
            found.append(LoggedCommit(PastCommit(sha, int(when or 0), subject, files), message))
        for old, new in renames:  # read newest first: the renames after this commit are in `later`
            later[old] = later.get(new, new)
    return found, later


def renamed_paths(commit: PastCommit, renamed: Mapping[str, str], prefix: str) -> PastCommit:
    """A stored commit with its paths named as after `renamed` ({old: new} repository paths, as
    `read_commits` returns them)."""
    if not renamed:
        return commit
    files = _under(prefix, (renamed.get(prefix + path, prefix + path) for path in commit.files))
    return PastCommit(commit.sha, commit.time, commit.subject, files)


def _under(prefix: str, paths: Iterable[str]) -> tuple[str, ...]:
    """The repository paths under `prefix`, made relative to it, each once, in order."""
    return tuple(dict.fromkeys(p[len(prefix):] for p in paths if p.startswith(prefix)))


def _changes(names: str) -> tuple[list[str], list[tuple[str, str]]]:
    """(paths a commit touched, as it named them; its renames (old, new)) from `--name-status` lines."""
    touched, renames = [], []
    for line in names.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[0][:1] in ("R", "C"):  # R096<TAB>old<TAB>new: the new path is touched
            touched.append(fields[2])
            if fields[0][:1] == "R":
                renames.append((fields[1], fields[2]))
        elif len(fields) == 2:
            touched.append(fields[1])
    return touched, renames
