"""`direct_runs`: tell the instance about the runs `materialize` made without Dagster.

A plain `brain-pipeline materialize` walks the plan in its own process (`steps.direct_run`)
and writes what it did to a run journal in `<build_dir>/state/runs/` instead of Dagster's
event log. This sensor reads the journals whose file names sort after its cursor (names
sort in the order runs finished) and hands their outcomes to the instance as runless
asset events, which the daemon stores when the tick ends:

- an observation that succeeded (`corpus`, `eval_fixture`) -> an `AssetObservation`
  with its data version in `dagster/data_version`;
- an asset that materialised -> an `AssetMaterialization` with its data version, code
  version and the data versions of its inputs (the provenance tags a Dagster run writes,
  so the UI's staleness compares code and inputs as it does after a run; without the
  input tags, a code version alone would make Dagster call every input "new");
- an evaluated check -> an `AssetCheckEvaluation` (passed, severity, description,
  blocking). Runless events share one run id, so Dagster counts the latest runless
  evaluation of a check as made on the latest runless materialisation of its asset; each
  check is reported right after its asset's, so that is the one it was made on.
- a failed, blocked or empty step -> nothing (as a failed Dagster step materialises
  nothing); the tick's line names it.

Every event's metadata also says where it came from: `direct_run` (the run id, as text:
there is no Dagster run to link to), `launched_by` and `finished_at` (the events are
stamped when the tick reports them, up to one interval after the run). A `RunLink` in a
step's metadata that names no run of this instance (a direct run's own id) becomes text
too, so the UI shows no dead link.

At most `JOURNALS_PER_TICK` journals are reported per tick; the cursor moves to the last
one reported, so a backlog drains over a few ticks. A damaged journal is set aside by
`read_journal` (one WARN line) and the next one is still reported. Only the code
location's own build directory is read; when the instance serves another build
directory the tick reports nothing and says why (lineage of two directories never mixes).

Order relative to automation: the instance learns of a direct run up to one interval
after it ended (and the daemon stores a tick's events one by one). A sensor evaluating
in that window sees the instance as it was before the run: `corpus_observation_sensor`
and `automation_sensor` (`corpus_version_unconsumed`) may see a corpus version the
chunks were not yet reported to have read, and launch a run. That run finds every step
current (the build directory holds what the direct run built), publishes nothing new and
changes nothing but the history; once the direct run's `knowledge_chunks`
materialisation is reported, the condition is false again. Nothing more is done about
that window.

The sensor runs by default, whatever `schedule.sensor_enabled` says: it launches
nothing, it only keeps the UI's history true to what the command line did.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.lib.code_location import location_config
from brain_pipeline.lib.steps import (
    DATA_VERSION_TAG,
    BuildDirMismatch,
    claim_build_dir,
    layout_for,
    to_metadata,
)
from brain_pipeline.steps.plan import PLAN, Node
from brain_pipeline.steps.report import RunLink
from brain_pipeline.steps.run_journal import RunJournal, StepEntry, journals_after

SENSOR_NAME = "direct_runs"
INTERVAL_SECONDS = 30
JOURNALS_PER_TICK = 20

# Dagster's data-provenance tags (what a run's materialisation carries; read back by its
# staleness resolver). Written here because the constants live in a private module.
CODE_VERSION_TAG = "dagster/code_version"
INPUT_DATA_VERSION_PREFIX = "dagster/input_data_version/"
INPUT_EVENT_POINTER_PREFIX = "dagster/input_event_pointer/"
NO_EVENT_POINTER = "NULL"
USER_PROVIDED_TAG = "dagster/data_version_is_user_provided"

AssetEvent = dg.AssetObservation | dg.AssetMaterialization | dg.AssetCheckEvaluation
_NODES: dict[str, Node] = {n.name: n for n in PLAN}


def journal_events(journal: RunJournal, instance: dg.DagsterInstance) -> list[AssetEvent]:
    """The asset events a Dagster run doing what `journal` records would have stored."""
    origin = {
        "direct_run": journal.run_id,
        "launched_by": journal.launched_by,
        "finished_at": journal.finished_at,
    }
    events: list[AssetEvent] = []
    for entry in journal.steps:
        if entry.status != "ok" or entry.name not in _NODES:
            continue  # failed, blocked, empty; or a node this code location does not have
        metadata = to_metadata({**_linkable(entry.metadata, instance), **origin})
        if entry.kind == "observation":
            tags = {DATA_VERSION_TAG: entry.data_version} if entry.data_version else None
            events.append(dg.AssetObservation(entry.name, metadata=metadata, tags=tags))
        elif entry.kind == "asset":
            events.append(
                dg.AssetMaterialization(
                    entry.name, metadata=metadata, tags=_provenance(entry, journal)
                )
            )
        else:
            events.append(_check_evaluation(entry, metadata))
    return events


def _provenance(entry: StepEntry, journal: RunJournal) -> dict[str, str]:
    """Data version, and when every input's version is known, code version and inputs."""
    tags = {DATA_VERSION_TAG: entry.data_version} if entry.data_version else {}
    inputs = {dep: _version_of(journal, dep) for dep in _NODES[entry.name].deps}
    if not entry.data_version or not entry.code_version or None in inputs.values():
        return tags  # Dagster then compares timestamps, as for an event without provenance
    tags[CODE_VERSION_TAG] = entry.code_version
    tags[USER_PROVIDED_TAG] = "true"
    for dep, version in inputs.items():
        tags[INPUT_DATA_VERSION_PREFIX + dep] = str(version)
        tags[INPUT_EVENT_POINTER_PREFIX + dep] = NO_EVENT_POINTER
    return tags


def _version_of(journal: RunJournal, name: str) -> str | None:
    step = journal.step(name)
    return step.data_version if step is not None and step.status == "ok" else None


def _check_evaluation(entry: StepEntry, metadata: dict[str, Any]) -> dg.AssetCheckEvaluation:
    asset = entry.asset or _NODES[entry.name].asset
    return dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey(str(asset)),
        check_name=entry.name,
        passed=bool(entry.passed),
        severity=dg.AssetCheckSeverity[entry.severity or "ERROR"],
        description=entry.description,
        metadata=metadata,
        blocking=entry.blocking,
    )


def _linkable(values: dict[str, Any], instance: dg.DagsterInstance) -> dict[str, Any]:
    """`values` with each `RunLink` to a run this instance does not have as plain text."""
    return {
        key: value.run_id
        if isinstance(value, RunLink) and not instance.has_run(value.run_id)
        else value
        for key, value in values.items()
    }


def describe(journal: RunJournal) -> str:
    """One run as the tick's line says it: id, outcome, each failed step with its one
    line, and how many steps were blocked."""
    notes = [
        f"{e.name} failed: {e.error or 'no message'}" for e in journal.steps if e.status == "failed"
    ]
    blocked = sum(1 for e in journal.steps if e.status == "blocked")
    if blocked:
        notes.append(f"{blocked} blocked")
    outcome = "succeeded" if journal.succeeded else "failed"
    if journal.interrupted:
        outcome = f"interrupted ({journal.interrupted})"
    detail = f" ({'; '.join(notes)})" if notes else ""
    return f"{journal.run_id[:8]} {outcome}{detail}"


def report_direct_runs(
    context: dg.SensorEvaluationContext, cfg: BrainConfig
) -> dg.SensorResult | dg.SkipReason:
    """One tick: the events of up to JOURNALS_PER_TICK new journals, and the new cursor."""
    layout = layout_for(cfg)
    batch = list(islice(journals_after(layout, context.cursor), JOURNALS_PER_TICK))
    if not batch:
        return dg.SkipReason(f"no new direct run in {layout.run_journal_dir}")
    try:
        claim_build_dir(context.instance, cfg.build_dir)
    except BuildDirMismatch as exc:
        return dg.SkipReason(f"not reported: {exc.description}")
    events = [event for _, journal in batch for event in journal_events(journal, context.instance)]
    runs = " | ".join(describe(journal) for _, journal in batch)
    line = f"reported {len(batch)} direct run(s), {len(events)} event(s): {runs}"
    context.log.info(line)
    return dg.SensorResult(asset_events=events, cursor=batch[-1][0], skip_reason=line)


def build_direct_runs_sensor(cfg: BrainConfig) -> dg.SensorDefinition:
    @dg.sensor(
        name=SENSOR_NAME,
        minimum_interval_seconds=INTERVAL_SECONDS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            "Reports the runs `brain-pipeline materialize` made without Dagster (their "
            "journals in <build_dir>/state/runs/) as materialisations, observations and "
            "check evaluations, within one interval of the run's end. Launches nothing."
        ),
    )
    def direct_runs(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        # The configuration is read at each tick (a moved build directory needs no reload).
        live = load_config(cfg.config_path) if cfg.config_path else cfg
        return report_direct_runs(context, live)

    return direct_runs


@dg.definitions
def direct_runs_definitions() -> dg.Definitions:
    return dg.Definitions(sensors=[build_direct_runs_sensor(location_config())])
