"""A worker's run under Dagster's `multiprocess_executor`, each step process in a working
folder of its own: `python -m brain_pipeline_tests.workers.multiprocess_run`.

`reingest_job_in_own_folder` is what `dg.reconstructable` rebuilds inside every step
process, so each step process first makes an empty folder under the worker's TMPDIR,
moves into it and points BRAIN_BUILD_DIR at an empty build directory there: a step can
then only find what another step made through what the workers share (the ledger, the
blobs, Dagster's own hand-off), never through a file another process left on disk.
Prints one line per step with its pid, and `succeeded`/`FAILED` with the failures.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import dagster as dg

from brain_pipeline.definitions import build_definitions

JOB_NAME = "reingest_job"


def reingest_job_in_own_folder() -> dg.JobDefinition:
    folder = Path(tempfile.mkdtemp(prefix=f"step-{os.getpid()}-"))
    os.chdir(folder)
    os.environ["BRAIN_BUILD_DIR"] = str(folder / "build")
    job = build_definitions(os.environ["BRAIN_CONFIG"]).resolve_job_def(JOB_NAME)
    return job.with_executor_def(dg.multiprocess_executor)


def main() -> int:
    with dg.DagsterInstance.get() as instance:
        result = dg.execute_job(
            dg.reconstructable(reingest_job_in_own_folder), instance=instance, raise_on_error=False
        )
        for entry in instance.all_logs(result.run_id, of_type=dg.DagsterEventType.STEP_START):
            event = entry.dagster_event
            if event is not None:
                print(f"step {event.step_key} pid {event.pid}")
    failures = [
        f"{event.step_key}: {event.step_failure_data.error.message.strip().splitlines()[0]}"
        for event in result.all_events
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error
    ]
    print("succeeded" if result.success else "FAILED: " + "; ".join(failures))
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
