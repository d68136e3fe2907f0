"""A non-editable install must carry every package and the prompt templates."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_wheel_contains_all_subpackages_and_the_prompt_templates(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True,
    )
    names = zipfile.ZipFile(next(tmp_path.glob("*.whl"))).namelist()
    for required in ("bridge/cli/__init__.py", "bridge/server/__init__.py", "index/search/searcher.py", "index/rank/ranker.json",
                     "prompts/system.txt",
                     "bridge/__main__.py"):
        assert required in names
    assert not any(n.startswith(("tests/", "bench/")) for n in names)
    wheel = zipfile.ZipFile(next(tmp_path.glob("*.whl")))
    entry_points = wheel.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert "bridge = bridge.cli:main" in entry_points and "mcp-retrieval-bridge = bridge.cli:main" in entry_points
