"""A full disk and a damaged index: one clear line naming the fix, never a traceback.

Disk full is simulated with RLIMIT_FSIZE in a `bridge index` subprocess (SIGXFSZ ignored, so a
write past the limit fails with EFBIG as it would with ENOSPC). Damage is done to every file of
a live index in turn (truncated, random bytes, wrong version, missing); `search` and `status`
must then say what is wrong and that `bridge index --rebuild` fixes it, and that command must.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bridge.cli import main
from index.build.fill import fill_vectors
from index.build.pipeline import BuildOptions, build_index
from index.search.searcher import Searcher
from index.store.layout import IndexDir

# Runs the rest of argv as `python -m bridge ...` with every file capped at argv[1] bytes.
LIMITED = (
    "import os, resource, signal, sys\n"
    "limit = int(sys.argv[1])\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'bridge', *sys.argv[2:]])\n"
)


def _write_repo(root: Path, files: int = 200) -> Path:
    for i in range(files):
        path = root / "pkg" / f"mod_{i:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"def handler_{i}(request):\n    \"\"\"Handle request {i} with care and return a response.\"\"\"\n"
            f"    return 'response {i}' * 3\n"
        )
    (root / "config.py").write_text("def parse_config(path):\n    \"\"\"Parse the settings file.\"\"\"\n    return {}\n")
    return root


def _answers(index_dir: Path) -> list[tuple[str, int, int]]:
    hits = Searcher(index_dir).search("parse the settings file handler_7", k=5, mode="lexical").hits
    return [(h.path, h.start_line, h.end_line) for h in hits]


def _bridge_limited(limit: int, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, BRIDGE_HOME=str(home), COLUMNS="200")
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run(
        [sys.executable, "-c", LIMITED, str(limit), *args], capture_output=True, text=True, timeout=120, env=env
    )


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr
    return lines[0]


# One file changed: a delta re-index (index/build/delta.py), whose new files are a few KB; 40 of 200:
# past the delta's share of the base, so the streaming single-segment build writes it all.
@pytest.mark.parametrize(("changed", "limit"), [(1, 4 * 1024), (40, 32 * 1024)], ids=["delta", "single-segment"])
def test_a_full_disk_while_writing_the_lexical_index_is_one_line_and_the_old_index_answers(
    tmp_path: Path, bridge_home: Path, changed: int, limit: int
) -> None:
    root, index_dir = _write_repo(tmp_path / "repo"), tmp_path / "index"
    build_index(root, index_dir, BuildOptions(embedder=None))
    before = _answers(index_dir)
    live = IndexDir(index_dir).current()
    for i in range(7, 7 + changed):
        (root / "pkg" / f"mod_{i:03d}.py").write_text(f"def handler_{i}(request):\n    return 'changed'\n")

    done = _bridge_limited(limit, "index", str(root), "--index-dir", str(index_dir), "--no-vectors", home=bridge_home)

    assert done.returncode == 1
    line = _one_error_line(done.stderr)
    assert f"cannot write the index at {index_dir}" in line and "free disk space" in line, line
    assert IndexDir(index_dir).current() == live and _answers(index_dir) == before
    assert not list(index_dir.glob("*.tmp")) and not list(index_dir.glob("g*.tmp"))
    build_index(root, index_dir, BuildOptions(embedder=None))
    assert IndexDir(index_dir).current() != live


def test_a_full_disk_while_embedding_is_one_line_and_a_rerun_finishes_the_vectors(
    tmp_path: Path, bridge_home: Path
) -> None:
    root, index_dir = _write_repo(tmp_path / "repo"), tmp_path / "index"

    done = _bridge_limited(
        200 * 1024, "index", str(root), "--index-dir", str(index_dir), "--embedder", "hash", home=bridge_home
    )

    assert done.returncode == 1
    line = _one_error_line(done.stderr)
    assert "cannot write the index" in line, line
    searcher = Searcher(index_dir)
    assert searcher.embedded_chunks() < searcher.manifest.chunks  # lexical part published, vectors not all there
    assert searcher.search("parse the settings file", mode="hybrid").hits
    report = fill_vectors(index_dir)
    assert report.complete
    assert not [p for p in index_dir.rglob("*") if p.name.endswith(".tmp")]


# --- damage ------------------------------------------------------------------------------------


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _random(path: Path) -> None:
    path.write_bytes(random.Random(path.name).randbytes(max(path.stat().st_size, 64)))


def _wrong_version(path: Path) -> None:
    data = json.loads(path.read_text())
    data["format_version"] = 99
    path.write_text(json.dumps(data))


def _not_an_object(path: Path) -> None:
    path.write_text("[1, 2, 3]")


def _missing_key(path: Path) -> None:
    data = json.loads(path.read_text())
    del data["files"]
    path.write_text(json.dumps(data))


def _delete(path: Path) -> None:
    path.unlink()


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _dangling(path: Path) -> None:
    path.write_text("g00000000000000000000-1\n")


def _escape(path: Path) -> None:
    path.write_text("../../etc\n")


Damage = Callable[[Path], None]
# (file of the live generation, or of the index folder when it starts with "/", damage, what must be said)
DAMAGE: list[tuple[str, Damage, str]] = [
    ("/CURRENT", _random, "rebuild"),
    ("/CURRENT", _empty, "rebuild"),
    ("/CURRENT", _dangling, "rebuild"),
    ("/CURRENT", _escape, "rebuild"),
    ("manifest.json", _truncate, "rebuild"),
    ("manifest.json", _random, "rebuild"),
    ("manifest.json", _wrong_version, "format 99"),
    ("manifest.json", _not_an_object, "rebuild"),
    ("manifest.json", _missing_key, "rebuild"),
    ("manifest.json", _delete, "rebuild"),
    ("chunks.sqlite", _truncate, "rebuild"),
    ("chunks.sqlite", _random, "rebuild"),
    ("chunks.sqlite", _delete, "rebuild"),
    ("lexical/lexical.json", _random, "rebuild"),
    ("lexical/lexical.json", _delete, "rebuild"),
    ("lexical/bm25.data.npy", _truncate, "rebuild"),
    ("lexical/bm25.rows.npy", _random, "rebuild"),
    ("lexical/bm25.indptr.npy", _delete, "rebuild"),
    ("lexical/vocab.json", _truncate, "rebuild"),
    ("lexical/vocab.json", _not_an_object, "rebuild"),
    ("vectors.faiss", _truncate, "rebuild"),
    ("vectors.faiss", _random, "rebuild"),
    ("vectors.json", _random, "rebuild"),
]


@pytest.fixture
def indexed(tmp_path: Path, bridge_home: Path) -> tuple[Path, Path]:
    root, index_dir = _write_repo(tmp_path / "repo", files=30), tmp_path / "index"
    build_index(root, index_dir, BuildOptions(embedder="hash"))
    fill_vectors(index_dir)
    return root, index_dir


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    out = capsys.readouterr()
    return int(stop.value.code or 0), out.out, out.err


def _damage(index_dir: Path, target: str, damage: Damage) -> None:
    store = IndexDir(index_dir)
    path = index_dir / target[1:] if target.startswith("/") else store.current() / target
    assert path.exists(), f"the index has no {target}: the layout changed, update this table"
    damage(path)


@pytest.mark.parametrize(
    ("target", "damage", "said"), DAMAGE, ids=[f"{t.strip('/')}-{d.__name__.strip('_')}" for t, d, _ in DAMAGE]
)
def test_a_damaged_index_is_reported_in_one_line_naming_the_fix_and_the_fix_works(
    indexed: tuple[Path, Path], capsys: pytest.CaptureFixture[str], target: str, damage: Damage, said: str
) -> None:
    root, index_dir = indexed
    _damage(index_dir, target, damage)
    where = ["--index-dir", str(index_dir)]

    for argv in (["search", "handler_7", *where], ["status", *where]):
        code, out, err = _cli(argv, capsys)
        assert code == 1 and out == "", (argv, out, err)
        line = _one_error_line(err)
        assert err.strip() == line, err
        assert "`bridge index --rebuild`" in line and said in line, line

    code, _, err = _cli(["index", str(root), *where, "--rebuild", "--embedder", "hash"], capsys)
    assert code == 0, err
    code, out, err = _cli(["search", "handler_7", *where, "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["hits"][0]["path"] == "pkg/mod_007.py"


def test_a_damaged_index_is_rebuilt_by_a_plain_index_run_too(
    indexed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root, index_dir = indexed
    _damage(index_dir, "lexical/terms.ids.i32", _random)
    _damage(index_dir, "manifest.json", _truncate)
    code, _, err = _cli(["index", str(root), "--index-dir", str(index_dir), "--embedder", "hash"], capsys)
    assert code == 0, err
    assert _answers(index_dir)


def test_a_damaged_embedding_cache_says_to_delete_it(indexed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    root, index_dir = indexed
    _random(index_dir / "embeddings.sqlite")
    (root / "new.py").write_text("def brand_new():\n    return 1\n")
    code, _, err = _cli(["index", str(root), "--index-dir", str(index_dir), "--embedder", "hash"], capsys)
    assert code == 1
    line = _one_error_line(err)
    assert "embeddings.sqlite" in line and "delete it" in line, line


def test_a_damaged_index_is_one_line_in_a_real_process_too(indexed: tuple[Path, Path], bridge_home: Path) -> None:
    _, index_dir = indexed
    _damage(index_dir, "chunks.sqlite", _random)
    env = dict(os.environ, BRIDGE_HOME=str(bridge_home), COLUMNS="200")
    env.pop("PYTHONWARNINGS", None)
    done = subprocess.run(
        [sys.executable, "-m", "bridge", "status", "--index-dir", str(index_dir)],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "`bridge index --rebuild`" in _one_error_line(done.stderr)
