"""One exception tree for the index package; every message names the object and the next step."""


class IndexingError(Exception):
    """Base of every error the index package raises on purpose."""


class NotARepository(IndexingError):
    pass


class EmptyRepository(IndexingError):
    pass


class NoIndex(IndexingError):
    pass


class CorruptIndex(IndexingError):
    pass


class IncompatibleIndex(IndexingError):
    pass


class IndexLocked(IndexingError):
    pass


class PathNotAllowed(IndexingError):
    pass


class BadQuery(IndexingError):
    pass


class EmbedderError(IndexingError):
    pass


class IndexWriteError(IndexingError):
    """Writing the index failed (disk full, file size limit, permissions); the previous index is untouched."""


class StoreUnavailable(IndexingError):
    """The index's store (a Milvus server) cannot be reached or refused a call; the message names its URI."""
