"""Assets `published_local` and `published_s3` (group publish), gated by `retrieval_eval`.

Within one run the blocking check keeps these steps from running at all. Run on their
own, they still refuse unless the build directory's evaluation record says that an
evaluation passed for *exactly* the inputs they would publish (store, vectors, fixture,
thresholds, code); a person can override that with the run-config flag `force: true`,
which is logged loudly. The build directory, not the Dagster instance, is the source of
truth, so the gate holds on a fresh instance and cannot read another build's result.
"""


from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.defs.resources import BrainSettings, S3Publisher
from brain_pipeline.lib.conditions import publish_condition
from brain_pipeline.lib.steps import start_step, to_metadata
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.records import read_record

PUBLISH_CODE_VERSION = "publish-1"
PUBLISH_CONDITION = publish_condition()


class PublishConfig(dg.Config):
    force: bool = False
    """Publish even though no passing evaluation of this data is recorded (logged)."""


@dataclass
class BuildArtifacts:
    store_bytes: bytes
    embeddings_bytes: bytes | None
    counts: tuple[dict[str, int], list[str]]
    """Chunks per area and the live ids, for the manifest."""
    evaluation: dict[str, float]
    evaluation_run_id: str | None
    corpus_digest: str | None
    store_sha256: str
    """From the store view's index: known without hashing the bytes again."""


def _recover(context: dg.AssetExecutionContext, cfg: BrainConfig) -> None:
    """Finish or undo an interrupted publication before anything is judged or written."""
    from brain_pipeline.publishing.commit import RecoveryError, recover_publication

    try:
        report = recover_publication(cfg.publish_root())
    except RecoveryError as exc:
        raise dg.Failure(description=str(exc)) from None
    if report.changed_anything:
        context.log.warning(report.summary())


def _evaluation_of_build(
    cfg: BrainConfig, layout: StateLayout
) -> tuple[str | None, dict[str, Any] | None]:
    """(key, record) of the evaluation of exactly the build's inputs; record None if none."""
    from brain_pipeline.evaluation import record as eval_record
    from brain_pipeline.evaluation.service import evaluation_inputs

    if not layout.store_file.exists():
        raise dg.Failure(
            f"nothing to publish: {layout.store_file} does not exist (materialise "
            "knowledge_store)"
        )
    inputs = evaluation_inputs(cfg, layout.build_dir)
    if inputs is None:
        return None, None
    key = inputs.key()
    return key, eval_record.lookup(layout, key)


def _gate(
    context: dg.AssetExecutionContext,
    cfg: BrainConfig,
    layout: StateLayout,
    force: bool,
    record: dict[str, Any] | None,
) -> BuildArtifacts:
    """Refuse (raise) unless the data about to be published passed its evaluation."""
    from brain_pipeline.publishing.gate import publish_decision

    passed = None if record is None else bool(record["passed"])
    store_bytes = layout.store_file.read_bytes()
    emb_file = layout.embeddings_file
    emb_bytes = emb_file.read_bytes() if emb_file.exists() else None
    from brain_pipeline.corpus.store_reader import open_store_view

    view = open_store_view(layout.store_file, layout)
    # Chunks per area and the live ids are all a manifest needs: no chunk is decoded.
    counts = (view.count_per_area(), view.ids)
    decision = publish_decision(
        passed, force=force or cfg.publish.force, store_chunk_count=len(view)
    )
    if not decision.allowed:
        raise dg.Failure(description=f"publishing refused: {decision.reason}")
    if force or cfg.publish.force:
        context.log.warning(f"FORCED PUBLISH: {decision.reason}")
    figures = {
        k: float(v)
        for k, v in dict((record or {}).get("figures") or {}).items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    store_record = read_record(layout, "knowledge_store")
    digest = store_record.facts.get("corpus_digest") if store_record else None
    return BuildArtifacts(
        store_bytes,
        emb_bytes,
        counts,
        figures,
        (record or {}).get("run_id"),
        str(digest) if digest else None,
        view.sha256,
    )


def _manifest(context: dg.AssetExecutionContext, artifacts: BuildArtifacts) -> Any:
    from brain_pipeline.publishing.manifest import build_manifest

    return build_manifest(
        artifacts.store_bytes,
        artifacts.embeddings_bytes,
        None,
        artifacts.evaluation,
        artifacts.corpus_digest,
        context.run.run_id,
        counts=artifacts.counts,
    )


def _live_local_manifest(cfg: BrainConfig, artifacts: BuildArtifacts) -> Any | None:
    """The manifest published_local made for these bytes, so S3 carries the same one."""
    from brain_pipeline.publishing.local import live_manifest

    manifest = live_manifest(cfg.publish_root())
    if manifest is None or manifest.store.sha256 != artifacts.store_sha256:
        return None
    return manifest


def _publish_version(manifest: Any) -> str:
    embeddings = manifest.embeddings.sha256 if manifest.embeddings is not None else "none"
    return f"{manifest.store.sha256[:16]}-{embeddings[:16]}"


@dg.asset(
    name="published_local",
    group_name="publish",
    deps=["embeddings"],
    kinds={"python", "json"},
    code_version=PUBLISH_CODE_VERSION,
    automation_condition=PUBLISH_CONDITION,
    owners=["team:knowledge"],
    tags={"domain": "publish"},
    description=(
        "Writes knowledge-store.json (and embeddings.bin when its model is the agent's query "
        "model) plus manifest.json to the agent's src/storage, and to dist/storage when the "
        "agent has a dist/ build. Refuses unless retrieval_eval passed for these exact inputs."
    ),
)
def published_local(
    context: dg.AssetExecutionContext, settings: BrainSettings, config: PublishConfig
) -> dg.MaterializeResult:
    from brain_pipeline.publishing.commit import PublicationError
    from brain_pipeline.publishing.local import publish_local

    cfg, layout = start_step(context.instance, settings)
    _recover(context, cfg)
    key, evaluation = _evaluation_of_build(cfg, layout)
    inputs = _publish_inputs(cfg, layout, key)
    previous = read_record(layout, "published_local")
    if (
        evaluation is not None
        and evaluation.get("passed")
        and previous is not None
        and previous.is_current_for(layout, PUBLISH_CODE_VERSION, inputs)
    ):
        # The same evaluated bytes are live and untouched (every live file's stat is the
        # one recorded when it was published): nothing to read, nothing to write.
        return dg.MaterializeResult(
            metadata=to_metadata({**previous.facts, "status": "unchanged"}),
            data_version=dg.DataVersion(previous.data_version),
        )
    artifacts = _gate(context, cfg, layout, config.force, evaluation)
    try:
        report = publish_local(
            artifacts.store_bytes,
            artifacts.embeddings_bytes,
            cfg.publish_root(),
            agent_query_model=cfg.publish.agent_query_model,
            manifest=_manifest(context, artifacts),
        )
    except PublicationError as exc:
        raise dg.Failure(description=str(exc)) from None
    for line in report.summary().splitlines():
        context.log.info(line)
    metadata = to_metadata(
        {
            "status": "updated" if report.changed else "unchanged",
            "publish_root": str(cfg.publish_root()),
            "embeddings_published": report.embeddings_published,
            "embeddings_note": report.embeddings_note or "",
            "chunk_count": report.manifest.chunk_count,
            "dagster/row_count": report.manifest.chunk_count,
            "store_sha256": report.manifest.store.sha256,
            "corpus_digest": report.manifest.corpus_fingerprint,
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
    version = _publish_version(report.manifest)
    _record_publication(context, cfg, layout, inputs, version, report)
    return dg.MaterializeResult(metadata=metadata, data_version=dg.DataVersion(version))


def _publish_inputs(cfg: BrainConfig, layout: StateLayout, key: str | None) -> dict[str, Any]:
    """What a local publication is made from: the evaluated build and where it goes."""
    from brain_pipeline.publishing.local import storage_dirs

    store = read_record(layout, "knowledge_store")
    vectors = read_record(layout, "embeddings")
    return {
        "store": store.data_version if store else None,
        "embeddings": vectors.data_version if vectors else None,
        "evaluation": key,
        "agent_query_model": cfg.publish.agent_query_model,
        "targets": [str(target) for target in storage_dirs(cfg.publish_root())],
    }


def _record_publication(
    context: dg.AssetExecutionContext,
    cfg: BrainConfig,
    layout: StateLayout,
    inputs: dict[str, Any],
    version: str,
    report: Any,
) -> None:
    """Stamp every live file (absolute paths), so an unchanged re-run can skip by stat."""
    from brain_pipeline.state.records import AssetRecord, FileStamp, write_record

    stamps = {
        str(target.directory / f.filename): FileStamp.of(target.directory / f.filename, f.sha256)
        for target in report.targets
        for f in target.files
        if f.sha256 is not None
    }
    facts = {
        "publish_root": str(cfg.publish_root()),
        "chunk_count": report.manifest.chunk_count,
        "store_sha256": report.manifest.store.sha256,
        "corpus_digest": report.manifest.corpus_fingerprint,
        "embeddings_published": report.embeddings_published,
    }
    write_record(
        layout,
        AssetRecord(
            asset="published_local",
            data_version=version,
            code_version=PUBLISH_CODE_VERSION,
            inputs=inputs,
            outputs=stamps,
            facts=facts,
            run_id=context.run.run_id,
        ),
    )


@dg.asset(
    name="published_s3",
    group_name="publish",
    deps=[published_local],
    kinds={"s3"},
    code_version=PUBLISH_CODE_VERSION,
    automation_condition=PUBLISH_CONDITION,
    output_required=False,
    owners=["team:knowledge"],
    tags={"domain": "publish"},
    description=(
        "Uploads knowledge-store.json (embeddings.bin when publish.s3.include_embeddings) and "
        "manifest.json to the configured S3 bucket and prefix, verifying each object's "
        "SHA-256. When no bucket is configured the step does nothing and records no "
        "materialisation; any S3 failure fails this asset and leaves the local publish in "
        "place."
    ),
)
def published_s3(
    context: dg.AssetExecutionContext,
    settings: BrainSettings,
    s3_publisher: S3Publisher,
    config: PublishConfig,
) -> Iterator[dg.MaterializeResult]:
    from brain_pipeline.publishing.s3 import PublishError

    cfg, layout = start_step(context.instance, settings)
    s3 = cfg.publish.s3
    if not s3.bucket:
        context.log.info(
            "S3 publishing skipped: no bucket configured (publish.s3.bucket / S3_BUCKET_NAME); "
            "nothing is materialised"
        )
        return
    _, evaluation = _evaluation_of_build(cfg, layout)
    artifacts = _gate(context, cfg, layout, config.force, evaluation)
    manifest = _live_local_manifest(cfg, artifacts) or _manifest(context, artifacts)
    try:
        report = s3_publisher.publish(
            cfg, artifacts.store_bytes, artifacts.embeddings_bytes, manifest
        )
    except PublishError as exc:
        raise dg.Failure(description=f"S3 publish failed: {exc}") from None
    for line in report.summary().splitlines():
        context.log.info(line)
    metadata = to_metadata({"status": report.status, "bucket": s3.bucket, "prefix": s3.prefix})
    metadata["objects"] = dg.MetadataValue.json(report.to_metadata()["objects"])
    yield dg.MaterializeResult(
        metadata=metadata, data_version=dg.DataVersion(_publish_version(manifest))
    )
