"""What the project relies on from the Dagster internals behind `lib.dagster_private`,
on a real SQLite instance: an upgrade that changes one of them fails here.

(`evaluation_of` needs a real automation evaluation, which only the daemon makes: it is
pinned by lib/test_conditions.py::test_schedule_sensor_and_automation_runs_say_what_started_them.)
"""

from __future__ import annotations

import uuid
from pathlib import Path

import dagster as dg
import pytest

import brain_pipeline.defs as defs_package
from brain_pipeline.lib import dagster_private as private
from brain_pipeline.lib.code_location import building_for

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dg.DagsterInstance:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return dg.DagsterInstance.get()


def test_an_instance_value_persists_for_every_process_of_the_instance(
    instance: dg.DagsterInstance,
) -> None:
    assert private.read_instance_value(instance, "brain_pipeline/x") is None
    private.write_instance_value(instance, "brain_pipeline/x", "/builds/a")
    private.write_instance_value(instance, "brain_pipeline/x", "/builds/b")  # overwrites
    reopened = dg.DagsterInstance.get()
    assert private.read_instance_value(reopened, "brain_pipeline/x") == "/builds/b"


def test_marking_a_run_failed_records_its_failure_and_message(
    instance: dg.DagsterInstance,
) -> None:
    run = instance.add_run(
        dg.DagsterRun(job_name="j", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.STARTED)
    )
    private.mark_run_failed(instance, run, "the process is gone")
    record = instance.get_run_record_by_id(run.run_id)
    assert record is not None and record.dagster_run.status == dg.DagsterRunStatus.FAILURE
    failures = instance.fetch_run_status_changes(dg.DagsterEventType.RUN_FAILURE, limit=5)
    (entry,) = [r for r in failures.records if r.run_id == run.run_id]
    assert entry.event_log_entry.message == "the process is gone"


def test_a_note_lands_in_a_finished_runs_own_log(instance: dg.DagsterInstance) -> None:
    run = instance.add_run(
        dg.DagsterRun(job_name="j", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.FAILURE)
    )
    assert private.note_in_run_log(instance, run.run_id, "notification NOT delivered")
    logged = private.run_events(instance, run.run_id, {dg.DagsterEventType.ENGINE_EVENT})
    assert [e.message for e in logged] == ["notification NOT delivered"]
    assert not private.note_in_run_log(instance, str(uuid.uuid4()), "no such run")


def test_pool_limits_and_the_slots_a_run_holds(instance: dg.DagsterInstance) -> None:
    assert private.pool_limit(instance, "pool_a") is None
    assert private.set_pool_limit(instance, "pool_a", 1)
    assert private.pool_limit(instance, "pool_a") == 1
    assert private.pool_limit(instance, "pool_b") is None  # one pool only
    storage = instance.event_log_storage
    assert storage.claim_concurrency_slot("pool_a", "run-1", "step", 0).is_claimed
    assert private.runs_holding_pool_slots(instance) == {"run-1"}
    assert not storage.claim_concurrency_slot("pool_a", "run-2", "step", 0).is_claimed
    private.free_pool_slots(instance, "run-1")
    private.free_pool_slots(instance, "run-2")  # its pending claim too
    assert private.runs_holding_pool_slots(instance) == set()
    assert storage.claim_concurrency_slot("pool_a", "run-3", "step", 0).is_claimed


def test_the_defs_tree_loads_what_the_public_loader_loads() -> None:
    with building_for(None):
        ours = private.definitions_of_defs_package(defs_package, REPO)
        public = dg.load_from_defs_folder(path_within_project=REPO)

    def shape(defs: dg.Definitions) -> tuple[set[str], set[str], set[str], set[str]]:
        graph = defs.resolve_asset_graph()
        repo = defs.get_repository_def()
        return (
            {k.to_user_string() for k in graph.get_all_asset_keys()},
            {c.to_user_string() for c in graph.asset_check_keys},
            {j.name for j in repo.get_all_jobs()},
            {s.name for s in [*repo.sensor_defs, *repo.schedule_defs]},
        )

    assert shape(ours) == shape(public)
    assert "knowledge_chunks" in shape(ours)[0]


def test_a_custom_condition_is_evaluated_against_the_callers_instance(
    instance: dg.DagsterInstance,
) -> None:
    seen: list[dg.DagsterInstance] = []

    class Records(dg.AutomationCondition[dg.AssetKey]):
        @property
        def requires_cursor(self) -> bool:
            return False

        def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
            seen.append(private.automation_instance(context))
            return dg.AutomationResult(context=context, true_subset=context.candidate_subset)

    @dg.asset(automation_condition=Records())
    def watched() -> None:
        return None

    result = dg.evaluate_automation_conditions(defs=[watched], instance=instance)
    assert result.total_requested == 1
    assert seen == [instance]


def test_a_runs_events_of_the_asked_kinds_are_read_whole_and_in_order(
    instance: dg.DagsterInstance,
) -> None:
    @dg.asset
    def first() -> int:
        return 1

    @dg.asset(deps=[first])
    def second() -> None:
        raise RuntimeError("second broke")

    result = dg.materialize([first, second], instance=instance, raise_on_error=False)
    kinds = {dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}
    entries = private.run_events(instance, result.run_id, kinds)
    events = [entry.dagster_event for entry in entries if entry.dagster_event]
    said = [(event.event_type, event.step_key) for event in events]
    assert said == [
        (dg.DagsterEventType.STEP_SUCCESS, "first"),
        (dg.DagsterEventType.STEP_FAILURE, "second"),
    ]
