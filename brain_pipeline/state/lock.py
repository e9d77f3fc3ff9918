"""OS locks that name their holder: the publish root's, the SQLite ledger's run lock
(`state.ledger`, under `state.run_lease`), the instance's creation lock.

Why `fcntl.flock` on a lock file: the kernel drops the lock when the holder's last
descriptor closes, and that includes `kill -9` and a power cut, so a crashed run never
leaves a stale lock that a person has to find and delete. The lock file itself is never
removed (removing it would let a later process lock a new inode while an older one still
holds the old one); it only carries a description of its current holder (pid, run id,
host, command, since), rewritten in place by each acquirer, so that whoever has to wait
can say who it waits for. That description is advisory text, which is why it is written
in place rather than through `utils.atomic` (the inode must stay the one locked).

A lock is re-entrant within one process: a step that takes the ledger's run lock
inside a CLI run that already holds it proceeds instead of waiting for itself.

No Dagster import: the CLI, the publishing core and the assets all use this module.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PUBLISH_LOCK_NAME = ".brain-publish.lock"
DEFAULT_POLL_SECONDS = 0.25

# what is held (a lock file, a ledger) -> (pid that holds it, depth): the re-entrancy
# book of this process (`reentrant`).
_held: dict[Hashable, tuple[int, int]] = {}
_held_guard = threading.Lock()


class LockBusyError(RuntimeError):
    """Another process held a lock (or the ledger's run lease) for longer than we were
    prepared to wait.

    The message is one line naming the holder (pid, run id, host, since) and what is
    locked (`label`; `path`: the lock file, when there is one).
    """

    def __init__(
        self,
        label: str,
        holder: Mapping[str, object] | None,
        waited: float,
        path: Path | None = None,
    ) -> None:
        self.path = path
        self.holder = dict(holder or {})
        self.waited = waited
        lock_file = f", lock file {path}" if path is not None else ""
        super().__init__(
            f"{label} is busy: held by {describe_holder(holder)}; gave up after waiting "
            f"{round(waited, 2):g}s (locks.wait_seconds{lock_file})"
        )


def publish_lock_path(publish_root: Path | str) -> Path:
    """The lock that makes one process at a time the writer of a publish root."""
    return Path(publish_root).expanduser().resolve() / PUBLISH_LOCK_NAME


def make_holder(
    command: str | None = None,
    run_id: str | None = None,
    *,
    now: Callable[[], float] = time.time,
) -> dict[str, object]:
    """Describe this process as a lock holder: pid, host, run id, command, since (UTC)."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "run_id": run_id,
        "command": command if command is not None else " ".join(sys.argv) or "python",
        "since": datetime.fromtimestamp(now(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def describe_holder(holder: Mapping[str, object] | None) -> str:
    """`pid 123 on host h (run 4f2a..., since 2026-...Z, `brain-pipeline materialize`)`."""
    if not holder:
        return "another process (it has not described itself yet)"
    parts = [f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}"]
    details = []
    if holder.get("run_id"):
        details.append(f"run {holder['run_id']}")
    if holder.get("since"):
        details.append(f"since {holder['since']}")
    if holder.get("command"):
        details.append(f"`{holder['command']}`")
    if details:
        parts.append(f"({', '.join(details)})")
    return " ".join(parts)


def read_holder(path: Path | str) -> dict[str, object] | None:
    """The holder description in a lock file; None when absent, empty or half-written."""
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _open_lock_file(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)  # less the umask


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _write_holder(fd: int, holder: Mapping[str, object]) -> None:
    data = (json.dumps(dict(holder), sort_keys=True) + "\n").encode("utf-8")
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


@contextmanager
def reentrant(key: Hashable, take: Callable[[], AbstractContextManager[object]]) -> Iterator[None]:
    """Hold what `take()` takes for the block, unless this process holds `key` already:
    then the block runs at once and the outermost holder keeps it. The one re-entrancy
    rule of every lock here, so a step inside a run that holds one goes on instead of
    waiting for itself. Keyed by process too: a forked child holds nothing yet."""
    pid = os.getpid()
    with _held_guard:
        entry = _held.get(key)
        depth = entry[1] if entry is not None and entry[0] == pid else 0
        if depth:
            _held[key] = (pid, depth + 1)
    if not depth:
        with take():
            with _held_guard:
                _held[key] = (pid, 1)
            try:
                yield
            finally:
                with _held_guard:
                    del _held[key]
        return
    try:
        yield
    finally:
        with _held_guard:
            _held[key] = (pid, _held[key][1] - 1)


def wait_for(
    attempt: Callable[[float], bool],
    *,
    label: str,
    holder: Callable[[], Mapping[str, object] | None],
    wait_seconds: float,
    on_wait: Callable[[str], None] | None = None,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    path: Path | None = None,
) -> None:
    """Call `attempt(remaining seconds)` until it takes what `label` names, polling every
    `poll_seconds` for up to `wait_seconds` (0: one attempt), telling `on_wait` once who
    is being waited for (`holder()`), then raise `LockBusyError` naming them.

    The one waiting rule of every lock here (the OS lock, the PostgreSQL advisory lock,
    the run lease), so each says the same while it waits and when it gives up.
    """
    started = clock()
    announced = False
    while not attempt(max(0.0, wait_seconds - (clock() - started))):
        waited = clock() - started
        if waited >= wait_seconds:
            raise LockBusyError(label, holder(), waited, path)
        if not announced and on_wait is not None:
            on_wait(
                f"waiting up to {wait_seconds:g}s for {label}: held by {describe_holder(holder())}"
            )
            announced = True
        sleep(max(0.0, min(poll_seconds, wait_seconds - waited)))


@contextmanager
def acquire_lock(
    path: Path | str,
    *,
    wait_seconds: float,
    holder: Mapping[str, object],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    on_wait: Callable[[str], None] | None = None,
    label: str | None = None,
) -> Iterator[Path]:
    """Hold the exclusive lock at `path` for the duration of the `with` block.

    When another process holds it, poll every `poll_seconds` for up to `wait_seconds`
    (0: do not wait), telling `on_wait` once who is being waited for, then raise
    `LockBusyError` naming the holder. `clock` and `sleep` are injectable so tests decide
    how time passes. `label` names what is locked in messages ("publish root /x").
    Re-entrant within one process.
    """
    lock_path = Path(path).expanduser().resolve()

    @contextmanager
    def take() -> Iterator[None]:
        fd = _open_lock_file(lock_path)
        try:
            wait_for(
                lambda _remaining: _try_flock(fd),
                label=label or str(lock_path),
                holder=lambda: read_holder(lock_path),
                wait_seconds=wait_seconds,
                on_wait=on_wait,
                poll_seconds=poll_seconds,
                clock=clock,
                sleep=sleep,
                path=lock_path,
            )
            try:
                _write_holder(fd, holder)
                yield
            finally:
                # Clear the description while still holding the lock, so nobody is ever
                # told to wait for a holder that has gone (a crashed holder's text stays,
                # and is overwritten by the next acquirer).
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    with reentrant(lock_path, take):
        yield lock_path


def publish_root_lock(
    publish_root: Path | str, *, wait_seconds: float, holder: Mapping[str, object], **options: Any
) -> AbstractContextManager[Path]:
    """`acquire_lock` on the publish root's lock, labelled for messages."""
    return acquire_lock(
        publish_lock_path(publish_root),
        wait_seconds=wait_seconds,
        holder=holder,
        label=f"publish root {Path(publish_root).expanduser().resolve()}",
        **options,
    )
