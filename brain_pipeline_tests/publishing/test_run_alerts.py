"""publishing.run_alerts without Dagster: which event a run is, its message, its delivery."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

from brain_pipeline.config import EmailSettings, NotifySettings
from brain_pipeline.publishing.run_alerts import (
    LEASE_SECONDS,
    MAX_BACKOFF_SECONDS,
    CheckOutcome,
    Redelivery,
    RunDelivery,
    RunFacts,
    build_message,
    classify,
    deliver,
    import_earlier,
    known_secrets,
    pending_deliveries,
    previous_outcome,
    read_delivery,
    run_lease,
    superseded_by,
    try_delivery,
    write_delivery,
)
from brain_pipeline.state.ledger import Ledger, sqlite_url
from brain_pipeline_tests.peers.notify_peers import WebhookServer, free_port

EVAL = "embeddings:retrieval_eval"
MISS = "retrieval_eval: regression: 'vpc peering' (aws) became a miss, rank 1 → miss"


def facts(**kw: object) -> RunFacts:
    base: dict[str, object] = {
        "run_id": "0123456789abcdef",
        "job": "reingest_job",
        "succeeded": True,
    }
    return RunFacts(**{**base, **kw})  # type: ignore[arg-type]


def test_a_failed_blocking_check_is_blocked_with_its_first_line() -> None:
    check = CheckOutcome(EVAL, False, "ERROR", MISS + "\nmore detail", True)
    event = classify(facts(succeeded=False, checks=[check]), None)
    assert event is not None and event.kind == "blocked"
    assert event.cause == f"{EVAL}: {MISS}"


def test_the_verdict_headline_is_the_cause_when_the_check_carries_it() -> None:
    headline = "retrieval evaluation FAILED: hybrid: 'vpc peering' (aws) became a miss"
    check = CheckOutcome(EVAL, False, "ERROR", "a; b; c", True, headline)
    event = classify(facts(succeeded=False, checks=[check]), None)
    assert event is not None and event.cause == f"{EVAL}: {headline}"


def test_a_refused_publish_step_is_blocked_and_another_failure_is_failed() -> None:
    refused = facts(succeeded=False, failed_steps=[("published_local", "publishing refused: x")])
    assert classify(refused, None).kind == "blocked"  # type: ignore[union-attr]
    broken = facts(succeeded=False, failed_steps=[("embeddings", "quota exhausted\ntrace")])
    event = classify(broken, None)
    assert event is not None and (event.kind, event.cause) == (
        "failed",
        "embeddings failed: quota exhausted",
    )


def test_warn_regression_recovery_and_silence() -> None:
    warn = CheckOutcome(EVAL, False, "WARN", MISS, True)
    advice = CheckOutcome("published_local:vectors_reach_agent", False, "WARN", "no vectors", False)
    published = {"published": True, "publish_status": "updated"}
    assert classify(facts(checks=[warn], **published), None).kind == "regression"  # type: ignore[union-attr]
    assert classify(facts(checks=[advice], **published), None) is None
    assert classify(facts(**published), "blocked").kind == "recovered"  # type: ignore[union-attr]
    assert classify(facts(**published), "good") is None
    assert classify(facts(**published), None) is None
    held = {"published": True, "publish_status": "held"}
    assert classify(facts(**held), "failed") is None  # held back: not a recovery
    assert classify(facts(), "failed") is None  # nothing published


def test_a_forced_publication_is_said_with_its_reason_never_as_a_recovery() -> None:
    forced = "published over retrieval_eval failed on this data: bm25 (reason: the demo)"
    published = {"published": True, "publish_status": "updated", "forced": forced}
    event = classify(facts(**published), "blocked")
    assert event is not None and event.kind == "forced" and event.cause == forced
    message = build_message(event)
    assert message.subject.startswith("[brain-pipeline] FORCED publication is live: ")
    assert "(reason: the demo)" in message.text and "IS live" in message.text
    assert previous_outcome([facts(**published)]) == "forced"


def test_the_previous_outcome_is_the_newest_bad_event_or_a_clean_publication() -> None:
    published = facts(published=True, publish_status="updated")
    held = facts(published=True, publish_status="held")
    blocked = facts(succeeded=False, checks=[CheckOutcome(EVAL, False, "ERROR", MISS, True)])
    broken = facts(succeeded=False, failed_steps=[("embeddings", "quota exhausted")])
    assert previous_outcome([facts(), held, blocked, published]) == "blocked"
    assert previous_outcome([published, broken]) == "good"
    assert previous_outcome([facts(), held]) is None
    assert previous_outcome([]) is None

    read: list[RunFacts] = []

    def newest_first() -> Iterator[RunFacts]:
        for each in (facts(), broken, published, published):
            read.append(each)
            yield each

    assert previous_outcome(newest_first()) == "failed"
    assert len(read) == 2  # read only as far as the answer: the look-back stays cheap


def test_the_message_links_the_run_and_hides_secrets() -> None:
    check = CheckOutcome(EVAL, False, "ERROR", "cause with s3cr3t-value inside", True)
    event = classify(facts(succeeded=False, checks=[check]), None, "http://ui:3000/runs/0123")
    assert event is not None
    message = build_message(event, ["s3cr3t-value"])
    assert message.text.splitlines()[0] == (
        "brain-pipeline: publish BLOCKED (run 01234567, reingest_job)"
    )
    assert "Run: http://ui:3000/runs/0123" in message.text
    assert "s3cr3t-value" not in message.text + message.subject + str(message.payload)
    assert message.payload["text"] == message.text


def test_a_dead_channel_is_retried_a_bounded_number_of_times_and_never_raises() -> None:
    url = f"http://127.0.0.1:{free_port()}/services/TOKEN-abcdef"
    settings = NotifySettings(webhook_url=url, max_attempts=3, timeout_seconds=1)
    slept: list[float] = []
    delivery = deliver(settings, _message(), env={}, sleep=slept.append)
    assert not delivery.ok and slept == [1.0, 2.0]
    (result,) = delivery.results
    assert result.attempts == 3 and not result.ok
    assert "TOKEN-abcdef" not in result.describe()
    assert result.describe().startswith(f"webhook http://127.0.0.1:{url.split(':')[2][:5]}")


def test_a_live_webhook_gets_the_payload_once() -> None:
    with WebhookServer.start() as hook:
        settings = NotifySettings(webhook_url=f"{hook.url}/x")
        delivery = deliver(settings, _message(), env={}, sleep=lambda s: None)
    assert delivery.ok and len(hook.bodies) == 1 and hook.bodies[0]["event"] == "failed"


def test_the_smtp_password_counts_as_a_secret() -> None:
    email = EmailSettings(
        host="127.0.0.1", sender="a@b.c", recipients=["d@e.f"], password_env="MY_SMTP_PASS"
    )
    settings = NotifySettings(email=email)
    assert "hunter2-secret" in known_secrets(settings, {"MY_SMTP_PASS": "hunter2-secret"})


def _message():  # type: ignore[no-untyped-def]
    event = classify(facts(succeeded=False, failed_steps=[("knowledge_store", "disk full")]), None)
    assert event is not None
    return build_message(event)


def test_a_killed_run_says_what_had_succeeded_and_what_dagster_said() -> None:
    killed = facts(
        succeeded=False,
        succeeded_steps=("knowledge_chunks", "knowledge_store"),
        run_failure="The process running this run is gone (killed or crashed).",
    )
    event = classify(killed, None)
    assert event is not None and event.kind == "failed"
    assert event.cause == (
        "the run ended after knowledge_chunks, knowledge_store succeeded, before the rest "
        "finished: The process running this run is gone (killed or crashed)."
    )
    nothing = classify(facts(succeeded=False), None)
    assert nothing is not None and nothing.cause == "the run ended before any step finished"


def test_a_recovered_is_stale_after_a_newer_failure_only() -> None:
    published = facts(published=True, publish_status="updated")
    recovered = classify(published, "blocked")
    assert recovered is not None and recovered.kind == "recovered"
    newer_failure = facts(run_id="newer-failed", succeeded=False, failed_steps=(("x", "boom"),))
    newer_good = facts(run_id="newer-good", published=True, publish_status="updated")
    assert superseded_by(recovered, [newer_good, newer_failure]) == newer_failure
    assert superseded_by(recovered, [newer_good]) is None
    blocked = classify(newer_failure, None)
    assert blocked is not None and superseded_by(blocked, [newer_failure]) is None


def _ledger(tmp_path: Path) -> Ledger:
    return Ledger(sqlite_url(tmp_path / "ledger.sqlite"))


def test_the_lease_admits_one_deliverer_of_a_run_at_a_time(tmp_path: Path) -> None:
    """The once-only claim, pinned without Dagster: while one deliverer holds run-1's
    lease (a separate connection to the ledger, as another process would), nobody else
    gets it; another run's lease is free; once released, it can be taken again; a
    lease its holder never gave back (killed) expires."""
    one, two = _ledger(tmp_path), _ledger(tmp_path)
    with run_lease(one, "run-1") as first:
        assert first is True
        with run_lease(two, "run-1") as second:
            assert second is False
        with run_lease(two, "run-2") as other:
            assert other is True
        later = lambda: time.time() + LEASE_SECONDS + 1  # noqa: E731
        with run_lease(two, "run-1", now=later) as expired:
            assert expired is True
    with run_lease(two, "run-1") as again:
        assert again is True


def _pending(run_id: str, at: float) -> RunDelivery:
    return RunDelivery(run_id, "failed", "pending", _message(), first_at=at, next_at=at)


def _no_sleep(seconds: float) -> None:
    return None


def test_a_refused_message_is_tried_again_when_due_and_delivered_once(tmp_path: Path) -> None:
    """The endpoint is down at the first try and back at the second: one message, then
    nothing more whatever the clock says (the delivered mark, on disk)."""
    port = free_port()
    settings = NotifySettings(
        webhook_url=f"http://127.0.0.1:{port}/hook", max_attempts=1, retry_backoff_seconds=60
    )
    t0 = 1_000_000.0
    record = try_delivery(_pending("run-1", t0), settings, now=t0, env={}, sleep=_no_sleep)
    assert (record.state, record.tries, record.next_at) == ("pending", 1, t0 + 60)
    ledger = _ledger(tmp_path)
    write_delivery(ledger, record)
    assert pending_deliveries(ledger) == ["run-1"]
    assert not record.due(t0 + 59)
    with WebhookServer.start(port) as hook:
        stored = read_delivery(ledger, "run-1")
        assert stored == record  # the message and the per-channel results survive the disk
        record = try_delivery(stored, settings, now=t0 + 60, env={}, sleep=_no_sleep)
        write_delivery(ledger, record)
        assert record.state == "delivered" and len(hook.bodies) == 1
        for later in (t0 + 120, t0 + 86400 * 2):
            stored = read_delivery(ledger, "run-1")
            assert stored is not None and not stored.due(later)
            assert try_delivery(stored, settings, now=later, env={}) == stored
        assert len(hook.bodies) == 1
    assert pending_deliveries(ledger) == []


def test_a_channel_that_accepted_is_not_sent_the_message_again() -> None:
    """Webhook up, email down: each retry goes to the email only (the webhook's
    acceptance is recorded per channel)."""
    email = EmailSettings(
        host="127.0.0.1", port=free_port(), starttls=False, sender="a@b.c", recipients=["d@e.f"]
    )
    with WebhookServer.start() as hook:
        settings = NotifySettings(
            webhook_url=f"{hook.url}/x", email=email, max_attempts=1, timeout_seconds=1
        )
        record = _pending("run-1", 0.0)
        for now in (0.0, 60.0, 180.0):
            record = try_delivery(record, settings, now=now, env={}, sleep=_no_sleep)
        assert record.state == "pending" and record.tries == 3
    assert len(hook.bodies) == 1


def test_backoff_doubles_and_a_message_is_given_up_at_the_bound() -> None:
    settings = NotifySettings(
        webhook_url=f"http://127.0.0.1:{free_port()}/hook",
        max_attempts=1,
        retry_backoff_seconds=60,
        retry_for_seconds=600,
    )
    record, tries_at = _pending("run-1", 0.0), []
    while record.state == "pending":
        tries_at.append(record.next_at)
        record = try_delivery(record, settings, now=record.next_at, env={}, sleep=_no_sleep)
    assert tries_at == [0.0, 60.0, 180.0, 420.0, 600.0]  # doubling, the last at the bound
    assert record.state == "failed"
    assert record.describe().startswith("run run-1: failed message NOT delivered, given up after 5")
    assert Redelivery(60, 10**6).wait_after(20) == MAX_BACKOFF_SECONDS


def test_a_claim_file_of_an_earlier_version_is_never_sent_again(tmp_path: Path) -> None:
    (tmp_path / "notified").mkdir()
    (tmp_path / "notified" / "run-1").touch()  # taken before sending, by the old code
    ledger = _ledger(tmp_path)
    assert read_delivery(ledger, "run-1") is None
    import_earlier(ledger, tmp_path)  # once, on the first use of the ledger
    record = read_delivery(ledger, "run-1")
    assert record is not None and record.state == "delivered"


def test_a_record_of_an_earlier_version_reads_by_its_fields(tmp_path: Path) -> None:
    """No format number: an earlier release's `<run>.json` (with `"format": 1`) is read
    as it is; one without the fields this code reads is not imported (as one of another
    format was not) counts as handled, never sent: a second message is worse than a gap."""
    import json

    record = RunDelivery("run-2", "failure", "pending", None, 10.0, tries=2, next_at=20.0)
    body = json.loads(record.to_json())
    assert "format" not in body and RunDelivery.from_json(record.to_json()) == record
    (tmp_path / "notified").mkdir()
    (tmp_path / "notified" / "run-2.json").write_text(json.dumps({**body, "format": 1}))
    (tmp_path / "notified" / "run-3.json").write_text(json.dumps({"run_id": "run-3"}))
    ledger = _ledger(tmp_path)
    import_earlier(ledger, tmp_path)
    assert read_delivery(ledger, "run-2") == record
    unread = read_delivery(ledger, "run-3")
    assert unread is not None and unread.state == "failed" and unread.message is None
