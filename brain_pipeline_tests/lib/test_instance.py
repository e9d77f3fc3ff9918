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
    GEMINI_POOL,
    HOST_TAG,
    INSTANCE_YAML,
    PID_TAG,
    ensure_instance_home,
    ensure_pool_limit,
    instance_lock_path,
    open_instance,
    reap_dead_runs,
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


# ---- dagster.yaml: ours only in a folder we create; the user's never written ---------------

LEGACY_YAML = """\
# my team's instance: keep the queue small
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    max_concurrent_runs: 2   # the laptop has two cores
"""


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every top-level file of `folder`: bytes and mtime."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()}


def test_a_missing_folder_is_created_with_our_yaml_and_no_instance_wide_limit(
    home: Path, tmp_path: Path
) -> None:
    from brain_pipeline.lib.dagster_private import pool_limit

    ensure_instance_home(home)
    assert (home / "dagster.yaml").read_text() == INSTANCE_YAML
    assert [p.name for p in home.iterdir()] == ["dagster.yaml"]  # nothing half-made beside
    assert [p.name for p in tmp_path.iterdir()] == ["dagster_home"]
    instance = open_instance(tmp_path / "build")
    config = instance.get_concurrency_config()
    assert config.pool_config.default_pool_limit is None  # other pools: unlimited
    assert config.run_queue_config is not None
    limits = [entry["key"] for entry in config.run_queue_config.tag_concurrency_limits]
    assert limits == [BUILD_DIR_TAG]  # our runs' tag only; no dagster/code_location limit
    settings = yaml.safe_load((home / "dagster.yaml").read_text())
    assert settings["nux"] == {"enabled": False} and settings["telemetry"] == {"enabled": False}
    assert settings["run_monitoring"]["enabled"] is True  # frees finished runs' pool slots
    # The pool gets its one slot, for that pool only, in the instance's storage.
    assert pool_limit(instance, GEMINI_POOL) is None
    said = ensure_pool_limit(instance)
    assert said is not None and "dagster instance concurrency set gemini_embedding" in said
    assert pool_limit(instance, GEMINI_POOL) == 1
    assert pool_limit(instance, "another_locations_pool") is None
    assert ensure_pool_limit(instance) is None  # once


@pytest.mark.parametrize(
    "text",
    [
        LEGACY_YAML,
        OLD_YAML,
        OLD_YAML + "# mine\nconcurrency:\n  pools:\n    default_limit: 4\n",
        "",
    ],
    ids=["legacy-run-coordinator", "older-brain-pipeline", "user-pool-default", "empty"],
)
def test_an_existing_dagster_yaml_is_never_written(home: Path, tmp_path: Path, text: str) -> None:
    home.mkdir()
    (home / "dagster.yaml").write_text(text)
    os.utime(home / "dagster.yaml", ns=(10**9, 10**9))
    before = _snapshot(home)
    ensure_instance_home(home)
    instance = open_instance(tmp_path / "build", cli_run=True)
    ensure_pool_limit(instance)
    instance.dispose()
    open_instance(tmp_path / "build").dispose()
    assert _snapshot(home) == before  # same bytes, same mtime, no file added


def test_a_legacy_run_coordinator_keeps_its_queue_and_a_user_pool_default_wins(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from brain_pipeline.lib.dagster_private import pool_limit, set_pool_limit

    home.mkdir()
    (home / "dagster.yaml").write_text(LEGACY_YAML)
    ensure_instance_home(home)
    instance = open_instance(tmp_path / "build")
    queue = instance.get_concurrency_config().run_queue_config
    assert queue is not None and queue.max_concurrent_runs == 2
    assert ensure_pool_limit(instance) is not None and pool_limit(instance, GEMINI_POOL) == 1
    set_pool_limit(instance, GEMINI_POOL, 3)  # the user's own choice, later
    assert ensure_pool_limit(instance) is None and pool_limit(instance, GEMINI_POOL) == 3
    other = tmp_path / "other_home"
    other.mkdir()
    (other / "dagster.yaml").write_text("concurrency:\n  pools:\n    default_limit: 4\n")
    monkeypatch.setenv("DAGSTER_HOME", str(other))
    with_default = open_instance(tmp_path / "build")
    assert ensure_pool_limit(with_default) is None  # the user's default applies to ours
    assert pool_limit(with_default, GEMINI_POOL) == 4


def test_command_line_runs_share_the_storages_without_compute_log_capture(
    home: Path, tmp_path: Path
) -> None:
    """The CLI's instance is dagster.yaml plus the no-capture compute log manager, as an
    override: the same runs and events (a run made through one is seen through the
    other), no log files, and no file written into DAGSTER_HOME for it."""
    from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager

    home.mkdir()
    (home / "dagster.yaml").write_text(
        OLD_YAML + "retention:\n  schedule:\n    purge_after_days: 7\n"
    )
    ensure_instance_home(home)
    cli = open_instance(tmp_path / "build", cli_run=True)
    ui = open_instance(tmp_path / "build")
    try:
        assert isinstance(cli.compute_log_manager, NoOpComputeLogManager)
        assert not isinstance(ui.compute_log_manager, NoOpComputeLogManager)
        assert cli.get_settings("retention") == ui.get_settings("retention")  # dagster.yaml read
        assert cli.get_settings("telemetry") == {"enabled": False}
        run = cli.add_run(dg.DagsterRun(job_name="__ASSET_JOB", run_id=str(uuid.uuid4())))
        assert ui.get_run_by_id(run.run_id) is not None
    finally:
        cli.dispose()
        ui.dispose()
    assert sorted(p.name for p in home.iterdir() if p.is_file()) == ["dagster.yaml"]


def test_the_instance_lock_lives_with_the_build_directory(home: Path, tmp_path: Path) -> None:
    from brain_pipeline.state.layout import StateLayout

    ensure_instance_home(home)
    open_instance(tmp_path / "build").dispose()
    lock = instance_lock_path(tmp_path / "build")
    assert lock.is_file() and lock.parent == StateLayout.of(tmp_path / "build").locks_dir
    assert not list(home.glob("*.lock"))


# ---- race-free creation -----------------------------------------------------------------


def test_runs_started_at_once_on_a_fresh_instance_never_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / f"home{attempt}"))
        runs = dg.DagsterInstance.get().get_runs()
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
    child = _child(home, mode)
    children.append(child)
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.startswith("claimed "), child.stderr.read() if child.stderr else line
    run_id = line.split()[1]
    instance = open_instance(home.parent / "build")
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
    instance = open_instance(home.parent / "build")
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
