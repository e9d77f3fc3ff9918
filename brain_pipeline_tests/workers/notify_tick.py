"""The notification sensors of a worker's daemon, ticking over a finished run:
`python -m brain_pipeline_tests.workers.notify_tick RUN_ID`.

Evaluates `notify_on_failure` and `notify_on_success` over the run, then what the
`notify_retry` sensor does (`redeliver_due`: the messages still pending), as that
worker's sensor daemon would: its own DAGSTER_HOME on the shared instance, its own
build directory. Prints what it sent.
"""

from __future__ import annotations

import os
import sys

import dagster as dg

from brain_pipeline.config import load_config
from brain_pipeline.definitions import build_definitions
from brain_pipeline.defs.notify import redeliver_due

SENSORS = ("notify_on_failure", "notify_on_success")


def main(run_id: str) -> int:
    defs = build_definitions(os.environ["BRAIN_CONFIG"])
    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(run_id)
        if run is None:
            print(f"no run {run_id} in the instance", file=sys.stderr)
            return 2
        event = (
            "PIPELINE_SUCCESS" if run.status == dg.DagsterRunStatus.SUCCESS else "PIPELINE_FAILURE"
        )
        for name in SENSORS:
            context = dg.build_run_status_sensor_context(
                sensor_name=name,
                dagster_instance=instance,
                dagster_run=run,
                dagster_event=dg.DagsterEvent(event_type_value=event, job_name=run.job_name),
                context=None,
            )
            defs.resolve_sensor_def(name)(context)
        said = redeliver_due(instance, load_config())
    print(f"ticked {', '.join(SENSORS)} over run {run_id}; notify_retry: {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
