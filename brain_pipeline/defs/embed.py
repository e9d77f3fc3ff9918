"""Asset `embeddings` (group embed): incremental, paced, resumable document vectors."""


from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.defs.resources import BrainSettings, EmbeddingClient
from brain_pipeline.embedding.progress import ThrottledProgress
from brain_pipeline.lib.conditions import downstream_condition
from brain_pipeline.lib.instance import GEMINI_POOL
from brain_pipeline.lib.steps import (
    recheck_input,
    start_step,
    store_chunks,
    to_metadata,
    upstream_record,
)
from brain_pipeline.state.records import (
    AssetRecord,
    digest_of,
    read_record,
    stamp_outputs,
    write_record,
)
from brain_pipeline.utils.atomic import file_sha256

EMBEDDINGS_CODE_VERSION = "embeddings-1"
PROVIDER_KINDS = {"gemini": "gemini", "local": "onnx"}


def embedding_shape(cfg: BrainConfig) -> dict[str, Any]:
    """What decides the vectors' bytes: provider, model and dimension."""
    provider = cfg.effective_provider()
    dimension = cfg.embedding.dimension if provider == "gemini" else None
    return {"provider": provider, "model": cfg.effective_model(), "dimension": dimension}


def embeddings_code_version(cfg: BrainConfig) -> str:
    return f"{EMBEDDINGS_CODE_VERSION}-{digest_of(embedding_shape(cfg))[:8]}"


def _build(
    context: dg.AssetExecutionContext, cfg: BrainConfig, layout: Any, client: EmbeddingClient
) -> tuple[dict[str, Any], bool]:
    """Bring embeddings.bin up to date; (metadata facts, whether any vector exists)."""
    from brain_pipeline.corpus.store_reader import open_store_view
    from brain_pipeline.embedding.builder import (
        EmbeddingBuildInterrupted,
        build_embeddings,
        prune_embedding_ids,
    )

    out = layout.embeddings_file
    embedder = client.embedder(cfg)
    if embedder is None:
        # provider "none": embed nothing, but keep the vectors that still match live chunks
        # (finished work is never thrown away) and drop the orphans. Ids suffice.
        ids = open_store_view(layout.store_file, layout).ids
        pruned = prune_embedding_ids(ids, out, log=context.log.info)
        context.log.info("embedding provider is 'none': nothing embedded")
        facts: dict[str, Any] = {"provider": "none", "chunks": len(ids)}
        if pruned is None:
            facts["coverage"] = 0.0
        else:
            facts.update(pruned.as_metadata())
        return facts, pruned is not None

    chunks = store_chunks(layout)
    progress = ThrottledProgress(
        lambda done, total: context.log.info(f"embedded {done}/{total} texts")
    )

    try:
        report = build_embeddings(chunks, out, embedder, progress=progress, log=context.log.info)
    except EmbeddingBuildInterrupted as exc:
        # The checkpoint beside the file keeps every finished batch; the next run resumes.
        raise dg.Failure(
            description=f"embedding stopped: {exc}",
            metadata=to_metadata(dict(exc.report.as_metadata())),
        ) from None
    facts = dict(report.as_metadata())
    facts["provider"] = cfg.effective_provider()
    return facts, True


MIN_RATE_SAMPLE = 200
REMOTE_ONLY = ("requests", "rate_limited", "retries", "waited_seconds")


def _plotted(facts: dict[str, Any]) -> dict[str, Any]:
    """The figures worth a plot: no always-zero remote counters on a local or reused
    build, and a rate only when enough texts were embedded for it to mean something."""
    shown = dict(facts)
    if shown.get("provider") != "gemini" or not shown.get("embedded"):
        for key in REMOTE_ONLY:
            shown.pop(key, None)
    if int(shown.get("embedded") or 0) < MIN_RATE_SAMPLE:
        shown.pop("texts_per_minute", None)
    return shown


def build_embeddings_asset(cfg: BrainConfig) -> dg.AssetsDefinition:
    code_version = embeddings_code_version(cfg)
    provider = cfg.effective_provider()
    kinds = {"python"} | ({PROVIDER_KINDS[provider]} if provider in PROVIDER_KINDS else set())

    @dg.asset(
        name="embeddings",
        group_name="embed",
        deps=["knowledge_store"],
        kinds=kinds,
        code_version=code_version,
        pool=GEMINI_POOL if provider == "gemini" else None,
        automation_condition=downstream_condition(),
        owners=["team:knowledge"],
        tags={"domain": "embed"},
        description=(
            "One int8 vector per live chunk in embeddings.bin (PATBEMB1), built incrementally: "
            "vectors are reused by chunk id, orphans pruned, progress checkpointed after every "
            "batch, requests paced against the texts-per-minute quota. Provider from the "
            f"configuration when the code location loaded: {provider}."
        ),
    )
    def embeddings(
        context: dg.AssetExecutionContext,
        settings: BrainSettings,
        embedding_client: EmbeddingClient,
    ) -> dg.MaterializeResult:
        cfg, layout = start_step(context.instance, settings)
        store = upstream_record(layout, "knowledge_store", "embeddings")
        inputs = {"knowledge_store": store.data_version, **embedding_shape(cfg)}
        live_code_version = embeddings_code_version(cfg)
        previous = read_record(layout, "embeddings")
        if previous is not None and previous.is_current_for(layout, live_code_version, inputs):
            keep = ("provider", "model", "dimension", "chunks", "coverage", "missing")
            facts = {k: previous.facts[k] for k in keep if k in previous.facts}
            facts.update(status="unchanged", embedded=0, reused=facts.get("chunks", 0))
            data_version = previous.data_version
        else:
            facts, exists = _build(context, cfg, layout, embedding_client)
            sha = file_sha256(layout.embeddings_file) if exists else None
            data_version = sha or f"absent-{store.data_version[:16]}"
            recheck_input(layout, "knowledge_store", store.data_version)
            write_record(
                layout,
                AssetRecord(
                    asset="embeddings",
                    data_version=data_version,
                    code_version=live_code_version,
                    inputs=inputs,
                    outputs=stamp_outputs(layout, {layout.embeddings_file.name: sha})
                    if sha
                    else {},
                    facts=facts,
                    run_id=context.run.run_id,
                ),
            )
            facts = dict(facts, status="built")
        metadata = to_metadata(_plotted(facts))
        metadata["provider_used"] = dg.MetadataValue.text(str(facts.get("provider", provider)))
        metadata["embeddings_sha256"] = dg.MetadataValue.text(data_version)
        return dg.MaterializeResult(metadata=metadata, data_version=dg.DataVersion(data_version))

    return embeddings
