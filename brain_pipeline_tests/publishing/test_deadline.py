"""One overall deadline per notification attempt: a peer that trickles its answer one byte
at a time (each read within the socket timeout) is abandoned at the deadline, for the
webhook and for SMTP. The servers here are real sockets on loopback; what is asserted
is who ended the exchange (the server sees the client close while it is still
trickling), never how long anything took."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from brain_pipeline.config import EmailSettings, NotifySettings
from brain_pipeline.publishing.deadline import Deadline, DeadlineExceeded
from brain_pipeline.publishing.run_alerts import Delivery, Event, Message, build_message, deliver

TRICKLE_BYTES = 400
"""One byte per `PAUSE`: 20 s of trickle, ten times the deadline the tests set."""
PAUSE = 0.05
DEADLINE = 2.0
"""Long enough for a loaded machine (several test processes on two cores) to connect and
send the request before it passes: what the tests assert is who ended the exchange."""


@dataclass
class Trickle:
    """A server that answers every connection one byte per PAUSE, up to TRICKLE_BYTES,
    and records whether the client closed the connection before the trickle ended."""

    port: int
    done: threading.Event = field(default_factory=threading.Event)
    sent: int = 0
    closed_by_client: bool = False


@contextmanager
def trickle_server(greeting: bytes, reads_request: bool) -> Iterator[Trickle]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    peer = Trickle(listener.getsockname()[1])
    stop = threading.Event()

    def client_closed(conn: socket.socket) -> bool:
        # poll, not select: a long test process may hold descriptors past select's 1024
        poller = select.poll()
        poller.register(conn, select.POLLIN)
        return bool(poller.poll(0)) and conn.recv(65536) == b""

    def serve() -> None:
        try:
            exchange()
        finally:  # whatever ended it, the test reads what the server saw
            peer.done.set()

    def exchange() -> None:
        conn, _ = listener.accept()
        with conn:
            if reads_request:  # an HTTP request: headers, then a short JSON body
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:  # the client left before its request was complete
                        peer.closed_by_client = True
                        return
                    data += chunk
            stream = greeting + b"a" * TRICKLE_BYTES
            try:
                for byte in stream[: len(greeting) + TRICKLE_BYTES]:
                    if stop.wait(PAUSE) or client_closed(conn):
                        peer.closed_by_client = not stop.is_set()
                        break
                    conn.sendall(bytes([byte]))
                    peer.sent += 1
            except (BrokenPipeError, ConnectionResetError):
                peer.closed_by_client = True

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield peer
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=10)


def _message() -> Message:
    return build_message(Event("failed", "run-1234", "__ASSET_JOB", "corpus failed: x"))


def _abandoned(peer: Trickle, send: Callable[[], Delivery]) -> str:
    (result,) = send().results
    assert not result.ok and result.attempts == 1
    assert peer.done.wait(timeout=30), f"the server never saw the client leave: {result}"
    assert peer.closed_by_client
    assert peer.sent < TRICKLE_BYTES  # abandoned mid-trickle, not served to the end
    return str(result.detail)


def test_a_trickling_webhook_is_abandoned_at_the_deadline() -> None:
    # A status line whose reason phrase never ends: cut at the deadline, it would parse as a
    # 200 with no headers, which is no answer.
    with trickle_server(b"HTTP/1.1 200 ", reads_request=True) as peer:
        settings = NotifySettings(
            webhook_url=f"http://127.0.0.1:{peer.port}/hook", timeout_seconds=DEADLINE,
            max_attempts=1,
        )
        detail = _abandoned(peer, lambda: deliver(settings, _message(), sleep=lambda s: None))
    assert detail == "DeadlineExceeded: no complete answer within the 2 s deadline"


def test_a_trickling_smtp_banner_is_abandoned_at_the_deadline() -> None:
    with trickle_server(b"220 ", reads_request=False) as peer:
        email = EmailSettings(host="127.0.0.1", port=peer.port, starttls=False,
                              sender="a@example", recipients=["b@example"])
        settings = NotifySettings(email=email, timeout_seconds=DEADLINE, max_attempts=1)
        detail = _abandoned(
            peer, lambda: deliver(settings, _message(), env={}, sleep=lambda s: None)
        )
    assert detail == "DeadlineExceeded: no complete answer within the 2 s deadline"


class ManualTimer:
    """An injected timer: the test says when the deadline passes."""

    def __init__(self) -> None:
        self.expire: Callable[[], None] | None = None
        self.cancelled = False

    def __call__(self, seconds: float, expire: Callable[[], None]) -> ManualTimer:
        self.expire = expire
        return self

    def cancel(self) -> None:
        self.cancelled = True


def test_the_deadline_ends_a_blocked_read_on_every_watched_connection() -> None:
    timer = ManualTimer()
    ours, theirs = socket.socketpair()
    expired = pytest.raises(DeadlineExceeded, match="within the 2 s deadline")
    with ours, theirs, expired, Deadline(2, start_timer=timer) as deadline:
        deadline.watch(ours)
        theirs.sendall(b"x")
        assert ours.recv(1) == b"x"  # a live connection until the deadline
        assert timer.expire is not None
        timer.expire()
        assert ours.recv(1) == b""  # the read returns at once: shut down
        assert theirs.recv(1) == b""  # and the peer sees the client leave
        raise ConnectionError("what the blocked client would have raised")
    assert timer.cancelled


def test_an_attempt_that_ends_in_time_keeps_its_own_error() -> None:
    timer = ManualTimer()
    with pytest.raises(ConnectionRefusedError), Deadline(2, start_timer=timer):
        raise ConnectionRefusedError("refused")
    assert timer.cancelled


def test_a_connection_watched_after_the_deadline_is_shut_at_once() -> None:
    timer = ManualTimer()
    ours, theirs = socket.socketpair()
    expired = pytest.raises(DeadlineExceeded)  # nothing raised inside: still not an answer
    with ours, theirs, expired, Deadline(2, start_timer=timer) as deadline:
        assert timer.expire is not None
        timer.expire()
        deadline.watch(ours)
        assert theirs.recv(1) == b""
