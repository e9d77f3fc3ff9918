"""`rollback_job`: undo a publication (the Launchpad or `brain-pipeline rollback`), and
`release_hold_job`: end the hold a rollback left.

Thin wiring over `steps.rollback`. A rollback rebuilds nothing, but what it changes is
what the agent serves, and the catalog and `published_local`'s checks must see it: so
`rollback_job` is an asset job of the publish assets whose config says `rollback: true`.
`published_local`'s step then runs the rollback (`restore`) instead of a publish and
returns the restored publication as its materialisation through Dagster's public API
(`dg.MaterializeResult` with the restored publication's own `dg.DataVersion`, its checks
evaluated in the same step); `published_s3`'s step reports the upload the rollback made
(nothing when it made none). Nothing upstream is selected, so nothing is rebuilt. The run
holds the build directory's and the publish root's locks (`BrainSettings`), so it never
overlaps a publishing run.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg

from brain_pipeline.defs.health import step_check_results
from brain_pipeline.defs.resources import BrainSettings, S3Publisher
from brain_pipeline.lib.steps import PUBLISH_ASSETS, materialize_result, start_step, to_metadata
from brain_pipeline.steps.contract import StepFailure
from brain_pipeline.steps.rollback import RollbackRefused, release_hold, rollback
from brain_pipeline.steps.trigger import describe_trigger

REFUSED_METADATA = "refused"
"""Metadata of the step's failure: True when nothing was changed (the CLI exits 1)."""
ROLLBACK_JOB = "rollback_job"
RELEASE_JOB = "release_hold_job"


def rollback_run_config(
    to: int | None = None, *, force: bool = False, reason: str = ""
) -> dict[str, Any]:
    """`rollback_job`'s run config: publication `to` (None: the one before the live one),
    forced with `reason` when its blocking checks did not pass (a forced publication)."""
    local = {"rollback": True, "rollback_to": to, "force": force, "reason": reason}
    return {
        "ops": {
            "published_local": {"config": local},
            "published_s3": {"config": {"rollback": True}},
        }
    }


def restore(
    context: dg.AssetExecutionContext,
    settings: BrainSettings,
    s3_publisher: S3Publisher,
    to: int | None,
    force: bool,
    reason: str,
) -> dg.MaterializeResult:
    """`published_local` in a rollback run: make publication `to` live again everywhere
    and return it as this asset's materialisation, with its checks evaluated on it."""
    cfg = start_step(context.instance, settings)  # a rollback reads no corpus
    with _refusals():
        result = rollback(
            cfg,
            cfg.layout,
            to=to,
            run_id=context.run.run_id,
            trigger=f"{ROLLBACK_JOB} ({describe_trigger(context.run.tags, ())})",
            log=context.log,
            upload=s3_publisher.publish,
            force=force,
            reason=reason,
        )
    context.log.info(str(result.metadata["summary"]))
    return materialize_result(result, step_check_results("published_local", cfg, context.log))


@contextmanager
def _refusals() -> Iterator[None]:
    """A core step's refusal as the step's failure, its `refused` metadata True when
    nothing was changed (a `RollbackRefused`)."""
    try:
        yield
    except StepFailure as exc:
        refused = isinstance(exc, RollbackRefused)
        raise dg.Failure(
            description=str(exc),
            metadata={REFUSED_METADATA: refused, **to_metadata(exc.metadata)},
        ) from None


def restored_upload(
    context: dg.AssetExecutionContext, settings: BrainSettings
) -> dg.MaterializeResult | None:
    """`published_s3` in a rollback run: the upload this run's rollback made (the live
    publication, recorded by this run, reached the bucket), or None when it made none."""
    from brain_pipeline.config import memory_of
    from brain_pipeline.publishing.local import live_manifest
    from brain_pipeline.publishing.publication_log import read_history
    from brain_pipeline.steps.publish import publish_version

    cfg = start_step(context.instance, settings)  # a rollback reads no corpus
    live = read_history(memory_of(cfg)).live()
    manifest = live_manifest(cfg.publish_root())
    if live is None or not live.s3 or live.run_id != context.run.run_id or manifest is None:
        context.log.info("the rollback uploaded nothing to S3: nothing to report")
        return None
    return dg.MaterializeResult(
        data_version=dg.DataVersion(publish_version(manifest)),
        metadata={
            "status": "rolled back",
            "as_publication": live.id,
            "restored_publication": live.restores,
            "bucket": str(live.s3.get("bucket")),
            "prefix": str(live.s3.get("prefix")),
        },
    )


rollback_job = dg.define_asset_job(
    name=ROLLBACK_JOB,
    selection=dg.AssetSelection.assets(*sorted(PUBLISH_ASSETS)),
    description=(
        "Undo a publication: make publication `rollback_to` (default: the one before the "
        "live one) live again everywhere, through the publish gate (a forced publication "
        "needs `force` and a `reason`). `brain-pipeline rollback` launches this job."
    ),
    config=rollback_run_config(),
    tags={"brain_pipeline/operation": "rollback"},
)


@dg.op(
    name="release_hold",
    description="Ends the hold a rollback left: the held build may be published again.",
    out=dg.Out(str, description="What was released, in one sentence."),
)
def release_hold_op(context: dg.OpExecutionContext, settings: BrainSettings) -> str:
    cfg = start_step(context.instance, settings)
    with _refusals():
        released = release_hold(cfg)
    context.log.info(released)
    return released


@dg.job(
    name=RELEASE_JOB,
    description="End the hold a rollback left. `brain-pipeline rollback --release` launches it.",
    tags={"brain_pipeline/operation": "rollback"},
)
def release_hold_job() -> None:
    release_hold_op()


@dg.definitions
def rollback_definitions() -> dg.Definitions:
    return dg.Definitions(jobs=[rollback_job, release_hold_job])
