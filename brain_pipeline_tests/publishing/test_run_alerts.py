"""publishing.run_alerts without Dagster: which event a run is, its message, its delivery."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from brain_pipeline.config import EmailSettings, NotifySettings
from brain_pipeline.publishing.run_alerts import (
    CheckOutcome,
    RunFacts,
    build_message,
    claim_run,
    classify,
    deliver,
    known_secrets,
    previous_outcome,
    superseded_by,
)
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
    assert "TOKEN-abcdef" not in delivery.describe()
    assert delivery.describe().startswith(f"webhook http://127.0.0.1:{url.split(':')[2][:5]}")


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


def test_a_run_is_claimed_once_across_callers(tmp_path: Path) -> None:
    assert claim_run(tmp_path, "run-1") is True
    assert claim_run(tmp_path, "run-1") is False
    assert claim_run(tmp_path, "run-2") is True
    assert sorted(p.name for p in (tmp_path / "notified").iterdir()) == ["run-1", "run-2"]
