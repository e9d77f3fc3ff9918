"""The shared instance: its dagster.yaml, race-free creation, pools and dead runs.

Everything here runs on a real SQLite instance in a temporary DAGSTER_HOME (pool slots
do not exist on an ephemeral instance), with runs in child processes where a run has to
die or two have to start at once.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml

from brain_pipeline.lib.instance import (
    BUILD_DIR_TAG,
    CLI_RUN_YAML,
    GEMINI_POOL,
    HOST_TAG,
    INSTANCE_YAML,
    PID_TAG,
    cli_run_instance_yaml,
    ensure_instance_home,
    open_instance,
    reap_dead_runs,
    upgraded_instance_yaml,
)

REPO = Path(__file__).resolve().parents[2]
OLD_YAML = """\
# Created by brain-pipeline on first use.
telemetry:
  enabled: false
nux:
  enabled: false
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh instance folder; DAGSTER_HOME is restored after the test."""
    path = tmp_path / "dagster_home"
    monkeypatch.setenv("DAGSTER_HOME", str(path))
    return path


def _child(home: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "brain_pipeline_tests.locks.pool_child", str(home), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "DAGSTER_HOME": str(home)},
    )


# ---- dagster.yaml ------------------------------------------------------------------------


def test_a_fresh_instance_gets_queue_limits_pool_limit_and_monitoring(home: Path) -> None:
    ensure_instance_home(home)
    assert (home / "dagster.yaml").read_text() == INSTANCE_YAML
    config = open_instance().get_concurrency_config()
    assert config.pool_config.default_pool_limit == 1
    assert config.pool_config.pool_granularity is not None
    assert config.pool_config.pool_granularity.value == "op"
    assert config.run_queue_config is not None
    limits = {entry["key"]: entry for entry in config.run_queue_config.tag_concurrency_limits}
    assert limits[BUILD_DIR_TAG] == {
        "key": BUILD_DIR_TAG,
        "value": {"applyLimitPerUniqueValue": True},
        "limit": 1,
    }
    assert limits["dagster/code_location"]["limit"] == 1
    settings = yaml.safe_load((home / "dagster.yaml").read_text())
    assert settings["nux"] == {"enabled": False} and settings["telemetry"] == {"enabled": False}
    assert settings["run_monitoring"]["free_slots_after_run_end_seconds"] == 60


def test_command_line_runs_share_the_storages_without_compute_log_capture(home: Path) -> None:
    """`CLI_RUN_YAML` is dagster.yaml plus the no-capture compute log manager: the same
    runs and events (a run made through one is seen through the other), no log files."""
    from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager

    ensure_instance_home(home)
    cli, ui = open_instance(cli_run=True), open_instance()
    try:
        assert isinstance(cli.compute_log_manager, NoOpComputeLogManager)
        assert not isinstance(ui.compute_log_manager, NoOpComputeLogManager)
        run = cli.add_run(dg.DagsterRun(job_name="__ASSET_JOB", run_id=str(uuid.uuid4())))
        assert ui.get_run_by_id(run.run_id) is not None
    finally:
        cli.dispose()
        ui.dispose()


def test_the_command_line_settings_follow_an_edit_of_dagster_yaml(home: Path) -> None:
    ensure_instance_home(home)
    settings = home / "dagster.yaml"
    edited = yaml.safe_load(settings.read_text())
    edited["telemetry"] = {"enabled": True}
    settings.write_text(yaml.safe_dump(edited))
    ensure_instance_home(home)  # what every command that launches a run does first
    cli = yaml.safe_load((home / CLI_RUN_YAML).read_text())
    assert cli["telemetry"] == {"enabled": True}
    assert cli["compute_logs"]["class"] == "NoOpComputeLogManager"
    assert cli["concurrency"] == edited["concurrency"]
    # A dagster.yaml that is not a mapping: no second file, Dagster reports the first.
    assert cli_run_instance_yaml("- a list\n") is None
    assert cli_run_instance_yaml("key: [unclosed\n") is None


def test_an_older_file_is_upgraded_in_place_keeping_user_keys_and_comments(
    home: Path,
) -> None:
    home.mkdir()
    user = OLD_YAML + "# my own note\nretention:\n  schedule:\n    purge_after_days: 7\n"
    (home / "dagster.yaml").write_text(user)
    ensure_instance_home(home)
    text = (home / "dagster.yaml").read_text()
    assert text.startswith(user)  # appended, nothing of the user's rewritten
    settings = yaml.safe_load(text)
    assert settings["retention"] == {"schedule": {"purge_after_days": 7}}
    assert settings["concurrency"]["pools"] == {"default_limit": 1, "granularity": "op"}
    # Up to date now: a second start does not touch the file (an old mtime is kept, so
    # this does not depend on the filesystem's timestamp granularity).
    os.utime(home / "dagster.yaml", ns=(10**9, 10**9))
    ensure_instance_home(home)
    assert (home / "dagster.yaml").stat().st_mtime_ns == 10**9
    assert open_instance().get_concurrency_config().pool_config.default_pool_limit == 1


def test_user_concurrency_choices_win_and_missing_leaves_are_added() -> None:
    text = OLD_YAML + (
        "concurrency:\n  runs:\n    max_concurrent_runs: 3\n  pools:\n    default_limit: 4\n"
    )
    upgraded = upgraded_instance_yaml(text)
    assert upgraded is not None
    settings = yaml.safe_load(upgraded)
    assert settings["concurrency"]["runs"]["max_concurrent_runs"] == 3
    assert settings["concurrency"]["pools"] == {"default_limit": 4, "granularity": "op"}
    keys = [e["key"] for e in settings["concurrency"]["runs"]["tag_concurrency_limits"]]
    assert keys == [BUILD_DIR_TAG, "dagster/code_location"]
    assert settings["nux"] == {"enabled": False}
    assert upgraded_instance_yaml(upgraded) is None


def test_a_legacy_run_queue_section_receives_the_limits_instead(home: Path) -> None:
    home.mkdir()
    (home / "dagster.yaml").write_text(OLD_YAML + "run_queue:\n  max_concurrent_runs: 5\n")
    ensure_instance_home(home)
    settings = yaml.safe_load((home / "dagster.yaml").read_text())
    # Dagster refuses `concurrency.runs`/`pools` beside `run_queue`: the legacy key instead.
    assert settings["concurrency"] == {"default_op_concurrency_limit": 1}
    assert settings["run_queue"]["max_concurrent_runs"] == 5
    queue = open_instance().get_concurrency_config().run_queue_config
    assert queue is not None and queue.max_concurrent_runs == 5
    assert {e["key"] for e in queue.tag_concurrency_limits} >= {BUILD_DIR_TAG}
    assert open_instance().get_concurrency_config().pool_config.default_pool_limit == 1


# ---- race-free creation -----------------------------------------------------------------


def test_runs_started_at_once_on_a_fresh_instance_never_crash(tmp_path: Path) -> None:
    # Two runs forked from one process and released by one pipe, five times over. The
    # same harness with `--unlocked` (no instance lock) crashed 2 of 12 runs with
    # `sqlite3.OperationalError: table alembic_version already exists`.
    proc = subprocess.run(
        [sys.executable, "-m", "brain_pipeline_tests.locks.race_child", str(tmp_path), "5"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"runs": [0] * 10, "errors": []}
    for attempt in range(5):
        runs = dg.DagsterInstance.from_config(str(tmp_path / f"home{attempt}")).get_runs()
        assert [r.status for r in runs] == [dg.DagsterRunStatus.SUCCESS] * 2


# ---- pools and dead runs ----------------------------------------------------------------


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


@pytest.mark.parametrize("mode", ["tagged", "untagged"])
def test_a_run_killed_with_sigkill_gives_its_pool_slot_back(
    home: Path, mode: str, children: list[subprocess.Popen[str]]
) -> None:
    ensure_instance_home(home)
    child = _child(home, mode)
    children.append(child)
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.startswith("claimed "), child.stderr.read() if child.stderr else line
    run_id = line.split()[1]
    instance = open_instance()
    storage = instance.event_log_storage
    info = storage.get_concurrency_info(GEMINI_POOL)
    assert info.slot_count == 1 and info.claimed_slots[0].run_id == run_id
    # The pool's only slot is taken: another run's step is refused (then withdrawn).
    assert not storage.claim_concurrency_slot(GEMINI_POOL, "other-run", "step", 0).is_claimed
    storage.free_concurrency_slot_for_step("other-run", "step")
    # A live run is left alone.
    assert reap_dead_runs(instance) == []
    assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTED  # type: ignore[union-attr]

    child.send_signal(signal.SIGKILL)
    child.wait()
    assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTED  # type: ignore[union-attr]
    assert storage.get_concurrency_info(GEMINI_POOL).claimed_slots  # held for ever, so far

    reaped = reap_dead_runs(instance)
    assert [(r.run_id, r.pid, r.slots_freed) for r in reaped] == [(run_id, child.pid, True)]
    assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE  # type: ignore[union-attr]
    assert not storage.get_concurrency_info(GEMINI_POOL).claimed_slots
    assert reap_dead_runs(instance) == []  # once only

    @dg.asset(pool=GEMINI_POOL)
    def next_embedding() -> int:
        return 2

    # The next run gets the slot (it would wait for ever for a dead run's slot).
    assert dg.materialize([next_embedding], instance=instance).success


def _stuck_run(instance: dg.DagsterInstance, tags: dict[str, str]) -> str:
    run_id = str(uuid.uuid4())
    instance.add_run(
        dg.DagsterRun(job_name="j", run_id=run_id, status=dg.DagsterRunStatus.STARTED, tags=tags)
    )
    return run_id


def test_runs_of_other_hosts_live_processes_and_reused_pids_are_judged_right(
    home: Path,
) -> None:
    ensure_instance_home(home)
    instance = open_instance()
    here = socket.gethostname()
    elsewhere = _stuck_run(instance, {PID_TAG: "4242", HOST_TAG: "another-host"})
    alive = _stuck_run(instance, {PID_TAG: "4343", HOST_TAG: here})
    reused = _stuck_run(instance, {PID_TAG: "4444", HOST_TAG: here})
    created = {
        r.dagster_run.run_id: r.create_timestamp.timestamp() for r in instance.get_run_records()
    }
    started = {4242: None, 4343: created[alive] - 60.0, 4444: created[reused] + 3600.0}
    reaped = reap_dead_runs(instance, host=here, started_at=started.__getitem__)
    assert [r.run_id for r in reaped] == [reused]  # a younger process owns that pid now

    def status(run_id: str) -> dg.DagsterRunStatus:
        run = instance.get_run_by_id(run_id)
        assert run is not None
        return run.status

    assert status(elsewhere) == dg.DagsterRunStatus.STARTED  # cannot judge another host
    assert status(alive) == dg.DagsterRunStatus.STARTED
    assert status(reused) == dg.DagsterRunStatus.FAILURE


