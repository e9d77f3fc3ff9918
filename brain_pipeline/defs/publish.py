"""Assets `published_local` and `published_s3` (group publish), gated by every blocking
check's recorded verdict on the bytes they would publish (`steps.publish.gate`).

The steps themselves (the gate, the manifest, the records) are `steps.publish`; here they
meet their resources and their results become metadata. With `rollback: true` in their
config (`rollback_job`, defs/rollback.py) the same assets restore an earlier publication
instead, so the restored publication is their own materialisation and their checks see it.
"""

from collections.abc import Iterator
from datetime import UTC, datetime

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.defs.health import step_check_results, step_check_specs
from brain_pipeline.defs.resources import BrainSettings, S3Publisher
from brain_pipeline.defs.rollback import restore, restored_upload
from brain_pipeline.lib.code_location import location_config
from brain_pipeline.lib.conditions import publish_condition, run_trigger
from brain_pipeline.lib.steps import materialize_result, start_step, step_failures
from brain_pipeline.steps.contract import Build
from brain_pipeline.steps.health import FRESHNESS_MARGIN, freshness_allowance
from brain_pipeline.steps.publish import (
    PUBLISH_CODE_VERSION,
    publish_to_agent,
    publish_to_s3,
)

PUBLISH_CONDITION = publish_condition()


class PublishConfig(dg.Config):
    force: bool = False
    """Publish even though a blocking check did not pass on this data (logged and recorded;
    never a store the agent cannot load, nor an empty one). Needs `reason`; refused
    where the deployment sets publish.allow_force: false."""
    reason: str = ""
    """Why a person forces this publication: recorded with it (publications, status, the
    materialisation's metadata, the notification). Force without one is refused."""
    rollback: bool = False
    """Instead of publishing the build, make publication `rollback_to` live again
    (`rollback_job`, `brain-pipeline rollback`), through the same gate."""
    rollback_to: int | None = None
    """The publication a rollback restores (`brain-pipeline publications`); default: the
    one before the live publication."""


def publication_freshness(cfg: BrainConfig) -> dg.FreshnessPolicy:
    """How old the live publication may grow: WARN once a scheduled run is overdue (the
    schedule's longest gap), FAIL past it plus `steps.health.FRESHNESS_MARGIN`. Dagster's
    freshness daemon evaluates it (every 30 s under `brain-pipeline ui`), between runs
    too; `published_store_is_current` adds what a time window cannot see: a newer
    corpus than the one the agent serves. It judges the last run that materialised
    the asset: the `materialize` skip writes no history, so on a quiet corpus the
    nightly `reingest_schedule` run (which runs whether or not anything changed) is
    what keeps it fresh, and a missing nightly run shows as WARN, as it should."""
    fail = freshness_allowance(cfg, datetime.now(UTC))
    return dg.FreshnessPolicy.time_window(fail_window=fail, warn_window=fail - FRESHNESS_MARGIN)


def build_published_local(cfg: BrainConfig) -> dg.AssetsDefinition:
    @dg.asset(
        name="published_local",
        group_name="publish",
        kinds={"python", "json"},
        code_version=PUBLISH_CODE_VERSION,
        automation_condition=PUBLISH_CONDITION,
        freshness_policy=publication_freshness(cfg),
        check_specs=step_check_specs("published_local"),
        owners=["team:knowledge"],
        tags={"domain": "publish"},
        description=(
            "Writes knowledge-store.json (and embeddings.bin when its model is the agent's query "
            "model) plus manifest.json to the agent's src/storage, and to dist/storage when the "
            "agent has a dist/ build. Refuses, in any run, unless every blocking check "
            "(retrieval_eval, fits_agent_string_limit) passed on these exact bytes."
        ),
    )
    def published_local(
        context: dg.AssetExecutionContext,
        settings: BrainSettings,
        s3_publisher: S3Publisher,
        config: PublishConfig,
        embeddings: Build,
    ) -> dg.MaterializeResult:
        if config.rollback:  # rollback_job: the restored publication is this materialisation
            return restore(
                context,
                settings,
                s3_publisher,
                config.rollback_to,
                config.force,
                config.reason,
            )
        cfg = start_step(context.instance, settings, context.run)
        with step_failures():
            publication = publish_to_agent(
                cfg,
                embeddings,
                force=config.force,
                run_id=context.run.run_id,
                log=context.log,
                trigger=run_trigger(context.instance, context.run.tags, context.asset_key),
                reason=config.reason,
            )
        return materialize_result(
            publication, step_check_results("published_local", cfg, context.log)
        )

    return published_local


@dg.asset(
    name="published_s3",
    group_name="publish",
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
    published_local: Build,
) -> Iterator[dg.MaterializeResult]:
    if config.rollback:  # rollback_job: published_local's step made the upload; report it
        uploaded = restored_upload(context, settings)
        if uploaded is not None:
            yield uploaded
        return
    cfg = start_step(context.instance, settings, context.run)
    with step_failures():
        publication = publish_to_s3(
            cfg,
            published_local,
            force=config.force,
            run_id=context.run.run_id,
            log=context.log,
            upload=s3_publisher.publish,
            reason=config.reason,
        )
    if publication is not None:
        yield materialize_result(publication)


@dg.definitions
def publish_definitions() -> dg.Definitions:
    return dg.Definitions(assets=[build_published_local(location_config()), published_s3])
