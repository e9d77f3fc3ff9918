"""`rollback_job`: undo a publication (the Launchpad or `brain-pipeline rollback`).

Thin wiring over `steps.rollback`. A job, not an asset: a rollback rebuilds nothing, so
nothing upstream is re-materialised. What it changes is what the agent serves, and the
catalog must say so: the op reports a materialisation of `published_local` (and of
`published_s3` when it uploaded) whose data version is the restored publication's own,
so the UI never shows the replaced store as live. The run holds the build directory's
and the publish root's locks (`BrainSettings`), so it never overlaps a publishing run.
"""

import dagster as dg

from brain_pipeline.defs.resources import BrainSettings, S3Publisher
from brain_pipeline.lib.steps import DATA_VERSION_TAG, start_step, to_metadata
from brain_pipeline.steps.contract import StepFailure
from brain_pipeline.steps.rollback import RollbackRefused, release_hold, rollback
from brain_pipeline.steps.trigger import describe_trigger

REFUSED_METADATA = "refused"
"""Metadata of the op's failure: True when nothing was changed (the CLI exits 1)."""


class RollbackConfig(dg.Config):
    to: int | None = None
    """The publication to make live again (`brain-pipeline publications`); default: the
    one before the live publication."""
    release: bool = False
    """Only release the hold a rollback left (the held build may be published again)."""
    force: bool = False
    """Restore a publication its blocking checks did not pass (a forced one): needs
    `reason`; refused where publish.allow_force is false. Never a store the agent cannot
    load (over its string limit) or an empty one."""
    reason: str = ""
    """Why a person forces this rollback: recorded with it."""


@dg.op(
    name="rollback_publication",
    description=(
        "Makes an earlier publication live again in src/storage, dist/storage and S3 from "
        "the kept copies, sets the regression baseline back, holds the replaced one, and "
        "reports the restored publication as the latest materialisation of the publish "
        "assets."
    ),
    out=dg.Out(str, description="What is live now, in one sentence."),
)
def rollback_publication(
    context: dg.OpExecutionContext,
    config: RollbackConfig,
    settings: BrainSettings,
    s3_publisher: S3Publisher,
) -> str:
    cfg, layout = start_step(context.instance, settings)
    try:
        if config.release:
            released = release_hold(layout)
            context.log.info(released)
            return released
        result = rollback(
            cfg,
            layout,
            to=config.to,
            run_id=context.run.run_id,
            trigger=f"rollback_job ({describe_trigger(context.run.tags, ())})",
            log=context.log,
            upload=s3_publisher.publish,
            force=config.force,
            reason=config.reason,
        )
    except StepFailure as exc:
        refused = isinstance(exc, RollbackRefused)
        raise dg.Failure(
            description=str(exc),
            metadata={REFUSED_METADATA: refused, **to_metadata(exc.metadata)},
        ) from None
    metadata = to_metadata(result.metadata)
    tags = {DATA_VERSION_TAG: result.data_version}
    published = ["published_local"] + (["published_s3"] if result.metadata["s3_uploaded"] else [])
    for asset in published:
        context.log_event(dg.AssetMaterialization(asset_key=asset, metadata=metadata, tags=tags))
    summary = str(result.metadata["summary"])
    context.log.info(summary)
    return summary


@dg.job(
    name="rollback_job",
    description=(
        "Undo a publication: make publication `to` (default: the previous one) live again "
        "everywhere. `brain-pipeline rollback` launches this job."
    ),
    tags={"brain_pipeline/operation": "rollback"},
)
def rollback_job() -> None:
    rollback_publication()


@dg.definitions
def rollback_definitions() -> dg.Definitions:
    return dg.Definitions(jobs=[rollback_job])
