"""The corpus core: discovery, chunking and the exact knowledge-store writer.

Pure Python (no Dagster): `ingest_corpus(root)` is the one entry point the CLI and the
Dagster asset share (the asset through the per-file cache in `brain_pipeline.state`, which
must stay byte-identical to it). The corpus digest (what `status` and the manifest compare)
is computed by `brain_pipeline.corpus.observation.observe_corpus`.
"""

from typing import TYPE_CHECKING

from brain_pipeline.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from brain_pipeline.corpus.discovery import CorpusNotFoundError, discover
    from brain_pipeline.corpus.ingest import IngestResult, ingest_corpus
    from brain_pipeline.corpus.store import (
        NO_HEADING,
        STORE_FILENAME,
        Chunk,
        chunk_id,
        deduplicate,
        load_store,
        parse_store,
        serialize_store,
    )

__all__ = [
    "NO_HEADING",
    "STORE_FILENAME",
    "Chunk",
    "CorpusNotFoundError",
    "IngestResult",
    "chunk_id",
    "deduplicate",
    "discover",
    "ingest_corpus",
    "load_store",
    "parse_store",
    "serialize_store",
]

# Imported on first use: importing one module of the package costs only that module.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CorpusNotFoundError": "brain_pipeline.corpus.discovery",
        "discover": "brain_pipeline.corpus.discovery",
        "IngestResult": "brain_pipeline.corpus.ingest",
        "ingest_corpus": "brain_pipeline.corpus.ingest",
        "NO_HEADING": "brain_pipeline.corpus.store",
        "STORE_FILENAME": "brain_pipeline.corpus.store",
        "Chunk": "brain_pipeline.corpus.store",
        "chunk_id": "brain_pipeline.corpus.store",
        "deduplicate": "brain_pipeline.corpus.store",
        "load_store": "brain_pipeline.corpus.store",
        "parse_store": "brain_pipeline.corpus.store",
        "serialize_store": "brain_pipeline.corpus.store",
    },
)
