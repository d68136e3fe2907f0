"""Corpus trees and their indexes for the SWE-bench benchmark (bench/swebench.py).

Each base commit of a questions file is one tree under the corpora folder (built by
`materialize.sh` when missing) and gets one index, kept under WORK/indexes/<tree> so that a rerun
of the benchmark searches it again instead of rebuilding it.

Building 137 trees one by one would chunk every file of every tree (sympy alone: 74 trees of
~64k chunks, ~15 s each here). Instead the trees of one repository are visited in commit-time
order and copied, file by file, into one live folder that a single index follows; the index
build reuses the chunks and BM25 terms of every file whose bytes did not change and the
embedding cache reuses their vectors, so each tree costs about what its diff to the previous
one costs. The embedding cache of a repository (WORK/embeddings/<repo>.sqlite) is shared by all
its trees and outlives code changes; the index of a tree is what a fresh build would give.
"""

from __future__ import annotations

import filecmp
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench import paths
from bridge.measure.evaluate import Question
from index.build import BuildOptions, build_index, fill_vectors
from index.embed import Embedder, load_embedder
from index.history import History, SubjectEncoder, update_from_git
from index.search import Searcher
from index.store import IndexDir, default_home

__all__ = [
    "DONE_MARKER",
    "TreeJob",
    "commit_time",
    "ensure_corpora",
    "index_fingerprint",
    "kept_searchers",
    "missing_history",
    "plan_jobs",
    "prepare_history",
    "prepare_indexes",
    "sync_tree",
    "tree_name",
]

DONE_MARKER = "bench-complete"
EMBEDDER = "static"  # the default; bench/swebench.py --embedder picks another
# The modules (index/ROOM/NAME.py, index/NAME.py) and packages (index/NAME/) whose code decides what an
# index holds (not how it is searched or watched).
_CONTENT_MODULES = (
    "files/discovery", "files/name_rules", "files/ignore", "files/languages", "files/syntax", "files/chunk", "tokenize",
    "store/lexical", "store/postings", "embed", "store/vector", "store/layout", "store/segments", "build/changes",
    "build/delta", "build/pipeline", "build/fill",
)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class TreeJob:
    """One base commit: its tree and the questions asked about it."""

    repo: str
    commit: str
    tree: Path
    questions: tuple[Question, ...]
    committed_at: int  # unix time of the commit, 0 when no mirror says

    @property
    def name(self) -> str:
        return self.tree.name


def _mirror(mirrors: Path, repo: str) -> Path:
    """The bare mirror of `repo` (OWNER/NAME) under the mirrors folder."""
    return mirrors / repo.replace("/", "+") / "repo"


def tree_name(question: Question) -> str:
    if not question.repo or not question.base_commit:
        raise ValueError(f"question {question.id} has no repo/base_commit to pick a tree")
    return f"{question.repo.split('/')[-1]}@{question.base_commit[:12]}"


def commit_time(mirrors: Path, repo: str, commit: str) -> int:
    gitdir = _mirror(mirrors, repo)
    if not gitdir.is_dir():
        return 0
    done = subprocess.run(
        ["git", "--git-dir", str(gitdir), "log", "-1", "--format=%ct", commit],
        capture_output=True, text=True, check=False,
    )
    return int(done.stdout.strip() or 0) if done.returncode == 0 else 0


def plan_jobs(questions: Sequence[Question], corpora: Path, mirrors: Path) -> list[TreeJob]:
    """One job per tree, grouped by repository and in commit-time order within each."""
    groups: dict[str, list[Question]] = {}
    for question in questions:
        groups.setdefault(tree_name(question), []).append(question)
    jobs = []
    for name, group in groups.items():
        first = group[0]
        assert first.repo and first.base_commit
        jobs.append(TreeJob(first.repo, first.base_commit, corpora / name, tuple(group),
                            commit_time(mirrors, first.repo, first.base_commit)))
    return sorted(jobs, key=lambda j: (j.repo, j.committed_at, j.name))


def ensure_corpora(jobs: Sequence[TreeJob], questions_file: Path, corpora: Path, mirrors: Path,
                   progress: Progress) -> None:
    """Run materialize.sh when a tree is missing; it skips the trees already there."""
    missing = [job.name for job in jobs if not job.tree.is_dir()]
    if not missing:
        return
    script = paths.materialize_script()
    progress(f"{len(missing)} trees missing (first {missing[0]}): running {script}")
    subprocess.run(["bash", str(script), str(questions_file), str(corpora), str(mirrors)], check=True)
    still = [job.name for job in jobs if not job.tree.is_dir()]
    if still:
        raise FileNotFoundError(f"{len(still)} trees still missing after materialize.sh (first {still[0]}): "
                                f"check the mirrors under {mirrors}")


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def sync_tree(source: Path, target: Path) -> int:
    """Make `target` hold exactly the files of `source`; returns how many files were written or removed."""
    target.mkdir(parents=True, exist_ok=True)
    want, have = _files(source), _files(target)
    changed = 0
    for rel in sorted(have - want):
        (target / rel).unlink()
        changed += 1
    for rel in sorted(want):
        src, dst = source / rel, target / rel
        if rel in have and _same(src, dst):
            continue
        _clear_parents(target, dst)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.is_symlink() or dst.is_file():
            dst.unlink()
        elif dst.is_dir():  # a folder in the old tree is a file (or link) in the new one
            shutil.rmtree(dst)
        shutil.copyfile(src, dst, follow_symlinks=False)
        changed += 1
    for folder in sorted((p for p in target.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(folder.iterdir()):
            folder.rmdir()
    return changed


def _same(src: Path, dst: Path) -> bool:
    """Same kind and same bytes; links compare by target, so a link that points nowhere
    (or a file that became a link between two trees, as astropy's CITATION did) never crashes."""
    if src.is_symlink() or dst.is_symlink():
        return src.is_symlink() and dst.is_symlink() and os.readlink(src) == os.readlink(dst)
    return dst.is_file() and filecmp.cmp(src, dst, shallow=False)


def _clear_parents(target: Path, dst: Path) -> None:
    """Remove files or links that stand where the new tree has a folder above `dst`."""
    for parent in reversed(dst.relative_to(target).parents[:-1]):
        where = target / parent
        if where.is_symlink() or where.is_file():
            where.unlink()


def index_fingerprint(embedder: Embedder) -> str:
    """Identity of the code that builds indexes and of the embedder: a kept index made by other
    code may have another format or other chunks, so it is rebuilt rather than trusted."""
    import index

    home = Path(index.__file__).parent
    digest = hashlib.sha1(str(getattr(embedder, "id", embedder)).encode())
    for source in content_sources(home):
        digest.update(source.encode() + b"\0" + (home / source).read_bytes())
    return digest.hexdigest()[:16]


def content_sources(home: Path, names: Sequence[str] = _CONTENT_MODULES) -> list[str]:
    """The source files, relative to `home`, of its modules and packages `names` (a package's
    sorted). A name that is neither was moved: FileNotFoundError, which says to update the list."""
    found: list[str] = []
    for name in names:
        if (home / f"{name}.py").is_file():
            found.append(f"{name}.py")
        elif (home / name / "__init__.py").is_file():
            found.extend(sorted(p.relative_to(home).as_posix() for p in (home / name).rglob("*.py")))
        else:
            raise FileNotFoundError(f"{home.name}/{name} is neither a module nor a package: "
                                    f"update _CONTENT_MODULES in {__name__}")
    return found


def _keep(live_index: Path, kept: Path, fingerprint: str) -> None:
    """Copy the live generation to `kept` (without the embedding cache), then mark it complete."""
    generation = IndexDir(live_index).current()
    scratch = kept.with_name(kept.name + ".tmp")
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(generation, scratch / generation.name)
    (scratch / "CURRENT").write_text(generation.name + "\n", encoding="utf-8")
    (scratch / DONE_MARKER).write_text(fingerprint, encoding="utf-8")
    shutil.rmtree(kept, ignore_errors=True)
    os.replace(scratch, kept)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def prepare_indexes(jobs: Sequence[TreeJob], work: Path, embedder: Embedder,
                    progress: Progress, spec: str = EMBEDDER) -> tuple[dict[str, Path], list[str]]:
    """Index every tree once (lexical + static vectors): (tree name -> kept index, trees built now)."""
    fingerprint = index_fingerprint(embedder)
    kept: dict[str, Path] = {}
    built: list[str] = []
    for number, job in enumerate(jobs, start=1):
        target = work / "indexes" / job.name
        kept[job.name] = target
        if _read(target / DONE_MARKER) == fingerprint:
            continue
        short = job.repo.split("/")[-1]
        live, live_index = work / "live" / short, work / "live-index" / short
        if _read(live_index / DONE_MARKER) != fingerprint:
            # Chunks are reused by file content alone, so chunks made by other code must go.
            shutil.rmtree(live_index, ignore_errors=True)
            live_index.mkdir(parents=True)
            (live_index / DONE_MARKER).write_text(fingerprint, encoding="utf-8")
        started = time.perf_counter()
        changed = sync_tree(job.tree, live)
        # history comes from the mirror, limited to the base commit's ancestors (prepare_history)
        build = build_index(live, live_index, BuildOptions(embedder=spec, lock_timeout=600, history=False))
        fill = fill_vectors(live_index, embedder=embedder, cache_path=work / "embeddings" / f"{short}.sqlite")
        if not fill.complete:
            raise RuntimeError(f"vectors of {job.name} are incomplete ({fill.embedded_chunks}/{fill.chunks})")
        _keep(live_index, target, fingerprint)
        built.append(job.name)
        progress(f"[{number}/{len(jobs)}] {job.name}: {changed} files synced, {build.chunks} chunks "
                 f"({build.new_chunks} new, {fill.newly_embedded} embedded) in {time.perf_counter() - started:.1f}s")
    return kept, built


class _SharedSubjects(SubjectEncoder):
    """MiniLM for commit subjects, remembering every subject it embedded: the trees of one
    repository share most of their history, so each subject is embedded once per run."""

    def __init__(self) -> None:
        super().__init__("minilm")
        self._seen: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        missing = sorted({t for t in texts if t not in self._seen})
        self._seen.update(zip(missing, super().encode(missing)))
        return np.stack([self._seen[t] for t in texts]) if texts else super().encode([])


def missing_history(jobs: Sequence[TreeJob], kept: dict[str, Path], mirrors: Path) -> list[TreeJob]:
    """The trees whose kept index has no history with subject vectors yet although their mirror
    could give it. A build stopped during its history step leaves some, and ranking on them drops
    the history signal without a word (shared/bench hybrid R@1 0.650 → 0.621 with 74 of 137 left)."""
    return [job for job in jobs if _mirror(mirrors, job.repo).is_dir() and not _has_history(kept[job.name])]


def _has_history(index: Path) -> bool:
    history = History.load(index)
    return history is not None and history.subjects is not None


def prepare_history(jobs: Sequence[TreeJob], kept: dict[str, Path], mirrors: Path, progress: Progress,
                    subjects: SubjectEncoder | None = None) -> list[str]:
    """Give every kept index the git history of its base commit's ancestors, read from the mirror,
    with its commit subjects embedded (`subjects`: MiniLM unless given): the commits after the base
    (among them the fix) never reach the index. Only the trees of `missing_history` are read, so
    a second call does nothing. Returns trees done now."""
    done = []
    encoder = subjects or _SharedSubjects()
    for job in missing_history(jobs, kept, mirrors):
        report = update_from_git(_mirror(mirrors, job.repo), job.commit, kept[job.name], subjects=encoder)
        done.append(job.name)
        progress(f"{job.name}: history of {report.commits} commits in {report.seconds:.1f}s")
    return done


def kept_searchers(questions: Sequence[Question], corpora: Path, mirrors: Path, work: Path, log: Progress,
                   embedder_spec: str = EMBEDDER, learned: bool = True) -> Iterator[tuple[TreeJob, Searcher]]:
    """Each tree of `questions` with a searcher on the index bench/swebench.py kept for it under WORK/indexes
    (its history completed first), for the scripts that study or train ranking on those indexes."""
    jobs = plan_jobs(questions, corpora, mirrors)
    kept = {job.name: work / "indexes" / job.name for job in jobs}
    prepare_history(jobs, kept, mirrors, log)
    embedder = load_embedder(embedder_spec, cache_dir=default_home() / "models")
    for job in jobs:
        yield job, Searcher(kept[job.name], embedder_loader=lambda _spec: embedder, max_query_bytes=1 << 20,
                            learned=learned)
