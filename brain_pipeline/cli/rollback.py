"""`brain-pipeline rollback [--to ID] | --release`: undo a publication."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from brain_pipeline.cli import CommandError, configuration, force_refusal

if TYPE_CHECKING:
    from brain_pipeline.config import BrainConfig

HELP = "make an earlier publication live again (src, dist and S3), or release a hold"
DESCRIPTION = """\
Make publication ID (default: the one before the live one; see `brain-pipeline
publications`) live again in src/storage, dist/storage and the S3 bucket, from the
copies kept for the last publish.keep_generations publications, and set the regression
baseline back to its evaluation. The publication it replaces is then held: scheduled
and automatic runs do not publish it again until the corpus or the fixture changes.
--release ends the hold at once. Takes the build directory's and the publish root's
locks, like a run. It launches the `rollback_job` Dagster job in this process (the run is
in the UI's Runs list), whose published_local step restores the publication and
materialises it (its checks run on it; published_s3 reports the upload), so the catalog
shows what is live; --release launches `release_hold_job`.

Rollback goes through the publish gate: a publication that passed its blocking checks
goes back freely; a forced one only with --force --reason "..." (recorded, refused where
publish.allow_force is false); one the agent cannot load (over its string limit, measured
again on the archived store, or empty) never.

Exit status: 0 done; 1 refused, nothing changed (unknown id, already live, archived
files gone, refused by the gate: each named); 3 failed part-way (the message says what
is live); 2 configuration unreadable, or --force without a reason or where it is turned
off; 75 another run holds the locks.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--to", type=int, metavar="ID", help="the publication to restore")
    group.add_argument("--release", action="store_true", help="release the hold left by a rollback")
    parser.add_argument(
        "--force",
        action="store_true",
        help="restore a publication that was forced over its blocking checks (needs "
        "--reason; refused where publish.allow_force is false; never one the agent "
        "cannot load)",
    )
    parser.add_argument(
        "--reason", default=None, metavar="TEXT", help="why you force it (recorded)"
    )


def run(args: argparse.Namespace) -> int:
    import uuid

    from brain_pipeline.config import memory_of
    from brain_pipeline.state.lock import LockBusyError, make_holder
    from brain_pipeline.state.run_lease import hold_run_locks

    cfg = configuration()
    if args.force and args.release:
        raise CommandError("--force goes with a rollback, not with --release")
    how = 'rollback --to ID --force --reason "why it must be live again"'
    refused = force_refusal(cfg, args.force, args.reason, flag="--force", what="rollback", how=how)
    if refused is not None:  # before any lock or run
        raise CommandError(refused)
    run_id = str(uuid.uuid4())
    try:
        # Taken here first (the run's own `BrainSettings` re-enters them): a busy build
        # directory is exit 75 before any run is created.
        with hold_run_locks(
            memory_of(cfg).ledger,
            cfg.publish_root(),
            run_id=run_id,
            wait_seconds=cfg.locks.wait_seconds,
            holder=make_holder("brain-pipeline rollback", run_id),
        ):
            return _launch(cfg, args, run_id)
    except LockBusyError as exc:
        raise CommandError(exc, 75) from None


def _launch(cfg: BrainConfig, args: argparse.Namespace, run_id: str) -> int:
    from brain_pipeline.cli.instance_setup import location_and_instance
    from brain_pipeline.lib.runner import run_operation

    definitions, instance = location_and_instance(cfg)
    from brain_pipeline.defs.rollback import RELEASE_JOB, ROLLBACK_JOB, rollback_run_config

    job = RELEASE_JOB if args.release else ROLLBACK_JOB
    outcome = run_operation(
        job,
        definitions=definitions,
        instance=instance,
        run_config={}
        if args.release
        else rollback_run_config(args.to, force=bool(args.force), reason=args.reason or ""),
        run_id=run_id,
        build_dir=cfg.build_dir,
        trigger="brain-pipeline rollback",
    )
    if not outcome.success:
        raise CommandError(outcome.error, 1 if outcome.refused else 3)
    print(outcome.output)
    return 0
