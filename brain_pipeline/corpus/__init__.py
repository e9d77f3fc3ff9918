"""The corpus core: discovery, chunking and the exact knowledge-store writer.

Pure Python (no Dagster): `corpus.file_chunks.ingest_corpus(root)` is the one ingest the
CLI and the Dagster asset share (the asset through the per-file cache in `corpus.chunk_cache`, which
must stay byte-identical to it). The corpus digest (what `status` and the manifest compare)
is computed by `brain_pipeline.corpus.observation.observe_corpus`.

The package re-exports nothing: import the module that owns a name, so importing one
module never loads the others (the preflight's refusal stays free of numpy and Dagster).
"""
