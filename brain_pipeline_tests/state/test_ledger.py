"""The ledger, every test on both backends (SQLite file, real PostgreSQL server); the races
are separate processes (spawned) or threads, each with its own connection."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline.state.ledger import (
    POSTGRES_EXTRA,
    Ledger,
    LedgerError,
    StepKey,
    StepResult,
    Verdict,
    check_ledger_url,
    redacted,
)
from brain_pipeline.state.lock import LockBusyError, make_holder

SPAWN = multiprocessing.get_context("spawn")
KEY = StepKey("embeddings", inputs="a" * 64, code="c" * 64, settings="s" * 64)


def test_a_step_result_is_found_by_its_whole_key_only(ledger_url: str) -> None:
    with Ledger(ledger_url) as ledger:
        assert ledger.step_result(KEY) is None
        kept = ledger.record_step(
            StepResult(KEY, {"vectors": "v" * 64}, {"texts_embedded": 3, "model": "m"}, "run-1")
        )
        found = ledger.step_result(KEY)
        assert found == kept and found.outputs == {"vectors": "v" * 64}
        assert found.facts == {"texts_embedded": 3, "model": "m"} and found.run_id == "run-1"
        assert found.recorded_at
        for other in ("inputs", "code", "settings"):
            assert ledger.step_result(StepKey(**{**KEY.__dict__, other: "0" * 64})) is None
        ledger.record_step(StepResult(KEY, {"vectors": "w" * 64}))  # the same key again
        again = ledger.step_result(KEY)
        assert again is not None and again.outputs == {"vectors": "w" * 64}


def test_a_verdict_is_keyed_by_check_data_and_rule(ledger_url: str) -> None:
    with Ledger(ledger_url) as ledger:
        assert ledger.verdict("fits", "d1", "r1") is None
        ledger.record_verdict(Verdict("fits", "d1", "r1", "ERROR", "too big", overridable=False))
        verdict = ledger.verdict("fits", "d1", "r1")
        assert verdict is not None and verdict.blocks and not verdict.overridable
        assert ledger.verdict("fits", "d1", "r2") is None  # another rule judged nothing
        assert ledger.verdict("fits", "d2", "r1") is None
        ledger.record_verdict(Verdict("fits", "d1", "r1", "PASS", "fits", run_id="run-2"))
        verdict = ledger.verdict("fits", "d1", "r1")
        assert verdict is not None and not verdict.blocks and verdict.run_id == "run-2"


def test_pointers_move_only_by_compare_and_set(ledger_url: str) -> None:
    with Ledger(ledger_url) as ledger:
        assert ledger.pointer("live publication") is None
        assert ledger.set_pointer("live publication", "1", expected=None)
        assert not ledger.set_pointer("live publication", "9", expected=None)  # already set
        assert not ledger.set_pointer("live publication", "9", expected="0")  # stale view
        assert ledger.pointer("live publication") == "1"
        assert ledger.set_pointer("live publication", "2", expected="1")
        assert ledger.pointer("live publication") == "2"
        assert ledger.pointer("regression baseline") is None  # names are independent


def _cas_worker(url: str, name: str, barrier: Any, results: Any, who: int) -> None:
    with Ledger(url) as ledger:
        barrier.wait(timeout=60)
        results.put((who, ledger.set_pointer(name, f"by-{who}", expected="start")))


def test_of_racing_compare_and_sets_exactly_one_wins(ledger_url: str) -> None:
    with Ledger(ledger_url) as ledger:
        ledger.set_pointer("baseline", "start", expected=None)
    winners = _race(_cas_worker, ledger_url, "baseline", workers=4)
    assert len(winners) == 1
    with Ledger(ledger_url) as ledger:
        assert ledger.pointer("baseline") == f"by-{winners[0]}"


def _claim_worker(url: str, run_id: str, barrier: Any, results: Any, who: int) -> None:
    """A deliverer of run `run_id`'s message (publishing.run_alerts): it wins when it holds
    the run's lease and finds the message unhandled, and records it before letting go."""
    from brain_pipeline.publishing.run_alerts import (
        RunDelivery,
        read_delivery,
        run_lease,
        write_delivery,
    )

    with Ledger(url) as ledger:
        barrier.wait(timeout=60)
        with run_lease(ledger, run_id) as held:
            won = held and read_delivery(ledger, run_id) is None
            if won:
                write_delivery(ledger, RunDelivery(run_id, f"by-{who}", "delivered", None, 0.0))
        results.put((who, won))


def _race(target: Any, url: str, arg: str, workers: int) -> list[int]:
    """Start `workers` processes that meet at a barrier; who returned True."""
    barrier, results = SPAWN.Barrier(workers), SPAWN.Queue()
    processes = [
        SPAWN.Process(target=target, args=(url, arg, barrier, results, who))
        for who in range(workers)
    ]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    return sorted(who for who, won in outcomes if won)


def test_a_notification_is_claimed_once_under_a_race(ledger_url: str) -> None:
    from brain_pipeline.publishing.run_alerts import read_delivery

    winners = _race(_claim_worker, ledger_url, "run-7", workers=4)
    assert len(winners) == 1
    with Ledger(ledger_url) as ledger:
        record = read_delivery(ledger, "run-7")
        assert record is not None and record.kind == f"by-{winners[0]}"


def _open_worker(url: str, _: str, barrier: Any, results: Any, who: int) -> None:
    barrier.wait(timeout=60)
    with Ledger(url) as ledger:
        ledger.set_pointer(f"opened-{who}", "x", expected=None)
    results.put((who, True))


def test_workers_creating_the_schema_at_once_all_succeed(ledger_url: str) -> None:
    # No one has opened this ledger yet: every worker finds no tables and creates them.
    assert _race(_open_worker, ledger_url, "", workers=4) == [0, 1, 2, 3]
    with Ledger(ledger_url) as ledger:
        assert all(ledger.pointer(f"opened-{i}") == "x" for i in range(4))


def _lock_worker(url: str, run_id: str, barrier: Any, results: Any, who: int) -> None:
    """Race for the lock; the loser asks again once the winner holds it (and has had the
    time to describe itself), and reports what it was told."""
    holder = make_holder("materialize", f"{run_id}-{who}")
    with Ledger(url) as ledger:
        barrier.wait(timeout=60)
        try:
            with ledger.run_lock(holder, wait_seconds=0):
                barrier.wait(timeout=60)  # the race is decided
                results.put((who, "held"))
                barrier.wait(timeout=60)  # hold until the other has been refused again
        except LockBusyError:
            barrier.wait(timeout=60)
            try:
                with ledger.run_lock(holder, wait_seconds=0):
                    results.put((who, "held too"))
            except LockBusyError as exc:
                results.put((who, str(exc)))
            barrier.wait(timeout=60)


def test_two_processes_race_for_the_run_lock_and_the_loser_names_the_holder(
    ledger_url: str,
) -> None:
    barrier, results = SPAWN.Barrier(2), SPAWN.Queue()
    processes = [
        SPAWN.Process(target=_lock_worker, args=(ledger_url, "run", barrier, results, who))
        for who in range(2)
    ]
    for process in processes:
        process.start()
    outcomes = dict(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    [winner] = [who for who, said in outcomes.items() if said == "held"]
    refusal = outcomes[1 - winner]
    assert "busy: held by pid" in refusal and f"run run-{winner}" in refusal
    assert str(processes[winner].pid) in refusal
    with Ledger(ledger_url) as ledger:  # released: the next run takes it at once
        with ledger.run_lock(make_holder("materialize", "next"), wait_seconds=0):
            pass
        assert ledger.lock_holder() is None


def _hold_worker(url: str, run_id: str, held: Any, release: Any) -> None:
    with Ledger(url) as ledger, ledger.run_lock(make_holder("x", run_id), wait_seconds=0):
        held.set()
        release.wait(timeout=60)


def test_run_lock_waits_then_names_the_holder(ledger_url: str) -> None:
    held, release = SPAWN.Event(), SPAWN.Event()
    holder = SPAWN.Process(target=_hold_worker, args=(ledger_url, "run-a", held, release))
    holder.start()
    try:
        assert held.wait(timeout=60)
        told: list[str] = []
        with (
            Ledger(ledger_url) as ledger,
            pytest.raises(LockBusyError, match="run run-a"),
            ledger.run_lock(
                make_holder("materialize", "run-b"),
                wait_seconds=0.3,
                poll_seconds=0.1,
                on_wait=told.append,
            ),
        ):
            pass
        assert len(told) == 1 and "run run-a" in told[0] and "waiting up to 0.3s" in told[0]
    finally:
        release.set()
        holder.join(timeout=60)
    assert holder.exitcode == 0


def test_run_lock_is_reentrant_within_a_process(ledger_url: str) -> None:
    with Ledger(ledger_url) as first, Ledger(ledger_url) as second:
        with first.run_lock(make_holder("materialize", "run-a"), wait_seconds=0):
            with second.run_lock(make_holder("step", "run-a"), wait_seconds=0):
                pass
            holder = second.lock_holder()
            assert holder is not None and holder["run_id"] == "run-a"
        assert first.lock_holder() is None
        with second.run_lock(make_holder("next", "run-b"), wait_seconds=0):
            pass


def test_the_schema_is_created_once_and_reopening_keeps_the_rows(ledger_url: str) -> None:
    with Ledger(ledger_url) as ledger:
        assert ledger.set_pointer("live", "s1", expected=None)
    with Ledger(ledger_url) as ledger:
        assert ledger.pointer("live") == "s1"


def test_redacted_drops_the_password_only() -> None:
    url = "postgresql://ann:s3cr%40t@db.internal:5432/brain?sslmode=require"
    assert redacted(url) == "postgresql://ann@db.internal:5432/brain?sslmode=require"
    assert redacted("postgresql://ann@db/brain") == "postgresql://ann@db/brain"
    assert redacted("sqlite:////srv/ledger.sqlite") == "sqlite:////srv/ledger.sqlite"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://root:pw@db/x", "unknown ledger scheme 'mysql'"),
        ("/srv/ledger.sqlite", "unknown ledger scheme '(none)'"),
        ("sqlite:///", "needs a file path"),
        ("postgresql:///brain", "needs a host"),
    ],
)
def test_a_bad_url_is_one_line_saying_what_to_write(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=r"sqlite:/|postgresql://") as caught:
        check_ledger_url(url)
    assert says in str(caught.value) and "\n" not in str(caught.value)
    assert "pw" not in str(caught.value)


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    url = "postgresql://ann:hunter2@127.0.0.1:1/brain?connect_timeout=2"
    with pytest.raises(LedgerError) as caught:
        Ledger(url)
    message = str(caught.value)
    assert "hunter2" not in message and "postgresql://ann@127.0.0.1:1/brain" in message
    assert "\n" not in message


def test_the_missing_driver_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "psycopg2", None)  # what an install without it sees
    with pytest.raises(LedgerError, match=r"brain-pipeline\[postgres\]") as caught:
        Ledger("postgresql://ann@127.0.0.1:1/brain")
    assert POSTGRES_EXTRA in str(caught.value)


AREA_DDL = """
CREATE TABLE IF NOT EXISTS area_rows (id {serial}, name TEXT NOT NULL UNIQUE);
"""


def test_an_area_keeps_its_own_tables_created_once_per_connection(ledger_url: str) -> None:
    with Ledger(ledger_url) as ledger:
        ledger.ensure_tables("area", AREA_DDL)
        ledger.ensure_tables("area", AREA_DDL)  # a second call runs nothing
        ledger.execute("INSERT INTO area_rows (name) VALUES (?)", ("first",))
    with Ledger(ledger_url) as again:
        again.ensure_tables("area", AREA_DDL)  # the table exists: kept, not recreated
        with again.transaction(write=True) as cursor:
            cursor.execute(again.sql("INSERT INTO area_rows (name) VALUES (?)"), ("second",))
        rows = again.query("SELECT id, name FROM area_rows ORDER BY id")
    assert [name for _, name in rows] == ["first", "second"]
    assert rows[0][0] < rows[1][0]
