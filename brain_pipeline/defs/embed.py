"""Asset `embeddings` (group embed): incremental, paced, resumable document vectors."""

import time

import dagster as dg

from brain_pipeline.corpus.store import load_store
from brain_pipeline.defs.common import embeddings_path, file_sha256, store_path, to_metadata
from brain_pipeline.defs.ingest import knowledge_store
from brain_pipeline.defs.resources import BrainSettings
from brain_pipeline.services import embedder_for


@dg.asset(
    group_name="embed",
    deps=[knowledge_store],
    kinds={"python", "gemini"},
    description=(
        "One int8 vector per live chunk in embeddings.bin (PATBEMB1), built incrementally: "
        "vectors are reused by chunk id, orphans pruned, progress checkpointed after every "
        "batch, requests paced against the texts-per-minute quota. Provider: Gemini "
        "(gemini-embedding-001) when a key is set, else the offline local model."
    ),
)
def embeddings(context: dg.AssetExecutionContext, settings: BrainSettings) -> dg.MaterializeResult:
    from brain_pipeline.embedding.builder import (
        EmbeddingBuildInterrupted,
        build_embeddings,
        prune_embeddings,
    )

    cfg = settings.load()
    chunks = load_store(store_path(cfg.build_dir))
    out = embeddings_path(cfg.build_dir)
    embedder = embedder_for(cfg)
    if embedder is None:
        # provider "none": embed nothing, but keep the vectors that still match live chunks
        # (finished work is never thrown away) and drop the orphans.
        pruned = prune_embeddings(chunks, out, log=context.log.info)
        context.log.info("embedding provider is 'none': nothing embedded")
        none_meta: dict[str, object] = {"provider": "none", "chunks": len(chunks)}
        if pruned is None:
            none_meta["coverage"] = 0.0
        else:
            none_meta.update(pruned.as_metadata())
        return dg.MaterializeResult(metadata=to_metadata(none_meta))

    last_log = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last_log[0] >= 5 or done == total:
            last_log[0] = now
            context.log.info(f"embedded {done}/{total} texts")

    try:
        report = build_embeddings(chunks, out, embedder, progress=progress, log=context.log.info)
    except EmbeddingBuildInterrupted as exc:
        # The checkpoint beside the file keeps every finished batch; the next run resumes.
        raise dg.Failure(
            description=f"embedding stopped: {exc}",
            metadata=to_metadata(dict(exc.report.as_metadata())),
        ) from None
    metadata: dict[str, object] = dict(report.as_metadata())
    metadata["provider"] = cfg.effective_provider()
    metadata["embeddings_sha256"] = file_sha256(out)
    metadata["path"] = str(out)
    return dg.MaterializeResult(metadata=to_metadata(metadata))
