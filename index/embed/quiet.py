"""Hugging Face libraries loading without drawing on the terminal (a library must not print)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["quiet"]


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """transformers and model2vec draw progress bars while loading or distilling, and a library
    must not print. They are switched off at their source: swapping sys.stderr instead would
    also swallow what other threads (the CLI, the server's log) write meanwhile."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    except ImportError:
        pass
    yield
