"""index/history/subjects.py: past commits whose subjects mean what a report's title means vote for the
files they touched; the subjects are embedded once, at index time, and only the new ones later."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
import pytest

from index.build.fill import fill_vectors
from index.build.pipeline import BuildOptions, build_index
from index.embed import Embedder, HashEmbedder
from index.history.commits import History, fill_subjects, update_from_git, update_history
from index.history.subjects import SubjectEncoder, SubjectVectors, per_file, subject_spec, subject_votes
from index.rank.ranker import FEATURES
from index.search.probe import file_features
from index.search.searcher import Searcher
from tests.support.git import commit, git, printer_repo

SPEC = "hash:64"


class CountingLoader:
    """The hash model, counting the texts it was asked to embed."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.loads = 0

    def __call__(self, spec: str) -> Embedder:
        self.loads += 1
        model = HashEmbedder(int(spec.split(":")[1]))
        outer = self

        class Counting:
            id, dim = model.id, model.dim

            def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
                outer.texts.extend(texts)
                return model.encode(texts, batch_size)

            def encode_query(self, text: str) -> np.ndarray:
                outer.texts.append(text)
                return model.encode_query(text)

        return Counting()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return printer_repo(tmp_path / "repo")


def test_the_subjects_model_is_minilm_for_every_real_model_and_none_without_one() -> None:
    assert subject_spec("minilm") == subject_spec("static") == subject_spec("/models/mine") == "minilm"
    assert subject_spec(None) is None
    assert subject_spec("hash:64") == "hash:64"


def test_every_commit_subject_gets_a_vector_in_the_history_order(repo: Path, tmp_path: Path) -> None:
    update_history(repo, tmp_path / "idx", subjects=SubjectEncoder(SPEC))
    history = History.load(tmp_path / "idx")
    assert history is not None and history.subjects is not None
    assert history.subjects.matrix.shape == (3, 64) and history.subjects.spec == SPEC
    expected = HashEmbedder(64).encode([c.subject for c in history.commits])
    assert np.allclose(history.subjects.matrix.astype(np.float32), expected, atol=1e-3)


def test_a_reindex_embeds_only_the_new_subjects_and_loads_no_model_when_there_are_none(
    repo: Path, tmp_path: Path
) -> None:
    loader = CountingLoader()
    update_history(repo, tmp_path / "idx", subjects=SubjectEncoder(SPEC, loader))
    assert len(loader.texts) == 3
    quiet = CountingLoader()
    update_history(repo, tmp_path / "idx", subjects=SubjectEncoder(SPEC, quiet))
    assert quiet.loads == 0
    commit(repo, {"pkg/parser.py": "def parse(s):\n    return s.strip()\n"}, "Strip whitespace in the parser")
    later = CountingLoader()
    update_history(repo, tmp_path / "idx", subjects=SubjectEncoder(SPEC, later))
    assert later.texts == ["Strip whitespace in the parser"]
    history = History.load(tmp_path / "idx")
    assert history is not None and history.subjects is not None
    fresh = HashEmbedder(64).encode([c.subject for c in history.commits])
    assert np.allclose(history.subjects.matrix.astype(np.float32), fresh, atol=1e-3)


def test_a_history_without_vectors_gets_them_and_one_without_a_model_drops_them(repo: Path, tmp_path: Path) -> None:
    git_dir = Path(git(repo, "rev-parse", "--absolute-git-dir").strip())
    head = git(repo, "rev-parse", "HEAD").strip()
    update_from_git(git_dir, head, tmp_path / "idx")
    assert History.load(tmp_path / "idx").subjects is None  # type: ignore[union-attr]
    update_from_git(git_dir, head, tmp_path / "idx", subjects=SubjectEncoder(SPEC))
    assert History.load(tmp_path / "idx").subjects is not None  # type: ignore[union-attr]
    update_from_git(git_dir, head, tmp_path / "idx")
    assert History.load(tmp_path / "idx").subjects is None  # type: ignore[union-attr]


def test_vectors_that_do_not_fit_the_commits_are_not_used(tmp_path: Path) -> None:
    SubjectVectors(SPEC, "hash:64", np.ones((2, 64), dtype=np.float16)).save(tmp_path)
    assert SubjectVectors.load(tmp_path, 2) is not None
    assert SubjectVectors.load(tmp_path, 3) is None
    (tmp_path / "subjects.json").write_text("{", encoding="utf-8")
    assert SubjectVectors.load(tmp_path, 2) is None


def test_the_commits_nearest_the_title_vote_for_their_files_by_cosine_and_count() -> None:
    model = HashEmbedder(256)
    subjects = ["Fix pretty printing of nested matrices", "Add the parser", "Pretty printing of nested lists"]
    files = [("pkg/printer.py",), ("pkg/parser.py",), ("pkg/printer.py", "pkg/gone.py")]
    vectors = SubjectVectors("hash:256", model.id, model.encode(subjects))
    title = model.encode_query("nested matrices print wrong")
    commits, cosines = vectors.nearest(title)
    assert commits[0] == 0 and list(cosines) == sorted(cosines, reverse=True)
    by_path = subject_votes(vectors, lambda i: files[i], title)
    assert sorted(c for c, _ in by_path["pkg/printer.py"]) == [0, 2]  # all three vote: there are fewer than 30
    summed, count = per_file(by_path, {"pkg/printer.py": 0, "pkg/parser.py": 1}, 2)  # gone.py: not indexed
    assert count.tolist() == [2.0, 1.0] and summed[0] > summed[1]


def test_a_search_reads_the_title_against_the_subjects_with_the_model_that_made_them(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", BuildOptions(embedder=SPEC))
    fill_vectors(tmp_path / "idx")
    searcher = Searcher(tmp_path / "idx")
    history = searcher.history()
    assert history is not None and history.subjects is not None and history.subjects.spec == SPEC
    paths, features = file_features(searcher, "Nested matrices print wrong\nThe brackets are lost.")
    voters = features[:, FEATURES.index("subject_voters")]
    assert voters[paths.index("pkg/printer.py")] > 0
    _, one_line = file_features(searcher, "nested matrices print wrong")
    assert not one_line[:, FEATURES.index("subject_voters")].any()  # no title: no subject votes


def test_many_subjects_are_embedded_once_each_and_come_back_in_their_order() -> None:
    loader = CountingLoader()
    texts = [f"Fix issue {i % 20} in the printer" for i in range(45)]
    vectors = SubjectEncoder(SPEC, loader).encode(texts)
    assert sorted(loader.texts) == sorted(set(texts))
    assert np.allclose(vectors, HashEmbedder(64).encode(texts))


def test_a_hit_shows_the_past_commits_titled_like_the_question_as_evidence(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", BuildOptions(embedder=SPEC))
    fill_vectors(tmp_path / "idx")
    searcher = Searcher(tmp_path / "idx")
    hits = searcher.search("Pretty printing of nested matrices is wrong\nBrackets are lost.", k=3).hits
    printer = next(h for h in hits if h.path == "pkg/printer.py")
    titled = [line for line in printer.evidence if "titled like the question" in line]
    assert len(titled) == 1 and titled[0].startswith("1 past commit titled like the question: ")
    assert "Fix pretty printing of nested matrices" in titled[0] and "Add the pretty printer" not in titled[0]
    unrelated = searcher.search("Return value of repr is surprising\nrepr(x) returns it.", k=3).hits
    assert unrelated and not any("titled like the question" in line for h in unrelated for line in h.evidence)


def test_a_first_index_leaves_the_subjects_to_the_fill_which_embeds_each_once(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", BuildOptions(embedder=SPEC))
    waiting = History.load(tmp_path / "idx")
    assert waiting is not None and len(waiting.commits) == 3 and waiting.subjects is None  # BM25 votes already
    assert fill_vectors(tmp_path / "idx").subjects == 3
    history = History.load(tmp_path / "idx")
    assert history is not None and history.subjects is not None
    expected = HashEmbedder(64).encode([c.subject for c in history.commits])
    assert np.allclose(history.subjects.matrix.astype(np.float32), expected, atol=1e-3)
    assert fill_vectors(tmp_path / "idx").subjects == 0


def test_a_reindex_after_a_fill_extends_the_subjects_at_once(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", BuildOptions(embedder=SPEC))
    fill_vectors(tmp_path / "idx")
    commit(repo, {"pkg/parser.py": "def parse(s):\n    return s.strip()\n"}, "Strip whitespace in the parser")
    build_index(repo, tmp_path / "idx", BuildOptions(embedder=SPEC))
    history = History.load(tmp_path / "idx")
    assert history is not None and history.subjects is not None and len(history.subjects.matrix) == 4


def test_subjects_made_while_a_reindex_wrote_a_newer_history_are_dropped_and_made_again(
    repo: Path, tmp_path: Path
) -> None:
    idx = tmp_path / "idx"
    update_history(repo, idx, subjects=SubjectEncoder(SPEC), later=True)

    @contextmanager
    def reindexed_meanwhile() -> Iterator[None]:
        commit(repo, {"pkg/parser.py": "def parse(s):\n    return s.lower()\n"}, "Lower-case in the parser")
        update_history(repo, idx, subjects=SubjectEncoder(SPEC), later=True)
        yield

    assert fill_subjects(idx, SubjectEncoder(SPEC), reindexed_meanwhile()) == 0
    newer = History.load(idx)
    assert newer is not None and len(newer.commits) == 4 and newer.subjects is None
    assert fill_subjects(idx, SubjectEncoder(SPEC), nullcontext()) == 4
    assert History.load(idx).subjects is not None  # type: ignore[union-attr]


def test_subject_vectors_cut_short_are_made_again_by_the_next_fill(repo: Path, tmp_path: Path) -> None:
    build_index(repo, tmp_path / "idx", BuildOptions(embedder=SPEC))
    assert fill_vectors(tmp_path / "idx").subjects == 3
    vectors = next((tmp_path / "idx").rglob("subjects.npy"))
    vectors.write_bytes(vectors.read_bytes()[:-40])  # a disk that filled up mid-write; the description is intact
    assert History.load(tmp_path / "idx").subjects is None  # type: ignore[union-attr]
    assert fill_vectors(tmp_path / "idx").subjects == 3
    assert History.load(tmp_path / "idx").subjects is not None  # type: ignore[union-attr]
    assert fill_vectors(tmp_path / "idx").subjects == 0
