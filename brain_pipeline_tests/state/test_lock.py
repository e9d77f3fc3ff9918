"""The Dagster-free OS lock: one holder, a named holder for whoever waits, kill -9 safe."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Ledger, sqlite_url
from brain_pipeline.state.lock import (
    LockBusyError,
    acquire_lock,
    make_holder,
    publish_lock_path,
    publish_root_lock,
    read_holder,
)
from brain_pipeline_tests.fake_time import FakeTime

REPO = Path(__file__).resolve().parents[2]


def ledger_lock_path(build: Path) -> Path:
    """The OS lock of a build directory's default (SQLite) ledger: what a run holds
    while it holds the ledger's run lease (state.run_lease)."""
    ledger = StateLayout.of(build).ledger
    return ledger.with_name(ledger.name + ".lock")


class Holder:
    """A child process holding a lock (see holder_child.py)."""

    def __init__(self, path: Path, run_id: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "brain_pipeline_tests.locks.holder_child", str(path), run_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        line = self.proc.stdout.readline()
        assert line.startswith("held "), line
        self.pid = int(line.split()[1])

    def release(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "released"
        self.proc.wait()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for holder in started:
        holder.close()




def test_the_holder_is_described_while_held_and_cleared_after(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "build.lock"
    holder = make_holder("brain-pipeline materialize", "run-1")
    with acquire_lock(path, wait_seconds=0, holder=holder) as held:
        assert held == path.resolve()
        described = read_holder(path)
        assert described == holder
        assert described["pid"] == os.getpid()
        assert described["host"] == socket.gethostname()
        assert str(described["since"]).endswith("Z")
    assert path.exists() and read_holder(path) is None  # the file stays, the text goes


def test_a_second_process_fails_at_once_naming_the_holder(
    tmp_path: Path, holders: list[Holder]
) -> None:
    from brain_pipeline.state.run_lease import run_lease

    build = tmp_path / "build"
    holder = Holder(ledger_lock_path(build), "run-abc-123")
    holders.append(holder)
    url = sqlite_url(StateLayout.of(build).ledger)
    with (
        Ledger(url) as ledger,
        pytest.raises(LockBusyError) as caught,
        run_lease(ledger, run_id=None, wait_seconds=0, holder=make_holder("second")),
    ):
        pytest.fail("acquired a lock another process holds")
    message = str(caught.value)
    assert "\n" not in message
    assert f"the ledger {url} is busy" in message
    assert f"pid {holder.pid} on host {socket.gethostname()}" in message
    assert "run run-abc-123" in message and "since 20" in message
    assert caught.value.holder["run_id"] == "run-abc-123"


def test_waiting_polls_on_the_injected_clock_then_gives_up(
    tmp_path: Path, holders: list[Holder]
) -> None:
    path = tmp_path / "x.lock"
    holders.append(Holder(path, "run-w"))
    fake = FakeTime()
    notes: list[str] = []
    with (
        pytest.raises(LockBusyError) as caught,
        acquire_lock(
            path,
            wait_seconds=1.0,
            holder=make_holder("waiter"),
            clock=fake.clock,
            sleep=fake.sleep,
            poll_seconds=0.3,
            on_wait=notes.append,
            label="the thing",
        ),
    ):
        pytest.fail("acquired a held lock")
    # 0.3 + 0.3 + 0.3 + the 0.1 left: the wait is exactly the configured one.
    assert fake.sleeps == pytest.approx([0.3, 0.3, 0.3, 0.1])
    assert len(notes) == 1 and notes[0].startswith("waiting up to 1s for the thing: held by pid")
    assert "gave up after waiting 1s" in str(caught.value)


def test_a_waiter_gets_the_lock_when_the_holder_lets_go(
    tmp_path: Path, holders: list[Holder]
) -> None:
    path = tmp_path / "x.lock"
    holder = Holder(path, "run-first")
    holders.append(holder)
    fake = FakeTime()

    def sleep(seconds: float) -> None:
        fake.sleep(seconds)
        if len(fake.sleeps) == 2:
            holder.release()  # the first run finishes while we wait

    with acquire_lock(
        path,
        wait_seconds=600,
        holder=make_holder("second", "run-second"),
        clock=fake.clock,
        sleep=sleep,
    ):
        assert read_holder(path)["run_id"] == "run-second"  # type: ignore[index]
    assert len(fake.sleeps) == 2


def test_a_holder_killed_with_sigkill_releases_the_lock(
    tmp_path: Path, holders: list[Holder]
) -> None:
    root = tmp_path / "agent"
    holder = Holder(publish_lock_path(root), "run-killed")
    holders.append(holder)
    with (
        pytest.raises(LockBusyError),
        publish_root_lock(root, wait_seconds=0, holder=make_holder("x")),
    ):
        pass
    holder.kill()
    # The kernel dropped the lock with the process; its stale description is replaced.
    with publish_root_lock(root, wait_seconds=0, holder=make_holder("after", "run-next")):
        assert read_holder(publish_lock_path(root))["run_id"] == "run-next"  # type: ignore[index]
    assert publish_lock_path(root) == root.resolve() / ".brain-publish.lock"


def test_the_lock_is_reentrant_in_one_process_and_released_by_the_outermost(
    tmp_path: Path,
) -> None:
    path = tmp_path / "x.lock"
    with acquire_lock(path, wait_seconds=0, holder=make_holder("outer", "run-outer")):
        with acquire_lock(path, wait_seconds=0, holder=make_holder("inner")):
            pass
        # Still ours after the inner block: another process is refused.
        probe = subprocess.run(
            [sys.executable, "-m", "brain_pipeline_tests.locks.holder_child", str(path), "p"],
            input="\n",
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert probe.returncode != 0 and "LockBusyError" in probe.stderr
        assert "run run-outer" in probe.stderr
    probe = subprocess.run(
        [sys.executable, "-m", "brain_pipeline_tests.locks.holder_child", str(path), "p"],
        input="\n",
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert probe.returncode == 0, probe.stderr
