"""`rollback_job`: undo a publication from the UI (Launchpad: the publication id as config).

Thin wiring over `steps.rollback`, the same function `brain-pipeline rollback` runs. A
job, not an asset: a rollback is an operation on what is live, not a new build of
anything, and must not make Dagster think the assets upstream were re-materialised.
The run holds the build directory's and the publish root's locks (`RunLocks`), so it
never overlaps a publishing run. It records no asset event (an observation of
`published_local` would look like an update to automation); the publications table on
the publish assets and `brain-pipeline publications` show the rollback.
"""

import dagster as dg

from brain_pipeline.defs.resources import BrainSettings, S3Publisher
from brain_pipeline.lib.steps import start_step, step_failures
from brain_pipeline.steps.rollback import release_hold, rollback
from brain_pipeline.steps.trigger import describe_trigger


class RollbackConfig(dg.Config):
    to: int | None = None
    """The publication to make live again (`brain-pipeline publications`); default: the
    one before the live publication."""
    release: bool = False
    """Only release the hold a rollback left (the held build may be published again)."""


@dg.op(
    name="rollback_publication",
    description=(
        "Makes an earlier publication live again in src/storage, dist/storage and S3 from "
        "the kept copies, sets the regression baseline back, and holds the replaced one."
    ),
)
def rollback_publication(
    context: dg.OpExecutionContext,
    config: RollbackConfig,
    settings: BrainSettings,
    s3_publisher: S3Publisher,
) -> None:
    cfg, layout = start_step(context.instance, settings)
    with step_failures():
        if config.release:
            context.log.info(release_hold(layout))
            return
        result = rollback(
            cfg,
            layout,
            to=config.to,
            run_id=context.run.run_id,
            trigger=f"rollback_job ({describe_trigger(context.run.tags, ())})",
            log=context.log,
            upload=s3_publisher.publish,
        )
    context.log.info(str(result.metadata["summary"]))


@dg.job(
    name="rollback_job",
    description=(
        "Undo a publication: make publication `to` (default: the previous one) live again "
        "everywhere. Same core as `brain-pipeline rollback`."
    ),
    tags={"brain_pipeline/operation": "rollback"},
)
def rollback_job() -> None:
    rollback_publication()


@dg.definitions
def rollback_definitions() -> dg.Definitions:
    return dg.Definitions(jobs=[rollback_job])
