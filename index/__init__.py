"""Hybrid code index. Never imports `bridge`. Its rooms, in the order data flows through them:

- `files/`   what is indexed and how it is cut (discover, name rules, languages, syntax, chunks)
- `store/`   one generation on disk (layout and manifest, BM25, vectors, segments)
- `embed/`   dense embedders and the embedding cache
- `history/` the repository's own history (git log, commit text, commit subjects)
- `rank/`    reading a question once (`Question`) and ranking files
- `build/`   the write path (build, delta, fill vectors, watch)
- `search/`  the read path (`Searcher`: fuse, choose chunks, pack under a budget)
- `milvus/`  the index on Milvus, beside `store/`

Beside them, the base every room may use: `errors` (one exception tree), `types` (frozen values
between stages) and `tokenize` (code-aware terms and the token estimate). docs/architecture.md
draws the arrows; tests/cli/test_architecture.py keeps them one-way.
"""
