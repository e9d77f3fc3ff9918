"""The one module that touches Dagster APIs which are not `@public` in 1.13.27.

Everything else in the project uses Dagster's public API. What is here has no public
equivalent (checked against the 1.13 API reference and `@public` in Dagster's source);
each function names the internal it relies on, and
`brain_pipeline_tests/lib/test_dagster_private.py` pins the behaviour the project relies
on, so an upgrade that changes one fails there, in one place. docs/architecture.md lists
them.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import dagster as dg

DATA_VERSION_TAG = "dagster/data_version"
"""The tag an asset event carries its data version in (`dagster._core.definitions.
data_version.DATA_VERSION_TAG`): what `ObserveResult(data_version=...)` writes."""
ASSET_EVALUATION_ID_TAG = "dagster/asset_evaluation_id"
"""The tag Dagster puts on a run automation launched: the id of that evaluation
(`dagster._core.storage.tags.ASSET_EVALUATION_ID_TAG`)."""


# ---- instance key-value entries (run storage) ------------------------------------------


def read_instance_value(instance: dg.DagsterInstance, key: str) -> str | None:
    """A key-value entry of the instance's run storage (`RunStorage.get_cursor_values`):
    survives every run, shared by every process of the instance."""
    return instance.run_storage.get_cursor_values({key}).get(key)


def write_instance_value(instance: dg.DagsterInstance, key: str, value: str) -> None:
    """Set a key-value entry of the run storage (`RunStorage.set_cursor_values`)."""
    instance.run_storage.set_cursor_values({key: value})


# ---- a run's own events -----------------------------------------------------------------


def run_events(
    instance: dg.DagsterInstance, run_id: str, kinds: set[dg.DagsterEventType]
) -> list[dg.EventLogEntry]:
    """The events of `run_id` of the given kinds, oldest first
    (`DagsterInstance.get_records_for_run`, every page): what a notification says of a
    run (its failed and succeeded steps, checks, materialisations), read the same way by
    the command and by the run-status sensors, which only get the one event that fired."""
    entries: list[dg.EventLogEntry] = []
    cursor: str | None = None
    while True:
        page = instance.get_records_for_run(run_id, cursor=cursor, of_type=kinds, limit=1000)
        entries.extend(record.event_log_entry for record in page.records)
        if not page.has_more:
            return entries
        cursor = page.cursor


def event_data(event: dg.DagsterEvent) -> Any:
    """What `event` carries beyond its type (`DagsterEvent.event_specific_data`): for a
    step failure its `error` (`cls_name`, `message`, `cause`, `context`) and
    `user_failure_data` (`description`, `metadata`, of a `dg.Failure`); for a resource's
    failure its `error`; for a check evaluation the `AssetCheckEvaluation`; for a
    materialisation `.materialization`. The public readers (`event_type`,
    `get_asset_check_evaluations()`, `get_step_failure_events()`) give the events, not
    what a failure raised."""
    return event.event_specific_data


# ---- the current step -------------------------------------------------------------------


def current_step_log() -> Any | None:
    """The run log (`context.log`) of the step running in this context, or None outside a
    step (`OpExecutionContext.get()`): where a helper far from the step's context, such as
    the core's damage reports, writes a line the run's log keeps."""
    import dagster as dg

    try:
        return dg.OpExecutionContext.get().log
    except Exception:  # no step in scope (Dagster raises its invariant violation)
        return None


# ---- data versions of observations ------------------------------------------------------


def observation(
    key: dg.AssetKey, data_version: str, metadata: Mapping[str, Any]
) -> dg.AssetObservation:
    """An observation of `key` with `data_version`, recorded as Dagster records an
    `ObserveResult(data_version=...)`, for the places that cannot return one: a sensor's
    `SensorResult(asset_events=...)` and another asset's step (`context.log_event`).
    `dg.AssetObservation` takes no data version but in its tags."""
    import dagster as dg

    return dg.AssetObservation(
        asset_key=key, tags={DATA_VERSION_TAG: data_version}, metadata=dict(metadata)
    )


def observed_data_version(record: dg.EventLogRecord) -> str | None:
    """The data version an observation record carries (None: none), whoever recorded it:
    an observable asset's `ObserveResult` or `observation` above."""
    tags = record.event_log_entry.tags or {}
    return tags.get(DATA_VERSION_TAG)


# ---- runs and pool slots ----------------------------------------------------------------


def mark_run_failed(instance: dg.DagsterInstance, run: dg.DagsterRun, message: str) -> None:
    """Record RUN_FAILURE for `run` (`DagsterInstance.report_run_failed`), what the run
    monitor does to a run whose worker is gone; the run's status becomes FAILURE."""
    instance.report_run_failed(run, message=message)


def note_in_run_log(instance: dg.DagsterInstance, run_id: str, message: str) -> bool:
    """Append `message` to finished run `run_id`'s own event log, as an engine event
    (`DagsterInstance.report_engine_event`): the run's page in the UI then shows it (a
    notification given up). False when the instance no longer holds the run."""
    run = instance.get_run_by_id(run_id)
    if run is None:
        return False
    instance.report_engine_event(message, run)
    return True


def runs_holding_pool_slots(instance: dg.DagsterInstance) -> set[str]:
    """Ids of the runs that hold (or wait for) a concurrency pool slot
    (`EventLogStorage.get_concurrency_run_ids`); empty where the storage has no pools."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return set()
    return set(storage.get_concurrency_run_ids())


def free_pool_slots(instance: dg.DagsterInstance, run_id: str) -> None:
    """Free every pool slot `run_id` holds (`EventLogStorage.free_concurrency_slots_for_run`)."""
    instance.event_log_storage.free_concurrency_slots_for_run(run_id)


def pool_limit(instance: dg.DagsterInstance, pool: str) -> int | None:
    """The limit that applies to `pool`: its own (`dagster instance concurrency set`),
    else the instance's `concurrency.pools.default_limit`; None when unlimited or where
    the storage has no pools (`get_pool_limits`, `get_concurrency_config`)."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return None
    for limit in storage.get_pool_limits():
        if limit.name == pool:
            return int(limit.limit)
    default = instance.get_concurrency_config().pool_config.default_pool_limit
    return int(default) if default is not None else None


def set_pool_limit(instance: dg.DagsterInstance, pool: str, limit: int) -> bool:
    """Give `pool` (that pool only) `limit` slots, as `dagster instance concurrency set
    POOL LIMIT` does (`EventLogStorage.set_concurrency_slots`). False where the storage
    has no pools."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return False
    storage.set_concurrency_slots(pool, limit)
    return True


# ---- automation evaluations -------------------------------------------------------------


class NoCursor:
    """Mixin for a custom `dg.AutomationCondition` whose `evaluate` reads no state of its
    previous evaluation (`requires_cursor` False): Dagster then stores no cursor for it at
    every tick. Put it first: `class C(NoCursor, dg.AutomationCondition[dg.AssetKey])`."""

    @property
    def requires_cursor(self) -> bool:
        return False


def automation_instance(context: dg.AutomationContext) -> dg.DagsterInstance:
    """The instance a custom automation condition is evaluated against
    (`AutomationContext.asset_graph_view.instance`; the context has no public accessor)."""
    return context.asset_graph_view.instance


@dataclass(frozen=True)
class EvaluationNode:
    """One node of an automation condition evaluation, as plain values: its label (None:
    unlabelled), whether it was true for any of the asset, and its operands'."""

    label: str | None
    true: bool
    children: tuple[EvaluationNode, ...]


def evaluation_tree(evaluation: Any) -> EvaluationNode:
    """An `AutomationConditionEvaluation` (`condition_snapshot.label`, `true_subset.size`,
    `child_evaluations`) as `EvaluationNode`s."""
    return EvaluationNode(
        label=evaluation.condition_snapshot.label or None,
        true=bool(evaluation.true_subset.size),
        children=tuple(evaluation_tree(child) for child in evaluation.child_evaluations),
    )


def launching_evaluation(
    instance: dg.DagsterInstance, tags: Mapping[str, str], key: dg.AssetKey
) -> EvaluationNode | None:
    """The evaluation of `key`'s automation condition that launched the run with `tags`
    (its `ASSET_EVALUATION_ID_TAG`), or None for a run automation did not launch
    (`ScheduleStorage.get_auto_materialize_evaluations_for_evaluation_id`)."""
    raw = tags.get(ASSET_EVALUATION_ID_TAG)
    storage = instance.schedule_storage
    if raw is None or not raw.isdigit() or storage is None:
        return None
    for record in storage.get_auto_materialize_evaluations_for_evaluation_id(int(raw)):
        if record.key == key:
            return evaluation_tree(record.get_evaluation_with_run_ids().evaluation)
    return None


# ---- the code location ------------------------------------------------------------------


def definitions_of_defs_package(defs_package: ModuleType, project_root: Path) -> dg.Definitions:
    """The definitions of every module in `defs_package`, loaded as `dg` loads a defs
    folder (`ComponentTree.from_module(...).build_defs_at_path(".")`).

    The public `dg.load_from_defs_folder` builds the same tree but first finds and parses
    pyproject.toml (absent from a non-editable install) and attaches a catalogue of every
    installed component type: 0.08 CPU-s more per load, measured (docs/architecture.md).
    """
    import dagster as dg

    with warnings.catch_warnings():
        # The tree loads each module with a function Dagster marks as preview.
        warnings.simplefilter("ignore", category=dg.PreviewWarning)
        tree = dg.ComponentTree.from_module(defs_module=defs_package, project_root=project_root)
        return tree.build_defs_at_path(Path("."))
