"""Reaching Milvus: the client, the names of a repository's collections and our terms as analyzer input."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from index.errors import StoreUnavailable

__all__ = ["collection_base", "connect", "embedded_path", "encode_terms", "is_missing", "is_server_uri", "one_line"]

CONNECT_TIMEOUT = 10.0
# gRPC shares one connection per address in a process and backs off up to two minutes after a failure;
# a private pool and a short back-off let a reader reconnect within a second of Milvus coming back.
_GRPC_OPTIONS = {"grpc.use_local_subchannel_pool": 1, "grpc.initial_reconnect_backoff_ms": 200,
                 "grpc.min_reconnect_backoff_ms": 200, "grpc.max_reconnect_backoff_ms": 1000}
_SEP = "ǀ"  # U+01C0, a letter: joins the parts of `os.path.join` into one analyzer token
_NON_WORD = re.compile(r"\W")
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
_MAX_TERMS_BYTES = 65000  # an analyzed VARCHAR's limit, with room; see encode_terms


def encode_terms(words: Sequence[str]) -> str:
    """Our terms as one analyzable string: one analyzer token per term.

    A chunk whose terms pass the analyzed field's 65,535-byte limit (one huge minified line) keeps
    its first terms only, so BM25 scores it a little differently from the local store."""
    text = " ".join(_NON_WORD.sub(_SEP, w) for w in words)
    if len(text) * 4 <= _MAX_TERMS_BYTES or len(text.encode("utf-8")) <= _MAX_TERMS_BYTES:
        return text
    cut = text.encode("utf-8")[:_MAX_TERMS_BYTES].decode("utf-8", "ignore")
    return cut.rsplit(" ", 1)[0]


def collection_base(root: Path) -> str:
    """The alias of a repository: its folder name and a digest of its real path, like the index folder."""
    real = os.path.realpath(root)
    digest = hashlib.sha1(real.encode()).hexdigest()[:12]
    name = _UNSAFE.sub("_", Path(real).name or "root")[:40]
    return f"bridge_{name}_{digest}"


def embedded_path(uri: str) -> str:
    """The `.db` file of embedded Milvus Lite for a local path (a folder gets `bridge.db`)."""
    path = Path(uri).expanduser()
    if path.suffix != ".db":
        path.mkdir(parents=True, exist_ok=True)
        path = path / "bridge.db"
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    return str(path.resolve())


def is_server_uri(uri: str) -> bool:
    return uri.startswith(("http://", "https://", "tcp://", "unix:"))


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def connect(uri: str, token: str | None = None) -> Any:
    """A pymilvus MilvusClient for `uri`; StoreUnavailable when Milvus cannot be reached."""
    import logging

    from pymilvus import MilvusClient

    # pymilvus logs a traceback for every failed call; ours become one-line errors instead
    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
    target = uri if is_server_uri(uri) else embedded_path(uri)
    try:
        return MilvusClient(uri=target, token=token or "", timeout=CONNECT_TIMEOUT, grpc_options=_GRPC_OPTIONS)
    except Exception as exc:  # pymilvus raises MilvusException, grpc errors and ConnectionConfigException
        raise StoreUnavailable(
            f"cannot reach Milvus at {uri} ({one_line(exc)}): start Milvus there or pass another --milvus-uri"
        ) from exc


def is_missing(message: str) -> bool:
    low = message.lower()
    return ("alias" in low or "collection" in low) and ("not exist" in low or "not found" in low)
