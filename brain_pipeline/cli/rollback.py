"""`brain-pipeline rollback [--to ID] | --release`: undo a publication."""

from __future__ import annotations

import argparse
import sys

HELP = "make an earlier publication live again (src, dist and S3), or release a hold"
DESCRIPTION = """\
Make publication ID (default: the one before the live one; see `brain-pipeline
publications`) live again in src/storage, dist/storage and the S3 bucket, from the
copies kept for the last publish.keep_generations publications, and set the regression
baseline back to its evaluation. The publication it replaces is then held: scheduled
and automatic runs do not publish it again until the corpus or the fixture changes.
--release ends the hold at once. Takes the build directory's and the publish root's
locks, like a run. The same core runs as the `rollback_job` Dagster job.

Exit status: 0 done; 1 refused, nothing changed (unknown id, already live, archived
files gone: each named); 3 failed part-way (the message says what is live);
2 configuration unreadable; 75 another run holds the locks.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--to", type=int, metavar="ID", help="the publication to restore")
    group.add_argument(
        "--release", action="store_true", help="release the hold left by a rollback"
    )


class _PrintLog:
    def info(self, message: str) -> None:
        print(message)

    def warning(self, message: str) -> None:
        print(f"warning: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    import uuid

    from brain_pipeline.config import ConfigError, load_config
    from brain_pipeline.state.layout import StateLayout
    from brain_pipeline.state.lock import LockBusyError, hold_run_locks, make_holder
    from brain_pipeline.steps.provenance import StepFailure
    from brain_pipeline.steps.publish import upload_to_s3
    from brain_pipeline.steps.rollback import (
        RollbackRefused,
        release_hold,
        rollback,
    )

    try:
        cfg = load_config()
    except ConfigError as exc:
        print(f"brain-pipeline rollback: {exc}", file=sys.stderr)
        return 2
    layout = StateLayout.of(cfg.build_dir)
    run_id = f"cli-{uuid.uuid4().hex[:12]}"
    try:
        with hold_run_locks(
            cfg.build_dir,
            cfg.publish_root(),
            wait_seconds=cfg.locks.wait_seconds,
            holder=make_holder("brain-pipeline rollback", run_id),
        ):
            if args.release:
                print(release_hold(layout))
                return 0
            result = rollback(
                cfg,
                layout,
                to=args.to,
                run_id=run_id,
                trigger="cli rollback",
                log=_PrintLog(),
                upload=upload_to_s3,
            )
    except LockBusyError as exc:
        print(f"brain-pipeline rollback: {exc}", file=sys.stderr)
        return 75
    except RollbackRefused as exc:
        print(f"brain-pipeline rollback: {exc}", file=sys.stderr)
        return 1
    except StepFailure as exc:
        print(f"brain-pipeline rollback: {exc}", file=sys.stderr)
        return 3
    print(result.metadata["summary"])
    return 0
