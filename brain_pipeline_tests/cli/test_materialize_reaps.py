"""The docs: runs a killed process left "in progress" are marked failed (and their pool
slots freed, and their failure notified when no daemon does) when `materialize` or `ui`
next starts. The reaping rule itself is tested in
locks/test_instance.py; this pins that `materialize` applies it, on a real instance."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import dagster as dg
import pytest

from brain_pipeline.cli import main
from brain_pipeline.lib.instance import HOST_TAG, PID_TAG, ensure_instance_home
from brain_pipeline_tests.defs.conftest import make_project, tiny_fixture, write_tiny_corpus
from brain_pipeline_tests.peers.notify_peers import WebhookServer


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as opened:
        yield opened


def test_materialize_marks_a_dead_processs_run_failed_before_it_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    stack: ExitStack,
) -> None:
    """...and, with no daemon to do it, sends the killed run's one notification."""
    corpus = tmp_path / "corpus"
    project = make_project(tmp_path, corpus, tiny_fixture(write_tiny_corpus(corpus)))
    hook = stack.enter_context(WebhookServer.start())
    project.settings["notify"] = {"webhook_url": f"{hook.url}/hooks/reaped"}
    project.write_config()
    home = tmp_path / "dagster-home"
    ensure_instance_home(home)
    monkeypatch.setenv("BRAIN_CONFIG", str(project.config_path))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that ran and exited: the "run" it owned is dead
    stuck = str(uuid.uuid4())
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        instance.add_run(
            dg.DagsterRun(
                job_name="__ASSET_JOB",
                run_id=stuck,
                status=dg.DagsterRunStatus.STARTED,
                tags={PID_TAG: str(gone.pid), HOST_TAG: socket.gethostname()},
            )
        )
        assert main(["materialize", "--select", "group:ingest"]) == 0
        _, err = capfd.readouterr()
        assert stuck in err and "marked it failed" in err
        run = instance.get_run_by_id(stuck)
        assert run is not None and run.status == dg.DagsterRunStatus.FAILURE
        assert [(b["event"], b["run_id"]) for b in hook.bodies] == [("failed", stuck)]
    finally:
        instance.dispose()
