"""Misbehaving network peers on 127.0.0.1 for S3 fault tests.

- `SilentServer` accepts TCP connections and never answers (a hung endpoint or a
  black-holing load balancer): the client's read timeout and deadline are what end it.
- `CuttingProxy` forwards to a real server (moto) and cuts every connection once a given
  number of request bytes has passed through, and refuses to forward anything after
  that: a network that drops mid-upload and stays down.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


class _Listener:
    """A loopback listening socket with an accept loop on a daemon thread."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = int(self._sock.getsockname()[1])
        self._stop = threading.Event()
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        self.accepted = 0
        threading.Thread(target=self._accept_loop, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                self._held.append(conn)
            self.handle(conn)

    def handle(self, conn: socket.socket) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._sock.close()
        with self._lock:
            for conn in self._held:
                with contextlib.suppress(OSError):
                    conn.close()

    def __enter__(self) -> _Listener:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SilentServer(_Listener):
    """Accepts every connection, reads nothing, answers nothing."""

    def handle(self, conn: socket.socket) -> None:
        pass  # held open until close()


class CuttingProxy(_Listener):
    """Forward to `upstream_port`; cut everything after `cut_after` request bytes."""

    def __init__(self, upstream_port: int, cut_after: int) -> None:
        self.upstream_port = upstream_port
        self.cut_after = cut_after
        self.forwarded = 0
        self.cut = threading.Event()
        super().__init__()

    def handle(self, conn: socket.socket) -> None:
        if self.cut.is_set():
            conn.close()
            return
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        with self._lock:
            self._held.append(upstream)
        threading.Thread(target=self._pump_up, args=(conn, upstream), daemon=True).start()
        threading.Thread(target=self._pump_down, args=(upstream, conn), daemon=True).start()

    def _sever(self, *socks: socket.socket) -> None:
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _pump_up(self, client: socket.socket, upstream: socket.socket) -> None:
        """Client -> server, counting bytes; past the budget, cut both sides."""
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                with self._lock:
                    budget = self.cut_after - self.forwarded
                    allowed = data[: max(0, budget)]
                    self.forwarded += len(allowed)
                if allowed:
                    upstream.sendall(allowed)
                if len(allowed) < len(data) or self.cut.is_set():
                    self.cut.set()
                    break
        except OSError:
            pass
        if self.cut.is_set():
            self._sever(client, upstream)

    def _pump_down(self, upstream: socket.socket, client: socket.socket) -> None:
        try:
            while not self.cut.is_set():
                data = upstream.recv(65536)
                if not data:
                    break
                client.sendall(data)
        except OSError:
            pass
        self._sever(client, upstream)
