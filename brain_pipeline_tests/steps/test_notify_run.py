"""Notifications of a run made without Dagster, sent by the command, to real peers.

Journals shaped as `steps.direct_run` writes them (the plan's nodes in order, a blocking
check's verdict with its headline, the steps downstream of a gate `blocked`) are written
with `write_journal` and handed to `notify_direct_run`, which posts to a real local
HTTP server and a real SMTP server (`peers/notify_peers.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.steps.notify_run import (
    journal_facts,
    notify_direct_run,
    previous_journal_event,
)
from brain_pipeline.steps.report import Markdown
from brain_pipeline.steps.run_journal import RunJournal, StepEntry, read_journal, write_journal
from brain_pipeline_tests.peers.notify_peers import SmtpServer, WebhookServer, free_port

HOOK_TOKEN = "T0KEN-hook-secret-xyz"
FAKE_KEY = "fake-gemini-key-for-tests-0001"
SMTP_USER, SMTP_PASSWORD = "pipeline-bot", "smtp-Pa55word-never-shown"
HEADLINE = "retrieval evaluation FAILED: hybrid: 'vpc peering' (aws) became a miss, rank 1 → miss"
START = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


@dataclass
class Runs:
    """Writes one journal per run, each ending a minute after the one before."""

    root: Path
    count: int = 0
    written: list[Path] = field(default_factory=list)

    @property
    def layout(self) -> StateLayout:
        return StateLayout.of(self.root / "build")

    def config(self, notify: dict[str, Any] | None) -> BrainConfig:
        path = self.root / "corpus_config.yaml"
        sections: dict[str, Any] = {"build_dir": str(self.root / "build")}
        if notify is not None:
            sections["notify"] = notify
        path.write_text(yaml.safe_dump(sections), encoding="utf-8")
        return load_config(path, env={})

    def journal(self, steps: list[StepEntry], **kw: Any) -> RunJournal:
        self.count += 1
        ended = START + timedelta(minutes=self.count)
        journal = RunJournal(
            run_id=f"{self.count:08d}-0000-4000-8000-000000000000",
            started_at=(ended - timedelta(seconds=30)).isoformat(),
            finished_at=ended.isoformat(),
            launched_by="brain-pipeline materialize",
            trigger="schedule nightly (cron)",
            succeeded=kw.pop("succeeded", True),
            steps=steps,
            **kw,
        )
        self.written.append(write_journal(self.layout, journal))
        return journal


@pytest.fixture
def runs(tmp_path: Path) -> Runs:
    return Runs(tmp_path)


@pytest.fixture
def hook() -> Iterator[WebhookServer]:
    with WebhookServer.start() as server:
        yield server


def _ok(name: str, **metadata: Any) -> StepEntry:
    return StepEntry(name, "asset", "ok", data_version="v1", metadata=metadata)


def _eval(passed: bool, severity: str = "ERROR") -> StepEntry:
    return StepEntry(
        "retrieval_eval",
        "check",
        "ok",
        asset="embeddings",
        blocking=True,
        passed=passed,
        severity=severity,
        description="regressions: 1; see the per-query table",
        metadata={
            "headline": HEADLINE if not passed else "retrieval evaluation passed",
            "evaluation": Markdown("| query | rank |"),
        },
    )


def _published(
    status: str = "updated", eval_passed: bool = True, severity: str = "ERROR"
) -> list[StepEntry]:
    return [
        _ok("knowledge_chunks"),
        _ok("knowledge_store"),
        _ok("embeddings"),
        _eval(eval_passed, severity),
        _ok("published_local", status=status),
        StepEntry("published_s3", "asset", "nothing"),
    ]


def _blocked() -> list[StepEntry]:
    return [
        _ok("knowledge_chunks"),
        _ok("knowledge_store"),
        _ok("embeddings"),
        _eval(False),
        StepEntry("published_local", "asset", "blocked"),
        StepEntry("published_s3", "asset", "blocked"),
    ]


def _failed(error: str) -> list[StepEntry]:
    return [
        _ok("knowledge_chunks"),
        _ok("knowledge_store"),
        StepEntry("embeddings", "asset", "failed", error=error),
        StepEntry("retrieval_eval", "check", "blocked", asset="embeddings", blocking=True),
        StepEntry("published_local", "asset", "blocked"),
    ]


def _webhook(url: str, **more: Any) -> dict[str, Any]:
    return {"webhook_url": url, "max_attempts": 2, "timeout_seconds": 2, **more}


def test_a_blocked_run_is_sent_once_naming_the_check_and_its_headline(
    runs: Runs, hook: WebhookServer
) -> None:
    cfg = runs.config(_webhook(f"{hook.url}/hooks/x"))
    journal = runs.journal(_blocked(), succeeded=False)

    line = notify_direct_run(cfg, runs.layout, journal, {})
    again = notify_direct_run(cfg, runs.layout, journal, {})

    assert len(hook.bodies) == 1 and again is None
    (body,) = hook.bodies
    assert body["event"] == "blocked" and body["run_id"] == journal.run_id
    assert body["cause"] == f"embeddings:retrieval_eval: {HEADLINE}"
    assert body["job"] == "materialize" and body["link"] is None
    assert "Started by: schedule nightly (cron)" in body["text"]
    assert line == f"notification: blocked message: webhook {hook.url}: sent after 1 attempt(s)"
    recorded = json.loads(runs.layout.notified_runs.read_text(encoding="utf-8"))
    assert recorded["runs"] == {journal.run_id: "blocked"}


def test_a_failed_step_sends_a_failure(runs: Runs, hook: WebhookServer) -> None:
    cfg = runs.config(_webhook(f"{hook.url}/hooks/x"))
    journal = runs.journal(_failed("EmbeddingError: quota exhausted\nmore"), succeeded=False)
    line = notify_direct_run(cfg, runs.layout, journal, {})
    assert [b["event"] for b in hook.bodies] == ["failed"]
    assert hook.bodies[0]["cause"] == "embeddings failed: EmbeddingError: quota exhausted"
    assert line is not None and line.startswith("notification: failed message: webhook")


def test_the_classify_rules_over_a_sequence_of_runs(runs: Runs, hook: WebhookServer) -> None:
    """First publication: nothing; blocked; recovered; good after good: nothing; a WARN
    regression published; recovered; a held publication: nothing."""
    cfg = runs.config(_webhook(f"{hook.url}/hooks/x"))
    lines = [
        notify_direct_run(cfg, runs.layout, journal, {})
        for journal in (
            runs.journal(_published()),
            runs.journal(_blocked(), succeeded=False),
            runs.journal(_published()),
            runs.journal(_published(status="unchanged")),
            runs.journal(_published(eval_passed=False, severity="WARN")),
            runs.journal(_published()),
            runs.journal(_published(status="held")),
        )
    ]
    kinds = [b["event"] for b in hook.bodies]
    assert kinds == ["blocked", "recovered", "regression", "recovered"]
    assert [line is not None for line in lines] == [False, True, True, False, True, True, False]
    assert "RECOVERED" in hook.bodies[1]["text"] and "blocked run" in hook.bodies[1]["cause"]
    assert "IS live" in hook.bodies[2]["text"] and HEADLINE in hook.bodies[2]["cause"]
    assert "regression run" in hook.bodies[3]["cause"]


def test_an_interrupted_run_sends_nothing_and_is_not_counted(
    runs: Runs, hook: WebhookServer
) -> None:
    cfg = runs.config(_webhook(f"{hook.url}/hooks/x"))
    blocked = runs.journal(_blocked(), succeeded=False)
    stopped = runs.journal(_published()[:2], succeeded=False, interrupted="interrupted")
    assert notify_direct_run(cfg, runs.layout, stopped, {}) is None
    assert hook.bodies == []
    # The run after the interruption looks past it, to the blocked one.
    assert previous_journal_event(runs.layout, runs.journal(_published())) == "blocked"
    assert notify_direct_run(cfg, runs.layout, blocked, {}) is not None


def test_the_look_back_is_bounded_and_newest_first(runs: Runs) -> None:
    runs.journal(_blocked(), succeeded=False)
    runs.journal(_failed("OSError: disk full"), succeeded=False)
    for _ in range(3):
        runs.journal(_published()[:3])  # succeeded, published nothing: says nothing
    last = runs.journal(_published())
    assert previous_journal_event(runs.layout, last) == "failed"
    assert previous_journal_event(runs.layout, last, lookback=4) == "failed"
    assert previous_journal_event(runs.layout, last, lookback=3) is None


def test_a_dead_webhook_is_a_line_and_changes_nothing(runs: Runs) -> None:
    cfg = runs.config(_webhook(f"http://127.0.0.1:{free_port()}/hooks/{HOOK_TOKEN}"))
    journal = runs.journal(_blocked(), succeeded=False)
    before = runs.written[-1].read_bytes()
    slept: list[float] = []

    line = notify_direct_run(cfg, runs.layout, journal, {}, sleep=slept.append)

    assert line is not None and line.startswith("notification: blocked message: webhook http://")
    assert "NOT sent after 2 attempt(s)" in line and HOOK_TOKEN not in line
    assert slept == [1.0]
    assert runs.written[-1].read_bytes() == before  # the run's outcome, as recorded
    reread = read_journal(runs.written[-1])
    assert reread is not None and reread.succeeded is False and reread.run_id == journal.run_id
    # Tried once with its bounded retries, as the sensors do: a repeat call sends nothing.
    assert notify_direct_run(cfg, runs.layout, journal, {}, sleep=slept.append) is None


def test_no_secret_reaches_the_message_or_the_line(runs: Runs, hook: WebhookServer) -> None:
    env = {
        "GEMINI_API_KEY": FAKE_KEY,
        "BRAIN_SMTP_USER": SMTP_USER,
        "BRAIN_SMTP_PASSWORD": SMTP_PASSWORD,
    }
    with SmtpServer.start(SMTP_USER, SMTP_PASSWORD) as smtp:
        email = {
            "host": "127.0.0.1",
            "port": smtp.port,
            "starttls": False,
            "sender": "pipeline@example.org",
            "recipients": ["ops@example.org"],
            "username_env": "BRAIN_SMTP_USER",
            "password_env": "BRAIN_SMTP_PASSWORD",
        }
        cfg = runs.config(_webhook(f"{hook.url}/hooks/{HOOK_TOKEN}", email=email))
        leak = (
            f"ClientError: 400 key {FAKE_KEY} refused by {hook.url}/hooks/{HOOK_TOKEN} "
            f"(login {SMTP_PASSWORD})"
        )
        journal = runs.journal(_failed(leak), succeeded=False)
        line = notify_direct_run(cfg, runs.layout, journal, env)

    assert line is not None and "email 127.0.0.1" in line and "NOT sent" not in line
    assert hook.paths == [f"/hooks/{HOOK_TOKEN}"] and smtp.logins == [SMTP_USER]
    (mail,) = smtp.messages
    sent = json.dumps(hook.bodies) + str(mail["Subject"]) + str(mail.get_payload())
    assert "ClientError: 400 key ***" in hook.bodies[0]["cause"]  # the error, scrubbed
    for secret in (FAKE_KEY, HOOK_TOKEN, SMTP_PASSWORD):
        assert secret not in sent and secret not in line


def test_without_a_channel_nothing_is_sent_or_written(runs: Runs) -> None:
    cfg = runs.config(None)
    journal = runs.journal(_blocked(), succeeded=False)
    assert notify_direct_run(cfg, runs.layout, journal, {}) is None
    assert not runs.layout.notified_runs.exists()


def test_journal_facts_read_what_the_sensors_read_from_events(runs: Runs) -> None:
    steps = _published(status="unchanged")
    steps.insert(
        3,
        StepEntry(
            "fits_agent_string_limit",
            "check",
            "ok",
            asset="knowledge_store",
            blocking=True,
            passed=True,
            severity="ERROR",
            description="fits",
        ),
    )
    steps.append(StepEntry("vectors_reach_agent", "check", "blocked", asset="published_local"))
    facts = journal_facts(runs.journal(steps))
    assert [c.name for c in facts.checks] == [
        "knowledge_store:fits_agent_string_limit",
        "embeddings:retrieval_eval",
    ]
    assert facts.checks[1].headline == "retrieval evaluation passed"
    assert (facts.published, facts.publish_status, facts.job) == (True, "unchanged", "materialize")
    assert facts.failed_steps == () and facts.succeeded
    failed = journal_facts(runs.journal(_failed("boom"), succeeded=False))
    assert failed.failed_steps == (("embeddings", "boom"),) and not failed.published


def test_a_damaged_record_is_set_aside_and_the_run_still_notified(
    runs: Runs, hook: WebhookServer
) -> None:
    cfg = runs.config(_webhook(f"{hook.url}/hooks/x"))
    runs.layout.notified_runs.parent.mkdir(parents=True, exist_ok=True)
    runs.layout.notified_runs.write_bytes(b'{"runs": [torn')
    journal = runs.journal(_blocked(), succeeded=False)
    assert notify_direct_run(cfg, runs.layout, journal, {}) is not None
    assert len(hook.bodies) == 1
    damaged = runs.layout.notified_runs.with_name("notified-runs.json.damaged")
    assert damaged.read_bytes() == b'{"runs": [torn'
    assert json.loads(runs.layout.notified_runs.read_text())["runs"] == {journal.run_id: "blocked"}
