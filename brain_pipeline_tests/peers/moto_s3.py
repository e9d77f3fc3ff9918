"""moto's standalone S3 server on loopback, driven over real HTTP by real boto3.

The server runs as a child process (`python -m moto.server -H 127.0.0.1 -p 0`) rather
than a thread in the test process: moto keeps its auth switch (`reset-auth`) and its
backends in module globals, so a separate process keeps that state away from anything
else the test session imports. The child's stderr is the werkzeug request log; a reader
thread drains it (a full pipe would stall the server) and keeps the lines, so tests can
count the requests that actually reached the server.

Usage::

    with MotoS3Server.start() as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", server.endpoint_url)
        ...
        server.reset()
"""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType

_LISTENING = re.compile(r"Running on (http://127\.0\.0\.1:\d+)")
_REQUEST_LINE = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})')
_STARTUP_TIMEOUT_S = 20.0
#: The path of the marker request `requests_settled` sends (moto's dashboard page: cheap,
#: and not an AWS action, so it never uses up the free actions of `enable_auth`).
_SETTLED_PATH = "/moto-api/?settled="
_SETTLE_TIMEOUT_S = 30.0


# Dummy credentials for the loopback server. The secret is distinctive so a test can
# prove it never surfaces in a message.
TEST_REGION = "us-east-1"
TEST_ACCESS_KEY = "TESTPUBLISHKEY000001"
TEST_SECRET = "sEcReT-never-print-me-0123456789abcdefgh"


@dataclass(frozen=True)
class LoggedRequest:
    """One line of the server's request log."""

    method: str
    path: str
    status: int


@dataclass
class MotoS3Server:
    """A running `moto.server` child process bound to 127.0.0.1 on a free port."""

    process: subprocess.Popen[str]
    endpoint_url: str
    _log: list[LoggedRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _markers: int = 0

    def __post_init__(self) -> None:
        self._arrived = threading.Condition(self._lock)  # notified per request line

    @classmethod
    def start(cls) -> MotoS3Server:
        """Launch the server and return once it listens (about 0.3 s)."""
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", "0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        listening: queue.Queue[str | None] = queue.Queue()
        server = cls(process=process, endpoint_url="")
        threading.Thread(target=server._drain, args=(listening,), daemon=True).start()
        try:
            url = listening.get(timeout=_STARTUP_TIMEOUT_S)
        except queue.Empty:
            url = None
        if url is None:
            server.stop()
            raise RuntimeError("moto server did not report its address")
        server.endpoint_url = url
        return server

    def _drain(self, listening: queue.Queue[str | None]) -> None:
        """Read stderr to the end: first the address, then one line per request."""
        assert self.process.stderr is not None
        announced = False
        for line in self.process.stderr:
            if not announced:
                address = _LISTENING.search(line)
                if address:
                    listening.put(address.group(1))
                    announced = True
                continue
            match = _REQUEST_LINE.search(line)
            if match:
                entry = LoggedRequest(match["method"], match["path"], int(match["status"]))
                with self._arrived:
                    self._log.append(entry)
                    self._arrived.notify_all()
        if not announced:
            listening.put(None)

    def stop(self) -> None:
        """Terminate the child (by its own handle) and wait for it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> MotoS3Server:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- control API -------------------------------------------------------------------

    def _post(self, path: str, body: bytes = b"", content_type: str | None = None) -> None:
        request = urllib.request.Request(self.endpoint_url + path, data=body, method="POST")
        if content_type:
            request.add_header("Content-Type", content_type)
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def reset(self) -> None:
        """Forget every bucket, object, IAM user, ... (`POST /moto-api/reset`)."""
        self._post("/moto-api/reset")

    def enable_auth(self, free_actions: int = 0) -> None:
        """Check credentials from now on, after `free_actions` unauthenticated requests.

        Unknown keys then fail with InvalidAccessKeyId, wrong secrets with
        SignatureDoesNotMatch, and IAM policies decide AccessDenied.
        """
        self._post("/moto-api/reset-auth", str(free_actions).encode(), "text/plain")

    def disable_auth(self) -> None:
        """Back to moto's default: accept any credentials."""
        self._post("/moto-api/reset-auth", b"inf", "text/plain")

    # -- request log -------------------------------------------------------------------

    def requests(self) -> list[LoggedRequest]:
        """The requests logged so far (werkzeug writes a line once it has answered)."""
        with self._lock:
            return [r for r in self._log if not r.path.startswith(_SETTLED_PATH)]

    def clear_requests(self) -> None:
        """Forget the log so far (call between tests, after `requests_settled`)."""
        with self._lock:
            self._log.clear()

    def requests_settled(self) -> list[LoggedRequest]:
        """The request log once it holds every request answered before this call.

        No quiet period to guess: werkzeug writes a request's log line before the first
        byte of its response, and the pipe keeps the order of the lines. So once the line
        of a marker request sent now has been read, every request answered earlier is in
        the log, whatever the load on the machine. (The timeout only guards a dead server.)
        """
        with self._lock:
            self._markers += 1
            marker = f"{_SETTLED_PATH}{self._markers}"
        request = urllib.request.Request(self.endpoint_url + marker, method="GET")
        with urllib.request.urlopen(request, timeout=_SETTLE_TIMEOUT_S) as response:
            response.read()
        with self._arrived:
            seen = self._arrived.wait_for(
                lambda: any(r.path == marker for r in self._log), timeout=_SETTLE_TIMEOUT_S
            )
        if not seen:
            raise RuntimeError("the moto server answered but its request log stopped")
        return self.requests()


@contextmanager
def running_moto_s3() -> Iterator[MotoS3Server]:
    """Context manager form for fixtures: start, yield, always stop."""
    server = MotoS3Server.start()
    try:
        yield server
    finally:
        server.stop()


def deny_writes(bucket: str, *keys: str) -> None:
    """A bucket policy refusing s3:PutObject (so CopyObject too) on `keys`: moto enforces
    bucket policies with authentication off, so this is a real refusal by the peer."""
    import json

    import boto3

    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:PutObject",
                "Resource": [f"arn:aws:s3:::{bucket}/{key}" for key in keys],
            }
        ],
    }
    boto3.client("s3").put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
