"""What a file is for, read from its path alone: implementation, or auxiliary (tests, documentation,
examples, benchmarks, prose) that describes code rather than implements it. Hybrid search demotes
auxiliary files (index/rank/evidence.py) and the learned stage reads these kinds as features (index/rank/ranker.py)."""

from __future__ import annotations

from typing import NamedTuple

from index.files.languages import language_for

__all__ = ["PathKinds", "is_auxiliary", "is_auxiliary_code", "path_kinds"]

_TEST_DIRS = frozenset({"test", "tests", "testing"})
_DOC_DIRS = frozenset({"doc", "docs", "example", "examples", "benchmarks", "bench"})
# Languages of prose and data rather than code (None: the name says nothing, e.g. CHANGES).
_NOT_CODE = frozenset({None, "markdown", "rst", "text", "latex", "json", "yaml", "toml", "ini", "xml", "html",
                       "css", "scss", "less"})


class PathKinds(NamedTuple):
    """The path facts the learned stage was trained on."""

    auxiliary: bool
    test: bool  # a test folder, test_*.py or conftest.py (narrower than the tests `is_auxiliary` counts)
    doc: bool  # under a top-level documentation, example or benchmark folder
    not_code: bool


def is_auxiliary(path: str) -> bool:
    """Tests, documentation, examples and non-code files: they describe code rather than implement it."""
    parts = path.lower().split("/")
    return _is_test(parts) or parts[0] in _DOC_DIRS or language_for(path) in _NOT_CODE


def is_auxiliary_code(path: str) -> bool:
    """Code that is auxiliary only for its folder: a benchmark, an example script (not a test)."""
    parts = path.lower().split("/")
    return parts[0] in _DOC_DIRS and not _is_test(parts) and language_for(path) not in _NOT_CODE


def path_kinds(path: str) -> PathKinds:
    parts = path.lower().split("/")
    test = any(p in _TEST_DIRS for p in parts[:-1]) or parts[-1].startswith("test_") or parts[-1] == "conftest.py"
    return PathKinds(is_auxiliary(path), test, parts[0] in _DOC_DIRS, language_for(path) in _NOT_CODE)


def _is_test(parts: list[str]) -> bool:
    name = parts[-1]
    return (any(p in _TEST_DIRS for p in parts[:-1]) or name.startswith("test_") or name.endswith("_test.py")
            or name in ("conftest.py", "tests.py"))
