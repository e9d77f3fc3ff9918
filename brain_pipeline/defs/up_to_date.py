"""The up-to-date record's Dagster side: who confirms a run, and what the skip asks Dagster.

`steps.up_to_date` keeps the record Dagster-free; here is what needs the instance:

- `confirm_finished_run`: a run of ours that Dagster says SUCCEEDED, and that selected
  every asset and every blocking check, has what it left (written as pending by its own
  `BrainSettings` resource) made the record; any other finished run only has its
  pending row dropped. The command calls it after its own run; the
  `up_to_date_record` sensor (`keep_record`, every 30 s while the daemon runs) for
  every other run (the UI, a schedule, automation), so the next `materialize` skips
  after those too. The sensor also drops a record the instance no longer holds (a
  wipe from the UI or `dagster asset wipe`).
- `consult_instance`: what the skip asks the instance, at most once per
  `steps.up_to_date.CONSULT_AFTER_SECONDS` (`UpToDate.consult_due`): does it hold the recorded run's
  materialisations (not after `dagster asset wipe`)? It only reads: a skip is not a run
  and writes no history (no materialisation, no observation), so automation never
  mistakes it for new data and the asset's history holds only what runs made. The
  freshness policy on `published_local` judges the last real publication run; on a
  quiet corpus the nightly `reingest_schedule` run is what keeps it fresh.
"""

from __future__ import annotations

import dagster as dg

from brain_pipeline.config import BrainConfig, load_config, memory_of
from brain_pipeline.lib.code_location import location_config_path
from brain_pipeline.lib.instance import BUILD_DIR_TAG, build_dir_tag_value
from brain_pipeline.steps import up_to_date as record

OUR_JOBS = ("reingest_job", "rollback_job", "__ASSET_JOB")


def ours(run: dg.DagsterRun, cfg: BrainConfig) -> bool:
    """A run of this project's jobs on this build directory (when it says which)."""
    if not run.job_name.startswith(OUR_JOBS):
        return False
    tagged = run.tags.get(BUILD_DIR_TAG)
    return tagged is None or tagged == build_dir_tag_value(cfg.build_dir)


def selection_names(run: dg.DagsterRun) -> tuple[list[str] | None, list[str] | None]:
    """The run's selected asset names and `asset:check` names (None: not narrowed)."""
    assets = run.asset_selection
    checks = run.asset_check_selection
    return (
        None if assets is None else [k.to_user_string() for k in assets],
        None if checks is None else [f"{k.asset_key.to_user_string()}:{k.name}" for k in checks],
    )


def confirm_finished_run(instance: dg.DagsterInstance, run_id: str, cfg: BrainConfig) -> str | None:
    """Settle run `run_id`'s pending outcome (`steps.up_to_date.confirm`): it becomes the
    record when Dagster says the run SUCCEEDED as a full run; None when recorded, else
    why not. Call under the ledger's run lease."""
    run = instance.get_run_by_id(run_id)
    refused = None
    if run is None or not ours(run, cfg):
        refused = "not a run of this build directory"
    elif run.status != dg.DagsterRunStatus.SUCCESS:
        refused = f"the run ended {run.status.value}"
    elif not record.is_full_selection(*selection_names(run)):
        refused = "the run did not select every asset and check"
    return record.confirm(cfg, run_id, cfg.instance_home(), refused=refused)


def _unseen(instance: dg.DagsterInstance, run_id: str) -> str | None:
    """Why the instance does not hold run `run_id`'s materialisations, or None."""
    for name in record.FULL_RUN_ASSETS:
        entry = instance.get_latest_materialization_event(dg.AssetKey(name))
        if entry is None:
            return f"this Dagster instance holds no materialisation of {name} (wiped?)"
        if entry.run_id != run_id:
            return f"this Dagster instance's latest {name} is not run {run_id}'s (wiped?)"
    return None


def consult_instance(cfg: BrainConfig, verdict: record.UpToDate, now: float) -> record.UpToDate:
    """The skip's final verdict, once `verdict.consult_due`: ask the instance the command
    uses what only it knows (module docstring)."""
    from brain_pipeline.lib.instance import ensure_instance_home, open_instance

    run_id = str(verdict.run_id)
    ensure_instance_home(cfg.instance_home())
    with open_instance(cfg.build_dir, cli_run=True) as instance:
        why = _unseen(instance, run_id)
    if why is not None:
        return record.UpToDate(False, why)
    record.mark_seen(memory_of(cfg).ledger, run_id, now)
    return verdict


def keep_record(instance: dg.DagsterInstance, cfg: BrainConfig) -> str | None:
    """One tick of the `up_to_date_record` sensor: settle the pending run once Dagster
    says it is over, and drop a record the instance no longer holds (its assets were
    wiped: the next command then runs). What it did, or None."""
    from brain_pipeline.lib.instance import run_is_over
    from brain_pipeline.state.lock import LockBusyError, make_holder
    from brain_pipeline.state.run_lease import run_lease

    ledger = memory_of(cfg).ledger
    try:
        with run_lease(
            ledger,
            run_id=None,
            wait_seconds=0,
            holder=make_holder("up_to_date_record sensor"),
            finished=run_is_over(instance),
        ):
            pending = record.pending_run(ledger)
            if pending is not None:
                run = instance.get_run_by_id(pending)
                if run is not None and run.is_finished:
                    why = confirm_finished_run(instance, pending, cfg)
                    return f"run {pending[:8]}: " + (why or "recorded as up to date")
            recorded = record.recorded_run(ledger)
            if recorded is not None:
                unseen = _unseen(instance, recorded)
                if unseen is not None:
                    record.forget(ledger, recorded)
                    return f"run {recorded[:8]} no longer up to date: {unseen}"
    except LockBusyError:
        return None  # a run is in progress: its end is the next tick's business
    return None


def build_record_sensor(config_path: str | None) -> dg.SensorDefinition:
    @dg.sensor(
        name="up_to_date_record",
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            "Records a successful full run launched from the UI, a schedule or automation "
            "as what `brain-pipeline materialize` compares against, so the command skips "
            "when nothing changed since (the command records its own runs); forgets it "
            "when the instance no longer holds that run's materialisations (a wipe)."
        ),
    )
    def up_to_date_record(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        said = keep_record(context.instance, load_config(config_path))
        return dg.SkipReason(said or "nothing to record")

    return up_to_date_record


@dg.definitions
def up_to_date_definitions() -> dg.Definitions:
    return dg.Definitions(sensors=[build_record_sensor(location_config_path())])
