"""One run at a time per ledger, held for the run, not per step process.

A lease row (table `run_lease`, this module's area of the ledger) names the run that
holds the ledger: its run id and a holder description (pid, host, run id, command,
since). It is read and written only under the ledger's own run lock (`Ledger.run_lock`:
the OS lock beside a SQLite ledger, a PostgreSQL advisory lock), so two claimants never
interleave. A claimant takes the lease when it is free, already its run's (a step process
of the same run goes on), held by a process-scoped holder whose process is gone (it got
the ledger's lock, which dies with its holder), or held by a run that `finished` says is
over (the Dagster instance's run status, asked by the caller: this module imports no
Dagster). Otherwise it waits up to `wait_seconds` and raises `LockBusyError` naming the
holder.

Two ways to hold it:

* `spans_run=True` (the CLI, an in-process run's resource, `gc`, the skip's look): the
  ledger's lock is kept for the block and the lease is cleared on the way out;
* `spans_run=False` (a step process of a multiprocess run): the lease is written and the
  ledger's lock let go at once, so the run's other step processes (in parallel too) go
  on; the lease stays until the run is over (`finished`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from brain_pipeline.state.ledger import Ledger, redacted
from brain_pipeline.state.lock import LockBusyError, publish_root_lock, reentrant, wait_for

_DDL = """
CREATE TABLE IF NOT EXISTS run_lease (
  name TEXT PRIMARY KEY, run_id TEXT, spans_run INTEGER NOT NULL, holder TEXT NOT NULL)
"""
_NAME = "run"


def _current(ledger: Ledger) -> tuple[str | None, bool, dict[str, object]] | None:
    ledger.ensure_tables("run_lease", _DDL)
    rows = ledger.query("SELECT run_id, spans_run, holder FROM run_lease WHERE name = ?", (_NAME,))
    if not rows:
        return None
    run_id, spans, holder = rows[0]
    return run_id, bool(spans), json.loads(holder)


def lease_holder(ledger: Ledger) -> dict[str, object] | None:
    """Who holds the run lease now (as they described themselves), None when free."""
    current = _current(ledger)
    return current[2] if current is not None else None


def _claim(
    ledger: Ledger, run_id: str | None, finished: Callable[[str], bool] | None
) -> str | None:
    """Under the ledger's lock: "take" when `run_id` may take the lease now, "ours"
    when its run holds it already (another step process of it), None to wait."""
    current = _current(ledger)
    if current is None:
        return "take"
    held_by, spans, _holder = current
    if run_id is not None and held_by == run_id:
        return "ours"
    if spans:
        return "take"  # its holder kept the ledger's lock; we have it, so it is gone
    return "take" if held_by is None or (finished is not None and finished(held_by)) else None


def _write(
    ledger: Ledger, run_id: str | None, spans_run: bool, holder: Mapping[str, object]
) -> None:
    ledger.execute(
        "INSERT INTO run_lease VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
        "run_id = excluded.run_id, spans_run = excluded.spans_run, holder = excluded.holder",
        (_NAME, run_id, int(spans_run), json.dumps(dict(holder), sort_keys=True)),
    )


@contextmanager
def run_lease(
    ledger: Ledger,
    *,
    run_id: str | None,
    holder: Mapping[str, object],
    wait_seconds: float,
    finished: Callable[[str], bool] | None = None,
    spans_run: bool = True,
    on_wait: Callable[[str], None] | None = None,
    poll_seconds: float = 0.25,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[None]:
    """Hold the ledger's run lease for the block (see the module); re-entrant within a
    process (a step of the run this process holds it for goes on)."""
    where = redacted(ledger.url)

    @contextmanager
    def take() -> Iterator[None]:
        ledger.ensure_tables("run_lease", _DDL)
        kept: list[AbstractContextManager[None]] = []  # the ledger's lock, when spans_run
        told = False

        def say(message: str) -> None:  # once, whether the lock or the lease is waited for
            nonlocal told
            if on_wait is not None and not told:
                told = True
                on_wait(message)

        def attempt(remaining: float) -> bool:
            lock = ledger.run_lock(
                holder, wait_seconds=remaining, poll_seconds=poll_seconds, on_wait=say
            )
            try:
                lock.__enter__()
            except LockBusyError:
                return False
            taken = False
            try:
                claim = _claim(ledger, run_id, finished)
                if claim == "take":
                    _write(ledger, run_id, spans_run, holder)
                taken = claim is not None
            finally:
                if taken and spans_run:
                    kept.append(lock)
                else:
                    lock.__exit__(None, None, None)
            return taken

        wait_for(
            attempt,
            label=f"the ledger {where}",
            holder=lambda: lease_holder(ledger) or ledger.lock_holder(),
            wait_seconds=wait_seconds,
            on_wait=say,
            poll_seconds=poll_seconds,
            clock=clock,
            sleep=sleep,
        )
        if not spans_run:
            yield
            return
        try:
            yield
        finally:
            try:
                ledger.execute("DELETE FROM run_lease WHERE name = ?", (_NAME,))
            finally:
                kept[0].__exit__(None, None, None)

    with reentrant(("run lease", where), take):
        yield


@contextmanager
def hold_run_locks(
    ledger: Ledger,
    publish_root: Path | str | None,
    *,
    run_id: str | None,
    holder: Mapping[str, object],
    wait_seconds: float,
    finished: Callable[[str], bool] | None = None,
    spans_run: bool = True,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """The locks of one run: the ledger's run lease, then (when it publishes) the publish
    root's OS lock. Always in that order, whoever takes them, so two runs never deadlock."""
    with run_lease(
        ledger,
        run_id=run_id,
        holder=holder,
        wait_seconds=wait_seconds,
        finished=finished,
        spans_run=spans_run,
        on_wait=on_wait,
    ):
        if publish_root is None:
            yield
            return
        with publish_root_lock(
            publish_root, wait_seconds=wait_seconds, holder=holder, on_wait=on_wait
        ):
            yield
