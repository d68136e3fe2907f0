"""Which lexical field matches the local BM25 better on Milvus: our terms (index/tokenize.py) written one
analyzer token each (what index/milvus/ does), or the raw chunk text under Milvus's standard analyzer
(`\\w+`, lowercased: identifiers are not split)? Top-1 file agreement with the local engine.

    python bench/milvus_analyzer.py TREE [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.milvus import MilvusLiteServer

from index.build import BuildOptions, build_index
from index.milvus import connect, encode_terms
from index.search import Searcher
from index.tokenize import path_terms, terms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tree", type=Path)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="milvus-analyzer-"))
    build_index(args.tree, work / "local", BuildOptions(embedder=None))
    local = Searcher(work / "local")
    chunks = local.read_chunks(list(range(local.manifest.chunks)))
    server = MilvusLiteServer(work / "milvus").start()
    try:
        from pymilvus import DataType, Function, FunctionType

        client = connect(server.uri)
        fields = {"terms": lambda c: encode_terms(terms(c.text) + path_terms(c.path)), "text": lambda c: f"{c.path}\n{c.text}"}
        for name, make in fields.items():
            schema = client.create_schema(auto_id=False)
            schema.add_field("id", DataType.INT64, is_primary=True)
            schema.add_field("body", DataType.VARCHAR, max_length=65535, enable_analyzer=True,
                             analyzer_params={"tokenizer": "standard"})
            schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
            schema.add_function(Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["body"],
                                         output_field_names=["sparse"]))
            index = client.prepare_index_params()
            index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                            params={"bm25_k1": 1.2, "bm25_b": 0.75})
            client.create_collection(name, schema=schema, index_params=index)
            rows = [{"id": i, "body": make(c)} for i, c in chunks.items()]
            for lo in range(0, len(rows), 2000):
                client.insert(name, rows[lo : lo + 2000])
            client.flush(name)
        rng = random.Random(13)
        agree = {"terms": 0, "text": 0}
        n = 0
        for cid in rng.sample(range(len(chunks)), len(chunks)):
            if n == args.queries:
                break
            line = next((x.strip() for x in chunks[cid].text.splitlines() if x.strip()), "")
            if not line:
                continue
            n += 1
            hits = local.search(line[:400], k=1, mode="lexical").hits
            want = hits[0].path if hits else None
            for name, query in (("terms", encode_terms(terms(line[:400]))), ("text", line[:400])):
                got = client.search(name, data=[query], anns_field="sparse", limit=1, search_params={"metric_type": "BM25"})
                path = chunks[int(got[0][0]["id"])].path if got and got[0] else None
                agree[name] += path == want
        print(json.dumps({"tree": args.tree.name, "queries": n, "chunks": len(chunks),
                          "top1_file_agreement": {k: round(v / n, 3) for k, v in agree.items()}}, indent=1))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
