"""A run's message is claimed once across workers: the delivery lease and record live in
the ledger (`publishing.run_alerts`), on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import threading

from brain_pipeline.publishing.run_alerts import (
    RunDelivery,
    pending_deliveries,
    read_delivery,
    run_lease,
    write_delivery,
)
from brain_pipeline.state.ledger import Ledger


def test_one_of_many_workers_racing_claims_a_runs_message(ledger_url: str) -> None:
    workers = 6
    start = threading.Barrier(workers)
    won: list[int] = []

    def deliverer(number: int) -> None:
        with Ledger(ledger_url) as ledger:  # a worker's own connection
            start.wait()
            with run_lease(ledger, "run-1") as held:
                if held and read_delivery(ledger, "run-1") is None:
                    won.append(number)
                    write_delivery(
                        ledger, RunDelivery("run-1", "blocked", "pending", None, 1.0, next_at=1.0)
                    )

    threads = [threading.Thread(target=deliverer, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1, won
    with Ledger(ledger_url) as other:  # what any other worker sees afterwards
        record = read_delivery(other, "run-1")
        assert record is not None and record.state == "pending"
        assert pending_deliveries(other) == ["run-1"]
        with run_lease(other, "run-1") as held:
            assert held  # given back by the one that sent
