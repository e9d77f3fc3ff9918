"""What the project relies on from the Dagster internals behind `lib.dagster_private`,
on a real SQLite instance: an upgrade that changes one of them fails here.

(`launching_evaluation` reads the evaluation that launched a run, which only the daemon
makes: it is pinned end to end by
lib/test_conditions.py::test_schedule_sensor_and_automation_runs_say_what_started_them; the
tag it reads and the tree it builds are pinned here.)
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

    class Records(private.NoCursor, dg.AutomationCondition[dg.AssetKey]):
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


def test_a_no_cursor_condition_stores_no_cursor_and_others_do(
    instance: dg.DagsterInstance,
) -> None:
    """`NoCursor` overrides the property Dagster consults before storing a node cursor
    (`AutomationCondition.requires_cursor`, True by default)."""
    assert vars(dg.AutomationCondition)["requires_cursor"].fget(None) is True

    class Stateless(private.NoCursor, dg.AutomationCondition[dg.AssetKey]):
        def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
            return dg.AutomationResult(context=context, true_subset=context.candidate_subset)

    class Stateful(dg.AutomationCondition[dg.AssetKey]):
        def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
            return dg.AutomationResult(context=context, true_subset=context.candidate_subset)

    @dg.asset(automation_condition=Stateless())
    def without() -> None:
        return None

    @dg.asset(automation_condition=Stateful())
    def with_one() -> None:
        return None

    result = dg.evaluate_automation_conditions(defs=[without, with_one], instance=instance)
    cursors = {r.key.to_user_string(): r.node_cursor for r in result.results}
    assert cursors["without"] is None
    assert cursors["with_one"] is not None


def test_an_evaluation_becomes_a_tree_of_labels_and_truths(
    instance: dg.DagsterInstance,
) -> None:
    condition = dg.AutomationCondition
    fired = (
        condition.missing().with_label("never_built") | condition.in_progress().with_label("busy")
    ).with_label("either")

    @dg.asset(automation_condition=fired)
    def watched() -> None:
        return None

    result = dg.evaluate_automation_conditions(defs=[watched], instance=instance)
    (evaluated,) = result.results
    tree = private.evaluation_tree(evaluated.serializable_evaluation)
    assert (tree.label, tree.true) == ("either", True)
    assert [(c.label, c.true) for c in tree.children] == [("never_built", True), ("busy", False)]


def test_the_tags_the_adapter_names_are_dagsters(instance: dg.DagsterInstance) -> None:
    from dagster._core.definitions.data_version import DATA_VERSION_TAG
    from dagster._core.storage.tags import ASSET_EVALUATION_ID_TAG

    assert private.DATA_VERSION_TAG == DATA_VERSION_TAG
    assert private.ASSET_EVALUATION_ID_TAG == ASSET_EVALUATION_ID_TAG
    key = dg.AssetKey("x")
    assert private.launching_evaluation(instance, {}, key) is None  # not an automation run
    assert private.launching_evaluation(instance, {ASSET_EVALUATION_ID_TAG: "7"}, key) is None


def test_an_observation_carries_its_data_version_as_observe_result_does(
    instance: dg.DagsterInstance,
) -> None:
    source = dg.AssetKey("source")

    @dg.multi_observable_source_asset(specs=[dg.AssetSpec(source)], name="source")
    def observed() -> dg.ObserveResult:
        return dg.ObserveResult(data_version=dg.DataVersion("v1"))

    @dg.asset
    def elsewhere(context) -> None:  # type: ignore[no-untyped-def]  # (string annotations refused)
        context.log_event(private.observation(source, "v2", {"n": 1}))

    def latest() -> dg.EventLogRecord:
        records = instance.fetch_observations(dg.AssetRecordsFilter(asset_key=source), limit=1)
        return records.records[0]

    job = dg.Definitions(assets=[observed, elsewhere]).resolve_implicit_global_asset_job_def()
    assert job.execute_in_process(instance=instance, asset_selection=[source]).success
    by_dagster = latest()
    assert private.observed_data_version(by_dagster) == "v1"

    assert dg.materialize([elsewhere], instance=instance).success
    ours = latest()
    assert private.observed_data_version(ours) == "v2"
    observation = ours.asset_observation
    assert observation is not None and observation.data_version == "v2"  # Dagster's reader
    assert observation.metadata["n"] == dg.MetadataValue.int(1)
    assert private.observed_data_version(by_dagster) == "v1"


def test_an_events_data_has_the_shape_the_run_summary_and_notifications_read(
    instance: dg.DagsterInstance,
) -> None:
    @dg.asset
    def refuses() -> None:
        raise dg.Failure(description="nothing changed", metadata={"refused": True})

    @dg.asset(check_specs=[dg.AssetCheckSpec("sane", asset="breaks", blocking=True)])
    def breaks() -> dg.MaterializeResult:
        return dg.MaterializeResult(
            check_results=[dg.AssetCheckResult(passed=False, description="insane")]
        )

    @dg.asset(deps=[breaks])
    def raises() -> None:
        try:
            raise OSError("disk gone")
        except OSError as exc:
            raise RuntimeError("could not write") from exc

    result = dg.materialize(
        [refuses, breaks, raises],
        instance=instance,
        raise_on_error=False,
        selection=["refuses", "breaks"],
    )
    failures = {e.step_key: private.event_data(e) for e in result.all_events if e.is_step_failure}
    user = failures["refuses"].user_failure_data
    assert user.description == "nothing changed"
    assert user.metadata["refused"].value is True
    error = failures["refuses"].error
    assert {"cls_name", "message", "cause", "context"} <= set(dir(error))

    (check_event,) = [
        e for e in result.all_events if e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ]
    evaluation = private.event_data(check_event)
    assert evaluation == result.get_asset_check_evaluations()[0]
    assert (evaluation.asset_key, evaluation.check_name) == (dg.AssetKey("breaks"), "sane")
    assert (evaluation.passed, evaluation.blocking, evaluation.description) == (
        False,
        True,
        "insane",
    )
    assert evaluation.severity == dg.AssetCheckSeverity.ERROR
    (materialised,) = [
        private.event_data(e)
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION
    ]
    assert materialised.materialization.asset_key == dg.AssetKey("breaks")

    alone = dg.materialize([raises], instance=instance, raise_on_error=False)
    (failed,) = [private.event_data(e) for e in alone.all_events if e.is_step_failure]
    assert failed.user_failure_data is None
    chain, error = [], failed.error
    while error is not None:
        chain.append((error.cls_name, error.message.strip().splitlines()[0]))
        error = error.cause or error.context
    assert ("RuntimeError", "RuntimeError: could not write") in chain
    assert chain[-1] == ("OSError", "OSError: disk gone")


def test_a_resources_failure_carries_its_error(instance: dg.DagsterInstance) -> None:
    @dg.resource
    def broken(_: dg.InitResourceContext) -> None:
        raise PermissionError("the lock is taken")

    @dg.asset(required_resource_keys={"broken"})
    def needs() -> None:
        return None

    result = dg.materialize(
        [needs], instance=instance, raise_on_error=False, resources={"broken": broken}
    )
    (event,) = [e for e in result.all_events if e.is_resource_init_failure]
    error = private.event_data(event).error
    names = []
    while error is not None:
        names.append(error.cls_name)
        error = error.cause or error.context
    assert "PermissionError" in names


def test_the_current_step_log_reaches_the_runs_log_and_is_none_outside(
    instance: dg.DagsterInstance,
) -> None:
    assert private.current_step_log() is None

    @dg.asset
    def reports() -> None:
        log = private.current_step_log()
        assert log is not None
        log.warning("WARN damaged state/x.json, set aside")

    result = dg.materialize([reports], instance=instance)
    messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert "WARN damaged state/x.json, set aside" in messages
