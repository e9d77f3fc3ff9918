"""The notification sensors on a real instance, with a real HTTP and a real SMTP peer.

Five runs of the tiny project (a clean publication, a blocked publish, a failure before
publishing, a WARN regression published, a recovery) are evaluated by the two
run-status sensors the way the daemon does (their own cursors, tick after tick); each
bad or recovered run's one message reaches the webhook and the mailbox exactly once.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from brain_pipeline.config import load_config
from brain_pipeline.definitions import build_definitions
from brain_pipeline.defs.notify import build_notification_sensors, notify_finished_run
from brain_pipeline.lib.dagster_private import run_events
from brain_pipeline.publishing.run_alerts import read_delivery
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Ledger, sqlite_url
from brain_pipeline_tests.defs.conftest import Project, edit_corpus
from brain_pipeline_tests.peers.notify_peers import SmtpServer, WebhookServer, free_port

SENSORS = ("notify_on_failure", "notify_on_success")
SMTP_USER, SMTP_PASSWORD = "pipeline-bot", "smtp-Pa55word-never-shown"
HOOK_TOKEN = "T0KEN-hook-secret-xyz"


def _ledger(build: Path) -> Ledger:
    """The build directory's ledger, where the delivery records are."""
    return Ledger(sqlite_url(StateLayout.of(build).ledger))


class Ticker:
    """Evaluates both sensors with their own cursors, as the sensor daemon does."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.cursors: dict[str, str | None] = dict.fromkeys(SENSORS)
        self.skips: list[str] = []

    def tick(self, rounds: int = 4) -> None:
        defs = build_definitions(str(self.project.config_path))
        for _ in range(rounds):
            for name in SENSORS:
                sensor = defs.resolve_sensor_def(name)
                context = dg.build_sensor_context(
                    instance=self.project.instance,
                    cursor=self.cursors[name],
                    definitions=defs,
                    sensor_name=name,
                )
                data = sensor.evaluate_tick(context)
                self.cursors[name] = data.cursor or self.cursors[name]
                if data.skip_message:
                    self.skips.append(data.skip_message)


def _bury_gliders(project: Project) -> None:
    guide = project.corpus / "beta" / "guide.md"
    lines = [f"Patterns travel diagonally; diagonally travel patterns, {i}." for i in range(10)]
    guide.write_text(guide.read_text() + "\n" + "\n\n".join(lines) + "\n", encoding="utf-8")


def _configure(project: Project, webhook: str, smtp_port: int, **more: Any) -> None:
    project.settings["notify"] = {
        "webhook_url": webhook,
        "ui_base_url": "http://dagster.example:3000",
        "max_attempts": 2,
        "timeout_seconds": 2,
        "email": {
            "host": "127.0.0.1",
            "port": smtp_port,
            "starttls": False,
            "sender": "pipeline@example.org",
            "recipients": ["ops@example.org"],
            "username_env": "BRAIN_SMTP_USER",
            "password_env": "BRAIN_SMTP_PASSWORD",
        },
    }
    project.write_config(**more)


def test_each_event_reaches_both_channels_exactly_once(
    tiny_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRAIN_SMTP_USER", SMTP_USER)
    monkeypatch.setenv("BRAIN_SMTP_PASSWORD", SMTP_PASSWORD)
    with WebhookServer.start() as hook, SmtpServer.start(SMTP_USER, SMTP_PASSWORD) as smtp:
        _configure(tiny_project, f"{hook.url}/hooks/{HOOK_TOKEN}", smtp.port)
        ticker = Ticker(tiny_project)
        ticker.tick(1)  # the sensors start: their cursors begin at the newest event

        runs: list[str] = []

        def run(expect: bool, **config: Any) -> None:
            if config:
                tiny_project.write_config(**config)
            outcome = tiny_project.materialize()
            assert outcome.success is expect
            runs.append(outcome.run_id)
            ticker.tick()

        run(True)  # 1: first publication, nothing to report
        assert hook.bodies == [] and smtp.messages == []
        _bury_gliders(tiny_project)
        run(False)  # 2: blocked by the regression
        corpus = tiny_project.corpus
        corpus.rename(corpus.with_name("moved"))
        run(False)  # 3: fails before publishing (no corpus)
        corpus.with_name("moved").rename(corpus)
        tiny_project.settings["evaluation"]["on_regression"] = "warn"
        run(True, **{"evaluation.on_regression": "warn"})  # 4: the regression goes out
        edit_corpus(tiny_project)
        run(True)  # 5: a clean publication after the WARN one: recovered
        ticker.tick()  # more ticks send nothing again

    kinds = [body["event"] for body in hook.bodies]
    assert kinds == ["blocked", "failed", "regression", "recovered"]
    assert [body["run_id"] for body in hook.bodies] == runs[1:]
    assert all(p == f"/hooks/{HOOK_TOKEN}" for p in hook.paths)
    blocked, failed, warned, recovered = hook.bodies
    assert blocked["cause"].startswith("embeddings:retrieval_eval: retrieval evaluation FAILED")
    assert "'patterns that travel diagonally' (beta) became a miss" in blocked["text"]
    assert "knowledge_chunks" in failed["cause"] or "corpus" in failed["cause"]
    assert "became a miss" in warned["text"] and "IS live" in warned["text"]
    assert "retrieval evaluation passed with warnings" in warned["cause"]  # its headline
    assert "RECOVERED" in recovered["text"]
    for body in hook.bodies:
        assert f"http://dagster.example:3000/runs/{body['run_id']}" in body["text"]

    subjects = [m["Subject"] for m in smtp.messages]
    assert len(subjects) == 4 and "BLOCKED" in subjects[0] and "RECOVERED" in subjects[3]
    assert smtp.logins == [SMTP_USER] * 4
    bodies = [m.get_payload(decode=True).decode("utf-8") for m in smtp.messages]
    assert [b.replace("\r\n", "\n").strip() for b in bodies] == [
        b["text"].strip() for b in hook.bodies
    ]

    shown = json.dumps(hook.bodies) + "".join(map(str, bodies)) + "".join(ticker.skips)
    assert SMTP_PASSWORD not in shown and HOOK_TOKEN not in "".join(ticker.skips)


def test_a_dead_webhook_changes_no_run_and_the_tick_says_so(
    tiny_project: Project, tmp_path: Path
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/hooks/{HOOK_TOKEN}"
    tiny_project.settings["notify"] = {"webhook_url": dead, "max_attempts": 2}
    tiny_project.write_config()
    ticker = Ticker(tiny_project)
    ticker.tick(1)
    assert tiny_project.materialize().success
    _bury_gliders(tiny_project)
    outcome = tiny_project.materialize()
    assert not outcome.success
    ticker.tick()
    run = tiny_project.instance.get_run_by_id(outcome.run_id)
    assert run is not None and run.status == dg.DagsterRunStatus.FAILURE
    said = [s for s in ticker.skips if outcome.run_id[:8] in s]
    assert len(said) == 1
    assert "webhook http://127.0.0.1" in said[0] and "NOT sent after 2 attempt(s)" in said[0]
    assert HOOK_TOKEN not in said[0]
    # The next run is not held up either: it runs and publishes as before.
    tiny_project.write_config(**{"evaluation.on_regression": "warn"})
    assert tiny_project.materialize().success


def test_the_sensors_run_by_default_only_when_a_channel_is_configured(
    tiny_project: Project,
) -> None:
    def statuses() -> set[dg.DefaultSensorStatus]:
        defs = build_definitions(str(tiny_project.config_path))
        return {defs.resolve_sensor_def(name).default_status for name in SENSORS}

    assert statuses() == {dg.DefaultSensorStatus.STOPPED}
    tiny_project.settings["notify"] = {"webhook_url": "http://127.0.0.1:9/hook"}
    tiny_project.write_config()
    assert statuses() == {dg.DefaultSensorStatus.RUNNING}


def test_the_command_notifies_once_even_when_a_daemon_just_beat_and_the_sensors_add_nothing(
    tiny_project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One path for every run: `brain-pipeline materialize` sends its run's one message
    itself, even when a sensor daemon's heartbeat is seconds old (a daemon that has just
    stopped would never send it); the sensors, ticking later, find the run claimed and
    send nothing more. The claim lives in the build directory's state."""
    from dagster._daemon.types import DaemonHeartbeat

    from brain_pipeline.cli import main
    from brain_pipeline_tests.defs.conftest import cli_sees

    cli_sees(tiny_project, monkeypatch)
    with WebhookServer.start() as hook:
        tiny_project.settings["notify"] = {"webhook_url": f"{hook.url}/hooks/{HOOK_TOKEN}"}
        tiny_project.write_config()
        assert main(["materialize"]) == 0
        instance = dg.DagsterInstance.get()
        try:
            instance.add_daemon_heartbeat(
                DaemonHeartbeat(time.time(), "SENSOR", "a-daemon-that-just-stopped", errors=[])
            )
            _bury_gliders(tiny_project)
            assert main(["materialize"]) == 1  # blocked: the command sends it
            assert [b["event"] for b in hook.bodies] == ["blocked"]
            said = [line for line in capsys.readouterr().err.splitlines() if "message:" in line]
            assert len(said) == 1 and ": blocked message: webhook " in said[0], said
            assert HOOK_TOKEN not in said[0]  # the URL's token is never shown
            blocked_run = hook.bodies[0]["run_id"]
            delivered = read_delivery(_ledger(tiny_project.build), blocked_run)
            assert delivered is not None and delivered.state == "delivered"
            run = instance.get_run_by_id(blocked_run)
            assert run is not None and run.status == dg.DagsterRunStatus.FAILURE
            defs = build_definitions(str(tiny_project.config_path))
            for name in SENSORS:  # ticks over the finished run, as a daemon started now
                context = dg.build_run_status_sensor_context(
                    sensor_name=name,
                    dagster_instance=instance,
                    dagster_run=run,
                    dagster_event=dg.DagsterEvent(
                        event_type_value="PIPELINE_FAILURE", job_name=run.job_name
                    ),
                    context=None,
                )
                defs.resolve_sensor_def(name)(context)  # type: ignore[operator]
            assert len(hook.bodies) == 1
        finally:
            instance.dispose()


def test_a_daemon_catching_up_never_sends_a_stale_recovered(
    tiny_project: Project, tmp_path: Path
) -> None:
    """Blocked, then published (a recovery), then blocked again, all finished before the
    sensors tick (a daemon restarted after them): the two BLOCKED messages go out, the
    RECOVERED does not (the newest truth is the second failure)."""
    with WebhookServer.start() as hook:
        tiny_project.settings["notify"] = {"webhook_url": f"{hook.url}/hooks/{HOOK_TOKEN}"}
        tiny_project.write_config()
        ticker = Ticker(tiny_project)
        ticker.tick(1)
        guide = tiny_project.corpus / "beta" / "guide.md"
        original = guide.read_text()
        assert tiny_project.materialize().success
        _bury_gliders(tiny_project)
        first = tiny_project.materialize()
        guide.write_text(original, encoding="utf-8")
        recovered = tiny_project.materialize()
        _bury_gliders(tiny_project)
        second = tiny_project.materialize()
        assert (first.success, recovered.success, second.success) == (False, True, False)
        ticker.tick(8)  # one run per tick and sensor
    assert [(b["event"], b["run_id"]) for b in hook.bodies] == [
        ("blocked", first.run_id),
        ("blocked", second.run_id),
    ]
    stale = [s for s in ticker.skips if recovered.run_id[:8] in s]
    assert stale == [
        f"run {recovered.run_id[:8]}: recovered message not sent: a newer run "
        f"({second.run_id[:8]}) did not publish"
    ]


def test_a_raising_check_is_reported_by_the_exception_it_raised(
    tiny_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("the relevance table is corrupt at row 7")

    monkeypatch.setattr("brain_pipeline.defs.checks.evaluate_for_check", broken)
    with WebhookServer.start() as hook:
        tiny_project.settings["notify"] = {"webhook_url": f"{hook.url}/hooks/{HOOK_TOKEN}"}
        tiny_project.write_config()
        ticker = Ticker(tiny_project)
        ticker.tick(1)
        assert not tiny_project.materialize().success
        ticker.tick()
    assert [b["event"] for b in hook.bodies] == ["failed"]
    cause = hook.bodies[0]["cause"]
    assert cause == (
        "embeddings_retrieval_eval failed: RuntimeError: the relevance table is corrupt at row 7"
    ), cause
    assert "DagsterExecutionStepExecutionError" not in hook.bodies[0]["text"]


KILLED_AT_EMBEDDINGS = """
import os, signal, sys
import brain_pipeline.steps.embed as embed

def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

embed.embed_store = killed
from brain_pipeline.cli import main
sys.exit(main(["materialize"]))
"""


def test_a_run_killed_midway_says_what_had_succeeded(
    tiny_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kill -9` while embedding: the next command reaps the dead run and its message
    names the steps that had succeeded (chunks, store), not "before any step did"."""
    import os
    import signal
    import subprocess
    import sys

    from brain_pipeline.cli import main
    from brain_pipeline_tests.defs.conftest import cli_sees

    cli_sees(tiny_project, monkeypatch)
    with WebhookServer.start() as hook:
        tiny_project.settings["notify"] = {"webhook_url": f"{hook.url}/hooks/{HOOK_TOKEN}"}
        tiny_project.write_config()
        child = subprocess.run(
            [sys.executable, "-c", KILLED_AT_EMBEDDINGS],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert child.returncode == -signal.SIGKILL, child.stderr
        assert hook.bodies == []  # nobody was left to say it
        assert main(["materialize", "--select", "group:ingest"]) == 0  # reaps, then notifies
    assert [b["event"] for b in hook.bodies] == ["failed"]
    cause = hook.bodies[0]["cause"]
    assert cause.startswith(
        "the run ended after corpus, eval_fixture, knowledge_chunks, knowledge_store "
        "succeeded, before the rest "
        "finished: The process running this run"
    ), cause


# --- delivered once: an endpoint down, then back (issue 40, item 6) ---------------------


class FakeClock:
    """The time the notification sensors and the command time their tries by."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class ClockedTicker(Ticker):
    """The three notification sensors on `clock`, evaluated as the daemon does."""

    NAMES = (*SENSORS, "notify_retry")

    def __init__(self, project: Project, clock: FakeClock) -> None:
        super().__init__(project)
        self.clock = clock
        self.cursors = dict.fromkeys(self.NAMES)

    def tick(self, rounds: int = 4) -> None:
        path = str(self.project.config_path)
        sensors = build_notification_sensors(load_config(path), path, self.clock)
        defs = dg.Definitions(sensors=sensors)
        for _ in range(rounds):
            for sensor in sensors:
                context = dg.build_sensor_context(
                    instance=self.project.instance,
                    cursor=self.cursors[sensor.name],
                    definitions=defs,
                    sensor_name=sensor.name,
                )
                data = sensor.evaluate_tick(context)
                self.cursors[sensor.name] = data.cursor or self.cursors[sensor.name]
                if data.skip_message:
                    self.skips.append(data.skip_message)


def _blocked_run(project: Project, port: int, **notify: Any) -> tuple[str, ClockedTicker]:
    """A published run then a blocked one, the webhook at `port` (nothing listening yet):
    the run-status sensor's first try of the BLOCKED message is refused."""
    project.settings["notify"] = {
        "webhook_url": f"http://127.0.0.1:{port}/hooks/{HOOK_TOKEN}",
        "max_attempts": 1,
        "retry_backoff_seconds": 60,
        **notify,
    }
    project.write_config()
    ticker = ClockedTicker(project, FakeClock(time.time()))
    ticker.tick(1)
    assert project.materialize().success
    _bury_gliders(project)
    blocked = project.materialize()
    assert not blocked.success
    ticker.tick()
    record = read_delivery(_ledger(project.build), blocked.run_id)
    assert record is not None and record.state == "pending" and record.tries == 1
    return blocked.run_id, ticker


def test_a_message_the_webhook_missed_arrives_once_after_it_is_back(
    tiny_project: Project,
) -> None:
    """The endpoint is down when the run ends, and for a minute after: the message is
    tried again (notify_retry, backoff on the injected clock) and arrives exactly once
    once the endpoint is back; later ticks of every sensor, and the command's own path,
    send nothing more."""
    port = free_port()
    run_id, ticker = _blocked_run(tiny_project, port)
    ticker.clock.advance(30)
    ticker.tick()  # not due yet (60 s backoff), and still down
    with WebhookServer.start(port) as hook:
        ticker.tick()  # back, but the retry is not due: nothing yet
        assert hook.bodies == []
        ticker.clock.advance(31)
        ticker.tick()
        assert [(b["event"], b["run_id"]) for b in hook.bodies] == [("blocked", run_id)]
        for _ in range(3):
            ticker.clock.advance(3600)
            ticker.tick()
        cfg = load_config(str(tiny_project.config_path))
        again = notify_finished_run(tiny_project.instance, run_id, cfg, now=ticker.clock())
        assert again is None  # the command after its run: already delivered
        assert len(hook.bodies) == 1
    record = read_delivery(_ledger(tiny_project.build), run_id)
    assert record is not None and record.state == "delivered" and record.tries == 2
    assert HOOK_TOKEN not in "".join(ticker.skips)


def test_two_deliverers_racing_on_a_retry_deliver_once(tiny_project: Project) -> None:
    """The command (after its run) and the notify_retry sensor both find the refused
    message due at once: while the first is mid-send (the endpoint holds its answer),
    the second finds the run's lease taken and sends nothing; afterwards the delivered
    mark keeps everyone off."""
    port = free_port()
    run_id, ticker = _blocked_run(tiny_project, port)
    ticker.clock.advance(61)
    cfg = load_config(str(tiny_project.config_path))
    answer = threading.Event()
    with WebhookServer.start(port, answer_when=answer) as hook:
        said: list[str | None] = []
        command = threading.Thread(
            target=lambda: said.append(
                notify_finished_run(tiny_project.instance, run_id, cfg, now=ticker.clock())
            )
        )
        command.start()
        deadline = time.monotonic() + 60
        while not hook.bodies and time.monotonic() < deadline:
            time.sleep(0.05)  # until the command's POST is at the endpoint, unanswered
        assert len(hook.bodies) == 1
        ticker.skips.clear()
        ticker.tick(1)  # the sensor, racing: the lease is held
        assert "no message due to be tried again" in ticker.skips
        answer.set()
        command.join(60)
        ticker.clock.advance(3600)
        ticker.tick()
    assert said and said[0] is not None and ": blocked message: webhook " in said[0]
    assert len(hook.bodies) == 1 and hook.bodies[0]["run_id"] == run_id


def test_a_message_never_accepted_is_given_up_and_named_in_status_and_the_run_log(
    tiny_project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from brain_pipeline.cli import main
    from brain_pipeline_tests.defs.conftest import cli_sees

    run_id, ticker = _blocked_run(tiny_project, free_port(), retry_for_seconds=600)
    for _ in range(12):  # ten minutes and more of a dead endpoint, on the injected clock
        ticker.clock.advance(120)
        ticker.tick(1)
    record = read_delivery(_ledger(tiny_project.build), run_id)
    assert record is not None and record.state == "failed"
    logged = run_events(tiny_project.instance, run_id, {dg.DagsterEventType.ENGINE_EVENT})
    notes = [e.message for e in logged if "NOT delivered" in e.message]
    assert len(notes) == 1 and f"run {run_id[:8]}: blocked message" in notes[0]
    assert HOOK_TOKEN not in notes[0]
    cli_sees(tiny_project, monkeypatch)
    capsys.readouterr()
    main(["status"])
    out = capsys.readouterr().out
    shown = [line for line in out.splitlines() if line.startswith("notification: ")]
    assert len(shown) == 1 and f"run {run_id[:8]}: blocked message NOT delivered" in shown[0]
    assert HOOK_TOKEN not in out
