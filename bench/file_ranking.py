"""File-level ranking for issue-style questions, built on an index's own BM25 and vectors.

`bridge search` ranks chunks; a question such as a bug report asks "which file?". This ranker
turns the same index into a file ranking with these signals, fused by weighted reciprocal rank
(score = Σ weight / (RRF_K + rank), the fusion the index itself uses for chunks):

- lexical: a file's best chunk BM25 score for the whole question (code-aware terms);
- whole_files: BM25 over whole files with a plain word tokenizer, given by the caller
  (bench/bm25_files_baseline.py): it rewards a file whose vocabulary covers the whole report;
- mentions: files the question names, as a path (tracebacks: `File ".../pkg/mod.py"`) or as a
  dotted module (`from pkg.mod import f`, `pkg.mod.Class`), most-mentioned first;
- definitions: files that define identifiers the question uses in code (backticks, code blocks,
  tracebacks, or names shaped like code), weighted by how rare each definition is (idf);
- dense: a file's best chunk cosine among the nearest chunks to the question (reported as an
  ablation only: with the static embedder it lowers recall on issue-length questions).

Auxiliary files (tests, docs, examples, and files in no programming language) have their fused
score multiplied by AUXILIARY_FACTOR unless the question names them: a report of wrong behaviour
is answered by the implementation, and tests and docs repeat the implementation's vocabulary.
Nothing here is tuned to individual questions; the constants are round numbers (0.25 and 0.5
give the same recall), and bench/swebench.py reports every variant below beside the product's
own modes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from index.languages import language_for
from index.lexical import LexicalIndex
from index.store import ChunkTable, IndexDir
from index.tokenize import terms
from index.vector import VectorIndex

__all__ = [
    "AUXILIARY_FACTOR",
    "FileRanker",
    "QueryClues",
    "Signals",
    "VARIANTS",
    "defined_files",
    "definitions_of",
    "extract_clues",
    "fuse",
    "is_auxiliary",
    "mentioned_files",
]

RRF_K = 60
AUXILIARY_FACTOR = 0.5
DENSE_CHUNKS = 1000  # nearest chunks looked at for the dense file ranking
MAX_MATCHES = 3  # a mention matching more files than this is too vague to count
# Each reported variant: signal weights, and whether auxiliary files are demoted. Signals are
# added one at a time up to "all"; "all+dense" shows what the dense signal does.
_CORE = {"lexical": 1.0, "whole_files": 1.0, "mentions": 1.0, "definitions": 1.0}
VARIANTS: dict[str, tuple[dict[str, float], bool]] = {
    "lexical+files": ({"lexical": 1.0, "whole_files": 1.0}, False),
    "+mentions": ({"lexical": 1.0, "whole_files": 1.0, "mentions": 1.0}, False),
    "+definitions": (_CORE, False),
    "all": (_CORE, True),
    "all+dense": ({**_CORE, "dense": 1.0}, True),
}

_PATH = re.compile(
    r"[\w.\-/\\]*[\w\-]+\.(?:py|pyx|pxd|pyi|c|h|cc|cpp|hpp|js|jsx|ts|tsx|go|rs|java|rb|rst|md|txt|cfg|toml|ini|ya?ml|json)\b"
)
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_FROM_IMPORT = re.compile(r"\bfrom\s+([\w.]+)\s+import\s+\(?([\w\s,]+)")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_CODE_SHAPED = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]|[a-z][A-Z]|\w\(")
_FENCE = re.compile(r"```.*?(?:```|$)", re.S)
_INLINE = re.compile(r"`[^`\n]+`")
_CODE_LINE = re.compile(r"^(?:\s{4,}|\t|>>>|\.\.\.|\s*File \").*$", re.M)
_DEFINITION = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class|function|func|fn|struct|enum|trait|interface)[ \t]+([A-Za-z_]\w*)", re.M)
_TEST_DIRS = frozenset({"test", "tests", "testing"})
_DOC_DIRS = frozenset({"doc", "docs", "example", "examples", "benchmarks", "bench"})
# Languages of prose and data rather than code (None: the name says nothing, e.g. CHANGES).
_NOT_CODE = frozenset({None, "markdown", "rst", "text", "latex", "json", "yaml", "toml", "ini", "xml", "html",
                       "css", "scss", "less"})


@dataclass(frozen=True)
class QueryClues:
    """What a question says about code, beyond its words."""

    paths: tuple[str, ...]  # path-like mentions, "/" separators, in order of appearance
    modules: tuple[str, ...]  # dotted names, in order of appearance
    identifiers: frozenset[str]  # names used in code context or shaped like code


@dataclass(frozen=True)
class Signals:
    """Per-signal file rankings (file numbers, best first) and the files the question names."""

    rankings: Mapping[str, Sequence[int]]
    named: frozenset[int]


def extract_clues(query: str) -> QueryClues:
    paths = tuple(m.group(0).replace("\\", "/").removeprefix("./") for m in _PATH.finditer(query))
    modules = [m.group(0) for m in _DOTTED.finditer(query)]
    for match in _FROM_IMPORT.finditer(query):
        modules.extend(f"{match.group(1)}.{name}" for name in re.findall(r"\w+", match.group(2)))
    code = "\n".join([*_FENCE.findall(query), *_INLINE.findall(query), *_CODE_LINE.findall(query)])
    identifiers = set(_IDENT.findall(code))
    for match in _IDENT.finditer(query):
        window = query[max(0, match.start() - 1) : match.end() + 1]
        if _CODE_SHAPED.search(window):
            identifiers.add(match.group(0))
    return QueryClues(paths, tuple(modules), frozenset(identifiers))


def is_auxiliary(path: str) -> bool:
    """Tests, documentation, examples and non-code files: they describe code rather than implement it."""
    parts = path.lower().split("/")
    name = parts[-1]
    if any(p in _TEST_DIRS for p in parts[:-1]) or parts[0] in _DOC_DIRS:
        return True
    if name.startswith("test_") or name.endswith("_test.py") or name in ("conftest.py", "tests.py"):
        return True
    return language_for(path) in _NOT_CODE


def _suffix_matches(mention: str, by_suffix: Mapping[str, Sequence[int]]) -> Sequence[int]:
    # The longest tail of the mention that is the tail of some file path decides.
    parts = mention.strip("/").split("/")
    for start in range(len(parts)):
        found = by_suffix.get("/".join(parts[start:]))
        if found:
            return found if len(found) <= MAX_MATCHES else ()
    return ()


def _suffix_table(paths: Sequence[str]) -> dict[str, list[int]]:
    table: dict[str, list[int]] = {}
    for i, path in enumerate(paths):
        parts = path.split("/")
        for start in range(len(parts)):
            table.setdefault("/".join(parts[start:]), []).append(i)
    return table


def mentioned_files(clues: QueryClues, paths: Sequence[str], table: Mapping[str, Sequence[int]] | None = None) -> list[int]:
    """Files the question names, most-named first (ties: first named first)."""
    table = table if table is not None else _suffix_table(paths)
    counts: dict[int, int] = {}
    for mention in clues.paths:
        for i in _suffix_matches(mention, table):
            counts[i] = counts.get(i, 0) + 1
    for dotted in clues.modules:
        parts = dotted.split(".")
        for end in range(len(parts), 1, -1):  # the longest prefix that is a module wins
            module = "/".join(parts[:end])
            found = [*table.get(module + ".py", ()), *table.get(module + "/__init__.py", ())]
            if found:
                if len(found) <= MAX_MATCHES:
                    for i in found:
                        counts[i] = counts.get(i, 0) + 1
                break
    return sorted(counts, key=lambda i: -counts[i])  # sorted() is stable: first named stays first


def definitions_of(texts: Sequence[str], symbols: Sequence[str | None], files: Sequence[int]) -> dict[str, frozenset[int]]:
    """identifier -> files defining it, from chunk symbols and definition lines of chunk texts."""
    found: dict[str, set[int]] = {}
    for text, symbol, file in zip(texts, symbols, files):
        names = set(_DEFINITION.findall(text))
        if symbol:
            names.update(symbol.split("."))
        for name in names:
            found.setdefault(name, set()).add(file)
    return {name: frozenset(where) for name, where in found.items()}


def defined_files(clues: QueryClues, definitions: Mapping[str, frozenset[int]], n_files: int) -> list[int]:
    """Files defining the question's identifiers, by the summed idf of the names they define."""
    score: dict[int, float] = {}
    for name in clues.identifiers:
        where = definitions.get(name)
        if not where or name.startswith("__"):
            continue
        idf = math.log(n_files / len(where))
        for i in where:
            score[i] = score.get(i, 0.0) + idf
    return sorted((i for i in score if score[i] > 0), key=lambda i: (-score[i], i))


def fuse(rankings: Mapping[str, Sequence[int]], weights: Mapping[str, float],
         demoted: frozenset[int] = frozenset(), factor: float = 1.0) -> list[int]:
    """Weighted reciprocal-rank fusion; files in `demoted` have their score multiplied by factor."""
    score: dict[int, float] = {}
    for name, weight in weights.items():
        for rank, i in enumerate(rankings.get(name, ()), start=1):
            score[i] = score.get(i, 0.0) + weight / (RRF_K + rank)
    for i in demoted & score.keys():
        score[i] *= factor
    return sorted(score, key=lambda i: (-score[i], i))


def _best_per_file(values: np.ndarray, chunk_file: np.ndarray, n_files: int) -> np.ndarray:
    best = np.full(n_files, -np.inf, dtype=np.float64)
    np.maximum.at(best, chunk_file, values)
    return best


class FileRanker:
    """Ranks the files of one index for a question; loads the index's parts once."""

    def __init__(self, index_dir: Path, embedder: Any) -> None:
        store = IndexDir(index_dir)
        generation = store.current()
        manifest = store.manifest(generation)
        self.paths: tuple[str, ...] = tuple(manifest.files)
        chunk_file = np.zeros(manifest.chunks, dtype=np.int64)
        for i, entry in enumerate(manifest.files.values()):
            chunk_file[entry.first_chunk : entry.first_chunk + entry.n_chunks] = i
        self._chunk_file = chunk_file
        self._lexical = LexicalIndex.load(generation / "lexical")
        self._vectors = VectorIndex.load(generation / "vectors.faiss")
        self._embedder = embedder
        table = ChunkTable(generation)
        try:
            chunks = table.all()
        finally:
            table.close()
        self._definitions = definitions_of([c.text for c in chunks], [c.symbol for c in chunks], chunk_file.tolist())
        self._suffixes = _suffix_table(self.paths)
        self._number = {path: i for i, path in enumerate(self.paths)}
        self._auxiliary = frozenset(i for i, p in enumerate(self.paths) if is_auxiliary(p))

    def signals(self, query: str, whole_files: Sequence[str] = ()) -> Signals:
        """Every signal's ranking; `whole_files` is a whole-file ranking (paths) made elsewhere."""
        n = len(self.paths)
        lexical = _best_per_file(self._lexical.scores(terms(query)), self._chunk_file, n)
        lex_order = [int(i) for i in np.argsort(-lexical, kind="stable") if lexical[i] > 0]
        dense_hits = self._vectors.top(self._embedder.encode_query(query), DENSE_CHUNKS)
        dense = np.full(n, -np.inf)
        for cid, similarity in dense_hits:
            file = self._chunk_file[cid]
            dense[file] = max(dense[file], similarity)
        dense_order = [int(i) for i in np.argsort(-dense, kind="stable") if np.isfinite(dense[i])]
        clues = extract_clues(query)
        mentions = mentioned_files(clues, self.paths, self._suffixes)
        return Signals(
            rankings={
                "lexical": lex_order,
                "dense": dense_order,
                "mentions": mentions,
                "definitions": defined_files(clues, self._definitions, n),
                "whole_files": [self._number[p] for p in whole_files if p in self._number],
            },
            named=frozenset(mentions),
        )

    def rank(self, signals: Signals, variant: str = "all") -> list[str]:
        weights, demote = VARIANTS[variant]
        demoted = self._auxiliary - signals.named if demote else frozenset()
        order = fuse(signals.rankings, weights, demoted, AUXILIARY_FACTOR)
        return [self.paths[i] for i in order]
