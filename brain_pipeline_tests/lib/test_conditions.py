"""`triggered_by` on `knowledge_chunks`, read back from a real instance.

Each materialisation records why its run exists: a person, the nightly schedule, the
observation sensor, or automation with the labelled conditions that were true
(`lib.conditions.run_trigger`, worded by `steps.trigger`). The by-hand case runs in
process; the other three are launched by a real `dagster-daemon` on a temporary
DAGSTER_HOME, one instigator at a time, so which one started each run is known from the
phase it appeared in and the tags Dagster itself puts on the run. An automation run is
done when the agent can read the edit: the same run rebuilds and publishes it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from brain_pipeline.definitions import build_definitions
from brain_pipeline.lib.conditions import UNCONSUMED_LABEL
from brain_pipeline.lib.instance import INSTANCE_YAML
from brain_pipeline.publishing.local import live_manifest
from brain_pipeline.steps.trigger import AUTOMATION_PREFIX, BY_HAND, TRIGGERED_BY
from brain_pipeline_tests.conftest import LEAKY_ENV
from brain_pipeline_tests.defs.conftest import (
    Project,
    edit_corpus,
    make_project,
    tiny_fixture,
    write_tiny_corpus,
)

REPO = Path(__file__).resolve().parents[2]
CHUNKS = dg.AssetKey("knowledge_chunks")
PHASE_TIMEOUT = 300.0  # a loaded 2-core machine: code location loads and runs are slow
DAEMON_STOP_GRACE = 20.0


def _triggers(instance: dg.DagsterInstance) -> dict[str, str]:
    """run id -> `triggered_by` of every `knowledge_chunks` materialisation (KeyError when
    a materialisation does not record it)."""
    records = instance.fetch_materializations(CHUNKS, limit=1000).records
    out = {}
    for record in records:
        materialization = record.asset_materialization
        assert materialization is not None
        out[record.run_id] = str(materialization.metadata[TRIGGERED_BY].value)
    return out


def _tiny_project(root: Path) -> Project:
    corpus = root / "corpus"
    return make_project(root, corpus, tiny_fixture(write_tiny_corpus(corpus)))


def test_a_run_launched_by_hand_says_so(tmp_path: Path) -> None:
    project = _tiny_project(tmp_path)
    assert project.materialize().success
    assert list(_triggers(project.instance).values()) == [BY_HAND]


# --- the daemon -----------------------------------------------------------------------


class DaemonProject:
    """A tiny project on its own DAGSTER_HOME, a workspace for it, and a daemon to start."""

    def __init__(self, project: Project, home: Path) -> None:
        self.project = project
        self.home = home
        self.workspace = project.root / "workspace.yaml"
        self.log_path = project.root / "daemon.log"
        self.daemon: subprocess.Popen[bytes] | None = None
        entry = {
            "python_module": {
                "module_name": "brain_pipeline.definitions",
                "working_directory": str(REPO),
                "location_name": "brain_pipeline",
            }
        }
        self.workspace.write_text(yaml.safe_dump({"load_from": [entry]}), encoding="utf-8")
        self.env = {k: v for k, v in os.environ.items() if k not in LEAKY_ENV}
        self.env.update(
            DAGSTER_HOME=str(home),
            BRAIN_CONFIG=str(project.config_path),
            PYTHONPATH=os.pathsep.join([str(REPO), self.env.get("PYTHONPATH", "")]),
            PYTHONUNBUFFERED="1",
            FRESHNESS_DAEMON_INTERVAL_SECONDS="5",  # Dagster's own knob (default 30)
        )

    def dagster(self, *args: str) -> None:
        """One `dagster` CLI command against this workspace (start or stop an instigator)."""
        command = [sys.executable, "-m", "dagster", *args, "-w", str(self.workspace)]
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, f"{' '.join(args)}: {done.stdout}\n{done.stderr}"

    def start_daemon(self) -> None:
        log = self.log_path.open("ab")
        self.daemon = subprocess.Popen(
            ["dagster-daemon", "run", "-w", str(self.workspace)],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: its run workers stop with it
        )

    def stop_daemon(self) -> None:
        if self.daemon is None or self.daemon.poll() is not None:
            return
        os.killpg(self.daemon.pid, signal.SIGTERM)
        try:
            self.daemon.wait(DAEMON_STOP_GRACE)
        except subprocess.TimeoutExpired:
            os.killpg(self.daemon.pid, signal.SIGKILL)
            self.daemon.wait()

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no daemon output)"
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def wait_for_new_chunks(
        self,
        instance: dg.DagsterInstance,
        known: set[str],
        what: str,
        launched_by: Callable[[Mapping[str, str]], bool],
    ) -> dict[str, str]:
        """The `knowledge_chunks` materialisations beyond `known` (run ids) whose runs
        the instigator under test launched (as Dagster's own tags on the run say; a run
        an earlier phase's instigator launched just before it was stopped is not this
        phase's), once those runs have finished."""
        deadline = time.monotonic() + PHASE_TIMEOUT
        while time.monotonic() < deadline:
            if self.daemon is not None and self.daemon.poll() is not None:
                pytest.fail(f"the daemon exited during {what}:\n{self.log_tail()}")
            new = {
                run_id: trigger
                for run_id, trigger in _triggers(instance).items()
                if run_id not in known and launched_by(_tags(instance, run_id))
            }
            if new and all(_finished(instance, run_id) for run_id in new):
                return new
            time.sleep(1.0)
        pytest.fail(f"no knowledge_chunks materialisation by {what}:\n{self.log_tail()}")


def _tags(instance: dg.DagsterInstance, run_id: str) -> Mapping[str, str]:
    run = instance.get_run_by_id(run_id)
    return run.tags if run is not None else {}


def _finished(instance: dg.DagsterInstance, run_id: str) -> bool:
    run = instance.get_run_by_id(run_id)
    return run is not None and run.is_finished


@pytest.fixture
def daemon_project(tmp_path: Path) -> Iterator[tuple[DaemonProject, dg.DagsterInstance]]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(INSTANCE_YAML, encoding="utf-8")
    project = _tiny_project(tmp_path)
    # Every instigator stopped by default; the test starts one at a time. The cron fires
    # every minute while the schedule is started.
    project.settings["schedule"] = {
        "cron": "* * * * *",
        "enabled": False,
        "sensor_enabled": False,
        "sensor_min_interval_seconds": 5,
    }
    project.write_config()
    daemon = DaemonProject(project, home)
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        yield daemon, instance
    finally:
        daemon.stop_daemon()
        instance.dispose()


def _observe_in_process(daemon: DaemonProject, instance: dg.DagsterInstance) -> None:
    """Tick the observation sensor here and record its observations as the daemon would,
    without its run request: the new corpus version is then automation's to act on."""
    defs = build_definitions(str(daemon.project.config_path))
    sensor = defs.resolve_sensor_def("corpus_observation_sensor")
    result = sensor(dg.build_sensor_context(instance=instance, definitions=defs))
    assert isinstance(result, dg.SensorResult) and result.asset_events
    for event in result.asset_events:
        assert isinstance(event, dg.AssetObservation)
        instance.report_runless_asset_event(event)


def _freshness(daemon: DaemonProject, instance: dg.DagsterInstance, asset: str) -> str:
    """PASS once the daemon has recorded `asset` as fresh (it may have recorded it FAIL
    before the first publication); else the last state it recorded."""
    key = dg.AssetKey(asset)
    deadline = time.monotonic() + PHASE_TIMEOUT
    state = "none recorded"
    while time.monotonic() < deadline:
        record = instance.get_freshness_state_records([key]).get(key)
        if record is not None:
            state = str(record.freshness_state.value)
            if state == "PASS":
                return state
        time.sleep(1.0)
    return f"{state} (daemon log: {daemon.log_tail(10)})"


def _published_by(daemon: DaemonProject, text: str, run_id: str) -> str:
    """The run named by the live manifest once `text` is in the published store (polled,
    bounded): an edit is done when the agent can read it, not when it is rebuilt."""
    root = daemon.project.publish_root
    deadline = time.monotonic() + PHASE_TIMEOUT
    while time.monotonic() < deadline:
        store = daemon.project.published() / "knowledge-store.json"
        manifest = live_manifest(root)
        if store.exists() and text in store.read_text(encoding="utf-8") and manifest:
            return str(manifest.run_id)
        if daemon.daemon is not None and daemon.daemon.poll() is not None:
            pytest.fail(f"the daemon exited before publishing:\n{daemon.log_tail()}")
        time.sleep(1.0)
    pytest.fail(
        f"the edit was never published (run {run_id} rebuilt it):\n{daemon.log_tail()}"
    )


def _phase(
    daemon: DaemonProject,
    instance: dg.DagsterInstance,
    instigator: list[str],
    launched_by: Callable[[Mapping[str, str]], bool],
    before: Callable[[], Any] | None = None,
) -> dict[str, str]:
    """Start one instigator (`dagster schedule|sensor start NAME`), do `before`, wait for
    the chunks it rebuilds, stop it."""
    kind, name = instigator
    known = set(_triggers(instance))
    daemon.dagster(kind, "start", name)
    if before is not None:
        before()
    new = daemon.wait_for_new_chunks(instance, known, name, launched_by)
    daemon.dagster(kind, "stop", name)
    return new


def test_schedule_sensor_and_automation_runs_say_what_started_them(
    daemon_project: tuple[DaemonProject, dg.DagsterInstance],
) -> None:
    daemon, instance = daemon_project
    project = daemon.project
    daemon.start_daemon()

    by_schedule = _phase(
        daemon,
        instance,
        ["schedule", "reingest_schedule"],
        lambda tags: tags.get("dagster/schedule_name") == "reingest_schedule",
    )
    assert set(by_schedule.values()) == {"schedule reingest_schedule"}
    # The daemon evaluates the publication's freshness policy by itself, between runs.
    assert _freshness(daemon, instance, "published_local") == "PASS"

    automated_edit = "Automation rebuilds and publishes what an observed edit changed."

    def observed_edit() -> None:
        edit_corpus(project, automated_edit)
        _observe_in_process(daemon, instance)

    by_automation = _phase(
        daemon,
        instance,
        ["sensor", "automation_sensor"],
        lambda tags: tags.get("dagster/from_automation_condition") == "true",
        before=observed_edit,
    )
    (automation,) = by_automation.values()
    assert automation.startswith(AUTOMATION_PREFIX)
    assert UNCONSUMED_LABEL in automation.removeprefix(AUTOMATION_PREFIX).split(", ")
    # The run that rebuilt the edit published it too (its evaluation ran in that run).
    (automation_run,) = by_automation
    assert _published_by(daemon, automated_edit, automation_run) == automation_run

    # One launcher: the observation sensor records the edit, automation runs it, once.
    sensed_edit = "The sensor observes; automation rebuilds and publishes."
    daemon.dagster("sensor", "start", "corpus_observation_sensor")
    try:
        by_observation = _phase(
            daemon,
            instance,
            ["sensor", "automation_sensor"],
            lambda tags: True,
            before=lambda: edit_corpus(project, sensed_edit),
        )
    finally:
        daemon.dagster("sensor", "stop", "corpus_observation_sensor")
    (observed,) = by_observation.values()  # one run rebuilt the edit
    assert observed.startswith(AUTOMATION_PREFIX)
    (run_id,) = by_observation
    assert _tags(instance, run_id).get("dagster/from_automation_condition") == "true"
    assert _published_by(daemon, sensed_edit, run_id) == run_id
