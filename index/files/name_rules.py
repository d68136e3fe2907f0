"""What a file's name alone keeps out of an index (and out of the server's reach): likely secrets,
dependency lock files, the user's exclude patterns, .git and the index's own folder, and names that
cannot be served. index/files/discovery.py applies these before any file is opened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from index.files.ignore import Matcher

__all__ = ["CONTROL", "LOCK_FILES", "SECRET_PATTERNS", "NameRules", "in_git_dir", "name_problem", "under_any"]

# gitignore-style; Selection.include overrides them, Selection.skip_secrets turns them off.
SECRET_PATTERNS: tuple[str, ...] = (
    ".env*", "*.pem", "*.key", "*.p12", "*.pfx", "*.keystore", "*.jks", "*.ppk", "*.kdbx",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "credentials*", ".git-credentials",
    ".netrc", "_netrc", ".pgpass", ".npmrc", ".pypirc", ".htpasswd",
)  # fmt: skip

# Machine-written dependency pins, gitignore-style; Selection.include overrides them. They are long
# lists of package names and hashes that compete with the code for every question: flask's
# uv.lock (310 KB) was 1,270 of its 3,264 chunks and a top-2 hit for `url_for` in vector mode.
LOCK_FILES: tuple[str, ...] = (
    "uv.lock", "poetry.lock", "pdm.lock", "Pipfile.lock", "pixi.lock", "Cargo.lock", "Gemfile.lock",
    "composer.lock", "flake.lock", "mix.lock", "Podfile.lock", "pubspec.lock", "yarn.lock", "bun.lock",
    "package-lock.json", "npm-shrinkwrap.json", "pnpm-lock.yaml", "packages.lock.json", "gradle.lockfile",
    "conda-lock.yml", "go.sum",
)  # fmt: skip

CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # exactly Unicode's category Cc


@dataclass(frozen=True, slots=True)
class NameRules:
    """The name-only rules of a Selection, for paths relative to the real root."""

    secrets: Matcher | None
    lock_files: Matcher | None
    include: Matcher | None
    exclude: Matcher | None
    index_dirs: tuple[str, ...]
    max_bytes: int

    def reason(self, rel: str) -> str | None:
        if in_git_dir(rel):
            return "git_dir"
        if under_any(rel, self.index_dirs):
            return "index_dir"
        for reason, rule in (("secret", self.secrets), ("lock_file", self.lock_files)):
            if rule is not None and rule.match_file(rel) and (self.include is None or not self.include.match_file(rel)):
                return reason
        if self.exclude is not None and self.exclude.match_file(rel):
            return "excluded"
        return None


def in_git_dir(rel: str) -> bool:
    # Asked twice for every listed file: the substring test first spares the split almost always.
    lower = rel.lower()
    return ".git" in lower and ".git" in lower.split("/")


def under_any(rel: str, folders: tuple[str, ...]) -> bool:
    return any(rel == folder or rel.startswith(folder + "/") for folder in folders)


def name_problem(rel: str) -> str | None:
    """Why a name cannot be served: read_file refuses these names, so the index must skip them too."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:  # surrogate-escaped bytes from a non-UTF-8 file name
        return "undecodable_name"
    if CONTROL.search(rel):
        return "control_name"  # a newline in a name could forge lines of a tool's text answer
    return None
