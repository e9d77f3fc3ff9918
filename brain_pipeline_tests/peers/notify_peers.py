"""Real peers for notifications: an HTTP server that takes webhook POSTs, and a real SMTP
server (aiosmtpd) with AUTH, both on 127.0.0.1 on free ports, started by the test.

Usage::

    with WebhookServer.start() as hook, SmtpServer.start(user, password) as smtp:
        ...  # hook.url, smtp.port
        hook.bodies, smtp.messages
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class WebhookServer:
    """Records the JSON body and path of every POST it receives (answers 200)."""

    server: ThreadingHTTPServer
    bodies: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    @classmethod
    @contextmanager
    def start(
        cls, port: int = 0, answer_when: threading.Event | None = None
    ) -> Iterator[WebhookServer]:
        """`port`: a fixed one (an endpoint that was down coming back where it was);
        `answer_when`: each POST is recorded on arrival but answered only once it is set
        (a slow endpoint, mid-delivery, for a race)."""
        received: list[dict[str, Any]] = []
        paths: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length", "0"))
                received.append(json.loads(self.rfile.read(length)))
                paths.append(self.path)
                if answer_when is not None:
                    answer_when.wait(30)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield cls(server, received, paths)
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class SmtpServer:
    """aiosmtpd's SMTP server requiring AUTH with one user; keeps every message."""

    port: int
    messages: list[Message] = field(default_factory=list)
    logins: list[str] = field(default_factory=list)

    @classmethod
    @contextmanager
    def start(cls, user: str, password: str) -> Iterator[SmtpServer]:
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult, LoginPassword

        peer = cls(free_port())

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
                peer.messages.append(message_from_bytes(envelope.content))
                return "250 OK"

        def authenticator(*args: Any) -> Any:
            auth_data = args[-1]  # (server, session, envelope, mechanism, auth_data)
            ok = isinstance(auth_data, LoginPassword) and (
                auth_data.login.decode() == user and auth_data.password.decode() == password
            )
            if ok:
                peer.logins.append(user)
            return AuthResult(success=ok)

        controller = Controller(
            Handler(),
            hostname="127.0.0.1",
            port=peer.port,
            authenticator=authenticator,
            auth_required=True,
            auth_require_tls=False,
        )
        controller.start()
        try:
            yield peer
        finally:
            controller.stop()
