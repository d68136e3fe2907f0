"""Hugging Face libraries loading without drawing on the terminal (a library must not print)."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
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
    _silence_loaded_bars()
    yield


def _silence_loaded_bars() -> None:
    """tqdm reads TQDM_DISABLE once, when it is first imported; a module that imported it before
    (model2vec's distillation, after transformers) keeps drawing: ~60 lines of `Encoding tokens`
    on the first static index. Its `tqdm` name is bound to a switched-off one instead."""
    module = sys.modules.get("model2vec.distill.inference")  # loaded by the caller that distils
    bar = getattr(module, "tqdm", None)
    if module is not None and bar is not None and not isinstance(bar, functools.partial):
        module.tqdm = functools.partial(bar, disable=True)  # type: ignore[attr-defined]
