"""The ledger's run lease: one run at a time across hosts, held for a run, not per step
process. Each test runs on SQLite and on a real PostgreSQL server (`ledger_url`)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from brain_pipeline.state.ledger import Ledger
from brain_pipeline.state.lock import LockBusyError, make_holder
from brain_pipeline.state.run_lease import lease_holder, run_lease

REPO = Path(__file__).resolve().parents[2]


def _step(ledger: Ledger, run_id: str, **options: object) -> None:
    """What a step process of a multiprocess run does: take the lease for its run, let go
    of the ledger's lock at once, leave the lease to the run."""
    with run_lease(
        ledger,
        run_id=run_id,
        holder=make_holder("step", run_id),
        wait_seconds=0,
        spans_run=False,
        **options,  # type: ignore[arg-type]
    ):
        pass


def test_a_step_process_leaves_the_lease_to_its_run(ledger_url: str) -> None:
    with Ledger(ledger_url) as ledger, Ledger(ledger_url) as other:
        _step(ledger, "run-a")
        first = lease_holder(ledger)
        assert first is not None and first["run_id"] == "run-a"
        _step(other, "run-a")  # the run's next step process goes on, and writes nothing
        assert lease_holder(ledger) == first
        with pytest.raises(LockBusyError) as caught:
            _step(other, "run-b", finished=lambda run_id: False)
        message = str(caught.value)
        assert "run run-a" in message and f"on host {socket.gethostname()}" in message
        assert f"pid {os.getpid()}" in message
        assert lease_holder(other) == first  # the waiter changed nothing


def test_a_run_that_is_over_gives_the_lease_up(ledger_url: str) -> None:
    with Ledger(ledger_url) as ledger:
        _step(ledger, "run-a")
        over: set[str] = set()
        with pytest.raises(LockBusyError):
            _step(ledger, "run-b", finished=over.__contains__)
        over.add("run-a")  # the Dagster instance says run-a ended
        _step(ledger, "run-b", finished=over.__contains__)
        holder = lease_holder(ledger)
        assert holder is not None and holder["run_id"] == "run-b"


def test_a_command_holds_it_for_its_block_and_clears_it(ledger_url: str) -> None:
    with Ledger(ledger_url) as ledger, Ledger(ledger_url) as other:
        with run_lease(
            ledger, run_id="run-c", holder=make_holder("cli", "run-c"), wait_seconds=0
        ):
            _step(ledger, "run-c")  # its own run's step, in its process, goes on
            holder = lease_holder(other)
            assert holder is not None and holder["command"] == "cli"
        assert lease_holder(ledger) is None
        with run_lease(other, run_id=None, holder=make_holder("next"), wait_seconds=0):
            holder = lease_holder(other)
            assert holder is not None and holder["command"] == "next"


HOLDER = """
import sys, time
from brain_pipeline.state.ledger import Ledger
from brain_pipeline.state.lock import make_holder
from brain_pipeline.state.run_lease import run_lease
ledger = Ledger(sys.argv[1])
with run_lease(ledger, run_id="run-k", holder=make_holder("killed", "run-k"), wait_seconds=0):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_command_killed_with_sigkill_leaves_the_lease_to_the_next(ledger_url: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, ledger_url],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with Ledger(ledger_url) as ledger:
            with pytest.raises(LockBusyError, match="run run-k"):
                _step(ledger, "run-n", finished=lambda run_id: False)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            left = lease_holder(ledger)
            assert left is not None and left["run_id"] == "run-k"  # the row stays...
            _step(ledger, "run-n", finished=lambda run_id: False)  # ...and is taken over
            holder = lease_holder(ledger)
            assert holder is not None and holder["run_id"] == "run-n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
