"""One overall deadline for one attempt at a network exchange (a webhook POST, an e-mail).

A socket timeout bounds each read, not the exchange: a peer that sends one byte a second
holds a client with a 2 s timeout for as long as it keeps trickling. `Deadline` bounds
the whole attempt. Every socket the attempt opens is handed to `watch()`; when the
deadline passes, a timer shuts those connections down, so whatever read or write is
blocked returns at once, and the attempt ends as `DeadlineExceeded`. A timer thread
rather than a signal: the notification sensors run in worker threads, where signals
cannot be used.

The connection is shut down through a duplicate of its descriptor, taken when it is
watched: TLS (HTTPS, SMTP STARTTLS) detaches the original socket object when it wraps
the connection, and shutting down a duplicate ends the one connection they share.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol


class DeadlineExceeded(TimeoutError):
    """The attempt was abandoned at its deadline (the peer was still connected)."""


class Cancel(Protocol):
    def cancel(self) -> None: ...


StartTimer = Callable[[float, Callable[[], None]], Cancel]
"""Run the callable once after the given seconds, unless cancelled first."""


def thread_timer(seconds: float, expire: Callable[[], None]) -> Cancel:
    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


class Deadline:
    """`with Deadline(seconds) as deadline:` one attempt; `deadline.watch(sock)` for each
    connection it opens; `deadline.remaining()` to cap a connect's own timeout.

    Leaving the block after the deadline passed raises `DeadlineExceeded` in place of
    whatever the shut-down connection raised (a closed connection, a short read), and
    also when nothing was raised: a shut-down connection reads as the end of the answer,
    so a status line cut short (`HTTP/1.1 200 ...` with no end) parses as a success that
    the peer never completed. (An answer that completed in the instant the deadline
    passed is then tried again: the payload's run id lets a receiver drop the repeat.)"""

    def __init__(
        self,
        seconds: float,
        *,
        start_timer: StartTimer = thread_timer,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seconds = seconds
        self._start_timer = start_timer
        self._clock = clock
        self._lock = threading.Lock()
        self._watched: list[socket.socket] = []
        self._expired = False
        self._ends_at = 0.0
        self._timer: Cancel | None = None

    def __enter__(self) -> Deadline:
        self._ends_at = self._clock() + self.seconds
        self._timer = self._start_timer(self.seconds, self.expire)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            watched, self._watched = self._watched, []
        for duplicate in watched:
            duplicate.close()
        if self._expired and not isinstance(exc, DeadlineExceeded):
            raise DeadlineExceeded(
                f"no complete answer within the {self.seconds:g} s deadline"
            ) from None

    def remaining(self) -> float:
        """Seconds left (never below a millisecond: a timeout of 0 means non-blocking)."""
        return max(self._ends_at - self._clock(), 0.001)

    def watch(self, sock: socket.socket) -> None:
        """Shut `sock`'s connection down when the deadline passes (at once if it has)."""
        duplicate = sock.dup()
        with self._lock:
            self._watched.append(duplicate)
            expired = self._expired
        if expired:
            _shut(duplicate)

    def expire(self) -> None:
        """The deadline passed: end every watched connection (the timer calls this)."""
        with self._lock:
            self._expired = True
            watched = list(self._watched)
        for duplicate in watched:
            _shut(duplicate)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed by the peer or by the attempt
        sock.shutdown(socket.SHUT_RDWR)
