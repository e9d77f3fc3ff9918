"""The embedding step: bring embeddings.bin up to date with the store, incrementally.

Vectors are reused by chunk id from the packs every worker shares (ledger + blobs),
orphans pruned, every batch packed; an interrupted build keeps what it finished and the
next run, on any worker, resumes from it. With the
provider `none` nothing is embedded, but vectors that still match live chunks are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from brain_pipeline.config import BrainConfig, memory_of
from brain_pipeline.state.code_digest import code_digest
from brain_pipeline.state.memory import Memory
from brain_pipeline.state.records import AssetRecord, digest_of
from brain_pipeline.steps.contract import (
    StepFailure,
    StepLog,
    current_record,
    record_step,
)
from brain_pipeline.steps.report import StepResult
from brain_pipeline.utils.digest import file_sha256

MIN_RATE_SAMPLE = 200
REMOTE_ONLY = ("requests", "rate_limited", "retries", "waited_seconds")

MakeEmbedder = Callable[[BrainConfig], Any]
"""cfg -> the document embedder, or None for the provider `none` (the resource's)."""


def embedding_shape(cfg: BrainConfig) -> dict[str, Any]:
    """What decides the vectors' bytes: provider, model, dimension and too_long policy."""
    provider = cfg.effective_provider()
    dimension = cfg.embedding.dimension if provider == "gemini" else None
    shape: dict[str, Any] = {
        "provider": provider, "model": cfg.effective_model(), "dimension": dimension
    }
    if cfg.embedding.too_long != "truncate":
        shape["too_long"] = cfg.embedding.too_long  # the default keeps earlier digests
    return shape


def embeddings_code_version(cfg: BrainConfig) -> str:
    """The shape and the digest of the code that decides the vectors (not bumped by hand)."""
    code = code_digest("brain_pipeline.embedding.builder", "brain_pipeline.embedding.gemini",
                       "brain_pipeline.embedding.local")
    return f"embeddings-{code[:12]}-{digest_of(embedding_shape(cfg))[:8]}"


def _build(
    cfg: BrainConfig, memory: Memory, embedder: Any, log: StepLog
) -> tuple[dict[str, Any], bool]:
    """Bring embeddings.bin up to date; (facts, whether any vector exists)."""
    from brain_pipeline.corpus.store_reader import open_store_view
    from brain_pipeline.embedding.builder import (
        EmbeddingBuildInterrupted,
        build_embeddings,
        prune_embedding_ids,
    )
    from brain_pipeline.embedding.progress import step_progress

    layout = memory.layout
    out = layout.embeddings_file
    view = open_store_view(layout.store_file, layout)
    if embedder is None:
        # provider "none": embed nothing, but keep the vectors that still match live chunks
        # (finished work is never thrown away) and drop the orphans. Ids suffice.
        pruned = prune_embedding_ids(view.ids, out, log=log.info)
        log.info("embedding provider is 'none': nothing embedded")
        facts: dict[str, Any] = {"provider": "none", "chunks": len(view.ids)}
        if pruned is None:
            facts["coverage"] = 0.0
        else:
            facts.update(pruned.as_metadata())
        return facts, pruned is not None

    progress = step_progress(log.info)
    try:
        report = build_embeddings(
            view.all_chunks(), out, embedder, progress=progress, log=log.info,
            too_long=cfg.embedding.too_long, memory=memory,
        )
    except EmbeddingBuildInterrupted as exc:
        # The packs keep every finished batch; the next run (any worker's) resumes.
        raise StepFailure(
            f"embedding stopped: {exc}", metadata=dict(exc.report.as_metadata())
        ) from None
    facts = dict(report.as_metadata())
    facts["provider"] = cfg.effective_provider()
    return facts, True


def _gaps_digest(cfg: BrainConfig) -> str:
    """The remembered refusals' digest: forgetting them (`materialize --retry-refused`)
    makes the next run build again instead of calling the vectors current."""
    from brain_pipeline.embedding.gaps import gaps_version

    return gaps_version(memory_of(cfg))


def _plotted(facts: dict[str, Any]) -> dict[str, Any]:
    """The figures worth a plot: no always-zero remote counters on a local or reused
    build, and a rate only when enough texts were embedded for it to mean something."""
    shown = dict(facts)
    shown.pop("gaps_digest", None)
    if shown.get("provider") != "gemini" or not shown.get("embedded"):
        for key in REMOTE_ONLY:
            shown.pop(key, None)
    if int(shown.get("embedded") or 0) < MIN_RATE_SAMPLE:
        shown.pop("texts_per_minute", None)
    return shown


def embed_store(
    cfg: BrainConfig,
    store: AssetRecord,
    *,
    make_embedder: MakeEmbedder,
    run_id: str,
    log: StepLog,
) -> StepResult:
    """embeddings.bin for the store (or the record saying it is current); `store` is
    knowledge_store's record, as the hand-off passes it."""
    memory = memory_of(cfg)
    inputs = {"knowledge_store": store.data_version, **embedding_shape(cfg)}
    code_version = embeddings_code_version(cfg)
    previous = current_record(memory, "embeddings", code_version, inputs)
    record = previous
    if previous is not None and previous.facts.get("gaps_digest", "") == _gaps_digest(cfg):
        keep = ("provider", "model", "dimension", "chunks", "coverage", "missing",
                "refused", "truncated", "gaps_digest")
        facts = {k: previous.facts[k] for k in keep if k in previous.facts}
        facts.update(status="unchanged", embedded=0, reused=facts.get("chunks", 0))
        data_version = previous.data_version
    else:
        facts, exists = _build(cfg, memory, make_embedder(cfg), log)
        facts["gaps_digest"] = _gaps_digest(cfg)
        vectors = memory.layout.embeddings_file
        sha = file_sha256(vectors) if exists else None
        data_version = sha or f"absent-{store.data_version[:16]}"
        record = record_step(
            memory,
            "embeddings",
            data_version=data_version,
            code_version=code_version,
            inputs=inputs,
            facts=facts,
            outputs={vectors.name: sha} if sha else {},
            run_id=run_id,
            upstream=store,
        )
        facts = dict(facts, status="built")
    metadata = _plotted(facts)
    metadata["provider_used"] = str(facts.get("provider", cfg.effective_provider()))
    metadata["embeddings_sha256"] = data_version
    return StepResult(data_version, metadata, record)
