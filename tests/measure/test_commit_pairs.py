"""bench/commit_pairs.py: training pairs from the commits after a snapshot, nothing from before it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.commit_pairs import collect_pairs
from bench.train_ranker import Sample, fit
from tests.support.git import commit, git


def make_history(repo: Path) -> None:
    repo.mkdir()
    git(repo, "init", "-q")
    commit(repo, {"pkg/parse.py": "def parse(text):\n    return text.split()\n",
                  "pkg/render.py": "def render(rows):\n    return '\\n'.join(rows)\n"}, "Start the parser and renderer")
    commit(repo, {"pkg/parse.py": "def parse(text):\n    return text.split(',')\n"},
           "Parse commas before the snapshot\n\nThis commit is history, never a pair.")
    commit(repo, {"pkg/render.py": "def render(rows):\n    return ', '.join(rows)\n"},
           "Render rows separated by commas\n\nThe renderer joined rows with newlines.")
    commit(repo, {"tests/test_parse.py": "def test_parse():\n    assert True\n"},
           "Test the parser on empty input\n\nOnly a test changes, so there is no implementation file.")
    commit(repo, {"pkg/parse.py": "def parse(text):\n    return text.split(';')\n"}, "Parse semicolons")
    commit(repo, {"pkg/new.py": "def new():\n    return 1\n"},
           "Add a module the snapshot does not have\n\nIts file cannot be a gold file at the snapshot.")


def test_pairs_come_from_commits_after_the_snapshot_with_their_implementation_files(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_history(repo)
    samples = collect_pairs(repo / ".git", "demo", tmp_path / "work", back=4, pairs=10, log=lambda _m: None,
                            embedder_spec=None)
    # the test-only commit, the one-line message and the file the snapshot lacks give no pair
    assert [s.repo for s in samples] == ["extra:demo"]
    assert samples[0].gold.any()


def test_extra_pairs_with_no_weight_leave_the_fit_unchanged() -> None:
    rng = np.random.default_rng(0)

    def sample(i: int) -> Sample:
        gold = np.zeros(6, dtype=bool)
        gold[i % 6] = True
        return Sample(str(i), "r", rng.normal(size=(6, 34)), gold, 100)

    own, extra = [sample(i) for i in range(8)], [sample(i) for i in range(8, 14)]
    assert np.allclose(fit(own, 1.0, extra, extra_weight=0.0), fit(own, 1.0), atol=1e-4)
    assert not np.allclose(fit(own, 1.0, extra, extra_weight=1.0), fit(own, 1.0), atol=1e-4)
