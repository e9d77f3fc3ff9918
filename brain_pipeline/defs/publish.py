"""Assets `published_local` and `published_s3` (group publish), gated by `retrieval_eval`.

Within one run the blocking check keeps these steps from running at all. Run on their
own, they still refuse unless the latest `retrieval_eval` evaluation passed *for the
bytes they would publish* (matched by sha256), read from the Dagster instance; a person
can override that with the run-config flag `force: true`, which is logged loudly.
"""

from dataclasses import dataclass
from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.defs.checks import CHECK_NAME
from brain_pipeline.defs.common import embeddings_path, store_path, to_metadata
from brain_pipeline.defs.embed import embeddings
from brain_pipeline.defs.ingest import knowledge_store
from brain_pipeline.defs.resources import BrainSettings

CHECK_KEY = dg.AssetCheckKey(embeddings.key, CHECK_NAME)


class PublishConfig(dg.Config):
    force: bool = False
    """Publish even though the latest evaluation of this data did not pass (logged)."""


@dataclass
class BuildArtifacts:
    store_bytes: bytes
    embeddings_bytes: bytes | None
    chunks: list[Any]
    evaluation: dict[str, float]
    evaluation_run_id: str | None


def _metadata_value(metadata: Any, key: str) -> Any:
    entry = (metadata or {}).get(key)
    return getattr(entry, "value", entry)


def latest_evaluation(
    instance: dg.DagsterInstance,
) -> tuple[bool | None, dict[str, Any], str | None]:
    """(passed, metadata, run id) of the newest finished retrieval_eval; passed None if none ran."""
    record = instance.get_latest_asset_check_evaluation_record(CHECK_KEY)
    if record is None or record.event is None or record.event.dagster_event is None:
        return None, {}, None
    evaluation: Any = record.event.dagster_event.event_specific_data
    passed = getattr(evaluation, "passed", None)
    if passed is None:  # planned or still running
        return None, {}, record.run_id
    metadata = {k: _metadata_value(evaluation.metadata, k) for k in evaluation.metadata}
    return bool(passed), metadata, record.run_id


def _gate(context: dg.AssetExecutionContext, cfg: BrainConfig, force: bool) -> BuildArtifacts:
    """Refuse (raise) unless the data about to be published passed its evaluation."""
    from brain_pipeline.corpus.store import parse_store
    from brain_pipeline.publishing.gate import publish_decision
    from brain_pipeline.publishing.manifest import sha256_hex

    store_file = store_path(cfg.build_dir)
    if not store_file.exists():
        raise dg.Failure(
            f"nothing to publish: {store_file} does not exist (materialise knowledge_store)"
        )
    store_bytes = store_file.read_bytes()
    emb_file = embeddings_path(cfg.build_dir)
    emb_bytes = emb_file.read_bytes() if emb_file.exists() else None
    passed, metadata, eval_run = latest_evaluation(context.instance)
    same_data = metadata.get("store_sha256") == sha256_hex(store_bytes) and metadata.get(
        "embeddings_sha256"
    ) in (None, "—", sha256_hex(emb_bytes) if emb_bytes else None)
    if passed is not None and not same_data:
        context.log.warning("the latest retrieval_eval evaluated other bytes than the build holds")
        passed = None
    chunks = parse_store(store_bytes)
    decision = publish_decision(
        passed, force=force or cfg.publish.force, store_chunk_count=len(chunks)
    )
    if not decision.allowed:
        raise dg.Failure(description=f"publishing refused: {decision.reason}")
    if force or cfg.publish.force:
        context.log.warning(f"FORCED PUBLISH: {decision.reason}")
    figures = {
        k: float(v)
        for k, v in metadata.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    return BuildArtifacts(store_bytes, emb_bytes, chunks, figures, eval_run)


def _ingested_corpus_digest(instance: dg.DagsterInstance, store_sha256: str) -> str | None:
    """The corpus digest recorded when *these* store bytes were built, if known.

    Taken from knowledge_store's metadata rather than from the corpus as it is now, so
    `brain-pipeline status` can tell when the corpus moved on after the build.
    """
    event = instance.get_latest_materialization_event(knowledge_store.key)
    materialization = event.asset_materialization if event else None
    if materialization is None:
        return None
    metadata = {k: getattr(v, "value", v) for k, v in materialization.metadata.items()}
    if metadata.get("store_sha256") != store_sha256:
        return None
    digest = metadata.get("corpus_digest")
    return str(digest) if digest else None


def _manifest(context: dg.AssetExecutionContext, artifacts: BuildArtifacts) -> Any:
    from brain_pipeline.publishing.manifest import build_manifest, sha256_hex

    return build_manifest(
        artifacts.store_bytes,
        artifacts.embeddings_bytes,
        artifacts.chunks,
        artifacts.evaluation,
        _ingested_corpus_digest(context.instance, sha256_hex(artifacts.store_bytes)),
        context.run.run_id,
    )


def _live_local_manifest(cfg: BrainConfig, artifacts: BuildArtifacts) -> Any | None:
    """The manifest published_local made for these bytes, so S3 carries the same one."""
    from brain_pipeline.publishing.local import storage_dirs
    from brain_pipeline.publishing.manifest import PublishManifest, sha256_hex

    path = storage_dirs(cfg.publish_root())[0] / "manifest.json"
    try:
        manifest = PublishManifest.from_json(path.read_bytes())
    except (OSError, ValueError, KeyError):
        return None
    return manifest if manifest.store.sha256 == sha256_hex(artifacts.store_bytes) else None


@dg.asset(
    group_name="publish",
    deps=[embeddings],
    kinds={"python"},
    description=(
        "Writes knowledge-store.json (and embeddings.bin when its model is the agent's query "
        "model) plus manifest.json atomically to <publish_root>/src/storage, and to "
        "dist/storage when the agent has a dist/ build. Refuses unless retrieval_eval passed "
        "for these exact bytes."
    ),
)
def published_local(
    context: dg.AssetExecutionContext, settings: BrainSettings, config: PublishConfig
) -> dg.MaterializeResult:
    from brain_pipeline.publishing.local import publish_local

    cfg = settings.load()
    artifacts = _gate(context, cfg, config.force)
    report = publish_local(
        artifacts.store_bytes,
        artifacts.embeddings_bytes,
        cfg.publish_root(),
        agent_query_model=cfg.publish.agent_query_model,
        manifest=_manifest(context, artifacts),
    )
    for line in report.summary().splitlines():
        context.log.info(line)
    metadata = to_metadata(
        {
            "status": "updated" if report.changed else "unchanged",
            "publish_root": str(cfg.publish_root()),
            "embeddings_published": report.embeddings_published,
            "embeddings_note": report.embeddings_note or "",
            "chunk_count": report.manifest.chunk_count,
            "store_sha256": report.manifest.store.sha256,
        }
    )
    # Links in the UI: the run whose check passed these bytes, and the run that made the
    # manifest now live (an earlier one when this publish changed nothing).
    if artifacts.evaluation_run_id:
        metadata["evaluated_in_run"] = dg.MetadataValue.dagster_run(artifacts.evaluation_run_id)
    if report.manifest.run_id:
        metadata["live_since_run"] = dg.MetadataValue.dagster_run(report.manifest.run_id)
    metadata["manifest"] = dg.MetadataValue.md(report.manifest.to_markdown())
    metadata["targets"] = dg.MetadataValue.json(report.to_metadata()["targets"])
    return dg.MaterializeResult(metadata=metadata)


@dg.asset(
    group_name="publish",
    deps=[published_local],
    kinds={"s3"},
    description=(
        "Uploads knowledge-store.json (embeddings.bin when publish.s3.include_embeddings) and "
        "manifest.json to s3://<bucket>/<prefix>, verifying each object's SHA-256. Skipped "
        "when no bucket is configured; any S3 failure fails this asset and leaves the local "
        "publish in place."
    ),
)
def published_s3(
    context: dg.AssetExecutionContext, settings: BrainSettings, config: PublishConfig
) -> dg.MaterializeResult:
    from brain_pipeline.publishing.s3 import PublishError, publish_s3

    cfg = settings.load()
    s3 = cfg.publish.s3
    if not s3.bucket:
        context.log.info(
            "S3 publishing skipped: no bucket configured (publish.s3.bucket / S3_BUCKET_NAME)"
        )
        return dg.MaterializeResult(metadata=to_metadata({"status": "skipped: no bucket"}))
    artifacts = _gate(context, cfg, config.force)
    try:
        report = publish_s3(
            artifacts.store_bytes,
            artifacts.embeddings_bytes,
            bucket=s3.bucket,
            prefix=s3.prefix,
            region=s3.region,
            endpoint_url=s3.endpoint_url,
            include_embeddings=s3.include_embeddings,
            manifest=_live_local_manifest(cfg, artifacts) or _manifest(context, artifacts),
        )
    except PublishError as exc:
        raise dg.Failure(description=f"S3 publish failed: {exc}") from None
    for line in report.summary().splitlines():
        context.log.info(line)
    metadata = to_metadata({"status": report.status, "bucket": s3.bucket, "prefix": s3.prefix})
    metadata["objects"] = dg.MetadataValue.json(report.to_metadata()["objects"])
    return dg.MaterializeResult(metadata=metadata)
