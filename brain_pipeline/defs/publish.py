"""Assets `published_local` and `published_s3` (group publish), gated by `retrieval_eval`.

The steps themselves (the gate, the manifest, the records) are `steps.publish`; here they
meet their resources and their results become metadata.
"""

from collections.abc import Iterator

import dagster as dg

from brain_pipeline.defs.resources import BrainSettings, S3Publisher
from brain_pipeline.lib.conditions import publish_condition, run_trigger
from brain_pipeline.lib.steps import materialize_result, start_step, step_failures
from brain_pipeline.steps.publish import (
    PUBLISH_CODE_VERSION,
    publish_to_agent,
    publish_to_s3,
)

PUBLISH_CONDITION = publish_condition()


class PublishConfig(dg.Config):
    force: bool = False
    """Publish even though no passing evaluation of this data is recorded (logged)."""


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
    cfg, layout = start_step(context.instance, settings, context.run)
    with step_failures():
        publication = publish_to_agent(
            cfg,
            layout,
            force=config.force,
            run_id=context.run.run_id,
            log=context.log,
            trigger=run_trigger(context.instance, context.run.tags, context.asset_key),
        )
    return materialize_result(publication)


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
    cfg, layout = start_step(context.instance, settings, context.run)
    with step_failures():
        publication = publish_to_s3(
            cfg,
            layout,
            force=config.force,
            run_id=context.run.run_id,
            log=context.log,
            upload=s3_publisher.publish,
        )
    if publication is not None:
        yield materialize_result(publication)


@dg.definitions
def publish_definitions() -> dg.Definitions:
    return dg.Definitions(assets=[published_local, published_s3])
