"""The index on Milvus: one collection per repository and build, an alias as the live pointer.

    <base>                      alias: the live build of one repository (the counterpart of CURRENT)
    <base>_g<time>              chunks: id (= chunk id), path, lines, symbol, text, terms (analyzed),
                                sparse (Milvus's BM25 function over terms), dense (the embedder's vectors)
    <base>_g<time>_files        the manifest (row -1) and one row per file (first chunk, chunk count, sha)

`<base>` is named like the local index folder (`bridge_<folder name>_<sha1 of the real path>`). A
build writes both collections completely, flushes and loads them, and only then moves the alias;
the collection the alias left is dropped by a later build, after `GRACE_SECONDS`, so a reader that
resolved the alias a moment ago still finds it. A writer killed at any point leaves the alias on the
previous build; its unfinished collection is never named by the alias and is dropped later.

Lexical search: the chunk's own terms (index/tokenize.py, identifiers whole and split) are written
into an analyzed VARCHAR field, one word each. Characters the analyzer would split on (the dots of
`os.path.join`) are spelled with `_SEP`, a letter, so a term stays one token: Milvus then scores
exactly our terms with BM25 (k1=1.2, b=0.75, idf log(1 + (N - df + 0.5) / (df + 0.5)), as
index/store/lexical.py). Milvus returns the best `BM25_CANDIDATES` chunks, not every chunk's score: the
file-level ranking of index/rank/evidence.py is computed from those candidates (scores elsewhere are 0).

URIs: `http(s)://HOST:PORT` is a Milvus server (Standalone, Distributed, the managed service, or
`milvus-lite server`); a local path is embedded Milvus Lite (a `.db` file, or a folder that gets
`bridge.db`), for one process only.
"""

from index.milvus.build import build_milvus
from index.milvus.client import collection_base, connect, encode_terms
from index.milvus.generation import BM25_CANDIDATES, MilvusGeneration
from index.milvus.store import GRACE_SECONDS, MilvusStore

__all__ = [
    "BM25_CANDIDATES",
    "GRACE_SECONDS",
    "MilvusGeneration",
    "MilvusStore",
    "build_milvus",
    "collection_base",
    "connect",
    "encode_terms",
]
