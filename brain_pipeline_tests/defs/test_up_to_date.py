"""The up-to-date skip is true or absent (issue #35, item 2), probed as an operator would.

Each test starts from a successful `brain-pipeline materialize` of the tiny project on
its own DAGSTER_HOME, then does what the issue names: a failed selected run, another
instance, a wipe, a flag that asks for work, a run the command did not launch, and a
quiet day of hourly skips (which write no history). What the user sees is asserted: the command's
first line ("up to date ..." or "running: ..."), and the runs the instance holds.
"""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
import pytest

from brain_pipeline.cli import main
from brain_pipeline.cli.materialize import _nothing_to_do
from brain_pipeline.config import load_config
from brain_pipeline.definitions import build_definitions
from brain_pipeline.defs.up_to_date import keep_record
from brain_pipeline.steps.up_to_date import (
    CONSULT_AFTER_SECONDS,
    FULL_RUN_ASSETS,
    FULL_RUN_CHECKS,
)
from brain_pipeline_tests.defs.conftest import IMPOSSIBLE, Project, cli_sees
from brain_pipeline_tests.lib.test_conditions import (  # the real-daemon fixture, reused
    PHASE_TIMEOUT,
    DaemonProject,
    daemon_project,  # noqa: F401 (a fixture)
)

UP_TO_DATE = "up to date: nothing changed since run "


@pytest.fixture
def built(tiny_project: Project, monkeypatch: pytest.MonkeyPatch) -> Project:
    cli_sees(tiny_project, monkeypatch)
    assert main(["materialize"]) == 0
    return tiny_project


def _command(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["materialize", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _instance() -> dg.DagsterInstance:
    return dg.DagsterInstance.get()  # DAGSTER_HOME, as the command sees it


def _run_count() -> int:
    instance = _instance()
    try:
        return len(instance.get_run_records())
    finally:
        instance.dispose()


def test_an_untouched_build_skips_and_names_its_run(
    built: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _run_count()
    code, out, _ = _command(capsys)
    assert code == 0 and out.startswith(UP_TO_DATE), out
    assert _run_count() == runs


def test_no_skip_after_a_failed_selected_run(
    built: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed `--select embeddings` since the last success: the UI shows the failed
    check as the latest, so the command must run, even with every file as it was."""
    built.write_config(**IMPOSSIBLE)
    code, _, _ = _command(capsys, "--select", "embeddings")
    assert code == 1  # retrieval_eval fails
    built.write_config()  # the configuration is back as the last success saw it
    runs = _run_count()
    code, out, err = _command(capsys)
    assert not out.startswith(UP_TO_DATE), out
    assert "running: no successful full run is recorded" in err
    assert code == 0 and _run_count() == runs + 1
    code, out, _ = _command(capsys)
    assert out.startswith(UP_TO_DATE)  # proven again by that full success


def test_no_skip_after_a_partial_run_that_succeeded(
    built: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _command(capsys, "--select", "knowledge_store")[0] == 0
    code, out, err = _command(capsys)
    assert not out.startswith(UP_TO_DATE) and "running: " in err


def test_no_skip_on_another_dagster_home(
    built: Project, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(built.root / "another-home"))
    code, out, err = _command(capsys)
    assert not out.startswith(UP_TO_DATE), out
    assert "has not seen run" in err and "another-home" in err
    assert code == 0 and _run_count() == 1  # the new instance now holds the run it saw


def test_no_skip_after_the_assets_are_wiped(
    built: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the daemon running, its `up_to_date_record` sensor drops the record at its
    next tick; without one, the command's hourly consult of the instance finds it."""
    cfg = load_config()
    instance = _instance()
    try:
        instance.wipe_assets([dg.AssetKey(name) for name in FULL_RUN_ASSETS])
    finally:
        instance.dispose()
    # Without a daemon: the next consult (due at the latest an hour later) refuses.
    assert not _nothing_to_do(cfg, now=time.time() + CONSULT_AFTER_SECONDS + 1)
    assert "holds no materialisation of knowledge_chunks (wiped?)" in capsys.readouterr().err
    # With a daemon: its sensor's tick drops the record, and the command runs at once.
    instance = _instance()
    try:
        said = keep_record(instance, cfg)
    finally:
        instance.dispose()
    assert said is not None and "no longer up to date" in said
    code, out, err = _command(capsys)
    assert not out.startswith(UP_TO_DATE) and "running: " in err and code == 0


@pytest.mark.parametrize("flag", ["--retry-refused", "--force-publish"])
def test_a_flag_that_asks_for_work_always_runs(
    built: Project, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    runs = _run_count()
    reason = ["--reason", "asks for a run"] if flag == "--force-publish" else []
    code, out, err = _command(capsys, flag, *reason)
    assert code == 0 and not out.startswith(UP_TO_DATE)
    assert f"running: {flag} asks for a run" in err
    assert _run_count() == runs + 1


def _launch_as_the_ui_does(project: Project, instance: dg.DagsterInstance) -> dg.DagsterRun:
    """A run of every asset and check, not by the command: the implicit asset job
    submitted straight to the instance, as a UI launch or a schedule's run request."""
    defs = build_definitions(str(project.config_path))
    job = defs.resolve_implicit_global_asset_job_def()
    graph = defs.resolve_asset_graph()
    result = job.execute_in_process(
        instance=instance,
        asset_selection=sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()),
        tags={"launched_by": "the UI"},
        raise_on_error=False,
    )
    run = instance.get_run_by_id(result.run_id)
    assert run is not None
    return run


def test_a_run_the_ui_launched_is_recorded_by_the_sensor_and_then_skipped(
    built: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = load_config()
    instance = _instance()
    try:
        run = _launch_as_the_ui_does(built, instance)
        assert run.status == dg.DagsterRunStatus.SUCCESS
        # Before the daemon's sensor ticks the run is not proven: the command runs.
        assert not _nothing_to_do(cfg)
        # The sensor's tick (what the daemon does every 30 s) records it.
        defs = build_definitions(str(built.config_path))
        sensor = defs.resolve_sensor_def("up_to_date_record")
        tick = sensor.evaluate_tick(
            dg.build_sensor_context(instance=instance, definitions=defs, sensor_name=sensor.name)
        )
        assert f"run {run.run_id[:8]}: recorded as up to date" in str(tick.skip_message)
    finally:
        instance.dispose()
    runs = _run_count()
    code, out, _ = _command(capsys)
    assert code == 0 and out.startswith(f"{UP_TO_DATE}{run.run_id} ")
    assert _run_count() == runs


def test_a_failed_ui_run_is_never_recorded(
    built: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = load_config()
    built.write_config(**IMPOSSIBLE)
    instance = _instance()
    try:
        run = _launch_as_the_ui_does(built, instance)
        assert run.status == dg.DagsterRunStatus.FAILURE
        built.write_config()
        said = keep_record(instance, cfg)
    finally:
        instance.dispose()
    assert said is not None and "the run ended FAILURE" in said
    code, out, err = _command(capsys)
    assert not out.startswith(UP_TO_DATE) and "running: " in err


def test_a_day_of_hourly_skips_writes_no_history(built: Project) -> None:
    """The skip is not a run: a day of hourly checks (each one due to consult the
    instance) leaves the asset's history as the command's run left it, with no
    runless materialisation or observation for automation to read as new data."""
    cfg = load_config()
    keys = [dg.AssetKey(name) for name in (*FULL_RUN_ASSETS, "published_s3")]

    def history() -> list[tuple[str, str, float]]:
        instance = _instance()
        try:
            events = []
            for key in keys:
                for fetch in (instance.fetch_materializations, instance.fetch_observations):
                    records = fetch(key, limit=1000).records
                    events += [(key.to_user_string(), r.run_id, r.timestamp) for r in records]
            return sorted(events)
        finally:
            instance.dispose()

    before = history()
    runs = _run_count()
    start = time.time()
    for hour in range(1, 25):
        assert _nothing_to_do(cfg, now=start + hour * (CONSULT_AFTER_SECONDS + 1))
    assert history() == before
    assert all(run_id for _, run_id, _ in before)  # every entry was made by a run
    assert _run_count() == runs


def test_the_full_run_sets_are_the_code_locations(tiny_project: Project) -> None:
    graph = build_definitions(str(tiny_project.config_path)).resolve_asset_graph()
    blocking = {
        f"{k.asset_key.to_user_string()}:{k.name}"
        for k in graph.asset_check_keys
        if graph.get_check_spec(k).blocking
    }
    assert set(FULL_RUN_CHECKS) == blocking
    assets = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert set(FULL_RUN_ASSETS) <= assets


def test_the_record_never_outlives_a_run_in_progress(built: Path | Project) -> None:
    """A run that starts forgets the record before its first step: killed midway, it
    leaves no "up to date" behind (the run's resource, whoever launched it)."""
    from brain_pipeline.config import memory_of
    from brain_pipeline.steps import up_to_date

    assert isinstance(built, Project)
    cfg = load_config()
    ledger = memory_of(cfg).ledger
    assert up_to_date.recorded_run(ledger) is not None
    up_to_date.run_started(cfg, "a-run-killed-midway")
    assert up_to_date.recorded_run(ledger) is None
    assert not up_to_date.check(cfg).current


def test_a_run_of_published_s3_alone_keeps_the_record(built: Project) -> None:
    """With no bucket a run of published_s3 alone uploads nothing, so the record stands."""
    from brain_pipeline.config import memory_of
    from brain_pipeline.steps import up_to_date

    cfg = load_config()
    ledger = memory_of(cfg).ledger
    recorded = up_to_date.recorded_run(ledger)
    instance = _instance()
    try:
        defs = build_definitions(str(built.config_path))
        job = defs.resolve_implicit_global_asset_job_def()
        result = job.execute_in_process(
            instance=instance, asset_selection=[dg.AssetKey("published_s3")]
        )
        assert result.success
    finally:
        instance.dispose()
    assert up_to_date.recorded_run(ledger) == recorded
    assert up_to_date.check(cfg).current


AUTOMATION_TICK = "Checking for new runs for sensor: automation_sensor"


def _automation_ticks(daemon: DaemonProject) -> int:
    """How many ticks of `automation_sensor` the daemon has started (its own log line)."""
    if not daemon.log_path.exists():
        return 0
    return daemon.log_path.read_text(encoding="utf-8", errors="replace").count(AUTOMATION_TICK)


def _wait_for_automation_ticks(daemon: DaemonProject, count: int) -> None:
    deadline = time.monotonic() + PHASE_TIMEOUT
    while _automation_ticks(daemon) < count:
        if time.monotonic() > deadline or (daemon.daemon and daemon.daemon.poll() is not None):
            pytest.fail(f"automation_sensor never ticked {count} times:\n{daemon.log_tail()}")
        time.sleep(1.0)


def test_under_the_daemon_a_day_of_hourly_skips_launches_no_run(
    daemon_project: tuple[DaemonProject, dg.DagsterInstance],  # noqa: F811 (the fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 40 item 5, with the real `dagster-daemon` and `automation_sensor` running:
    24 hourly skips (the skip's clock injected, each one consulting the instance)
    launch no run, and every materialisation of the publish assets is a run's own."""
    daemon, instance = daemon_project
    monkeypatch.setenv("DAGSTER_HOME", str(daemon.home))
    monkeypatch.setenv("BRAIN_CONFIG", str(daemon.project.config_path))
    assert main(["materialize"]) == 0  # the one real run: published, recorded
    cfg = load_config()
    runs = {r.dagster_run.run_id for r in instance.get_run_records()}
    daemon.dagster("sensor", "start", "automation_sensor")
    daemon.start_daemon()
    _wait_for_automation_ticks(daemon, 1)  # automation is live before the first skip

    start = time.time()
    for hour in range(1, 25):
        assert _nothing_to_do(cfg, now=start + hour * (CONSULT_AFTER_SECONDS + 1))
    # Automation has looked at what the day left, twice over, before we judge.
    _wait_for_automation_ticks(daemon, _automation_ticks(daemon) + 2)
    daemon.stop_daemon()

    assert {r.dagster_run.run_id for r in instance.get_run_records()} == runs
    for name in ("published_local", "published_s3"):
        records = instance.fetch_materializations(dg.AssetKey(name), limit=1000).records
        assert {r.run_id for r in records} <= runs, name  # no runless entry (run_id "")
    assert instance.fetch_materializations(dg.AssetKey("published_local"), limit=10).records
