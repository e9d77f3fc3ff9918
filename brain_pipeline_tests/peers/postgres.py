"""A real PostgreSQL server for tests, started from the Debian `postgresql` binaries.

Dagster's PostgreSQL storage (`dagster-postgres`) is only proven by a real server: the
storage creates its tables with migrations, opens a connection per step process and relies
on server-side locking, none of which an in-memory stand-in would exercise.

The server is a throw-away cluster: `initdb` on a data directory inside a `mkdtemp`
folder, listening on 127.0.0.1 (a free port) and on a Unix socket inside that folder,
trust authentication for loopback connections only, fsync off (its contents die with the
test session). PostgreSQL refuses to run as root, so when the tests run as root the
cluster belongs to the `postgres` user the Debian package creates and every server
command runs through `runuser -u postgres`; that is also why the folder comes from
`tempfile.mkdtemp` and is handed to that user — pytest's own `tmp_path` lives under a
root-only directory the server could not enter.

Missing binaries raise `PostgresUnavailable` with what to install: the tests that need
the server then fail, they are never skipped (CI installs the package).

Usage::

    with PostgresServer.running() as server:
        db = server.create_database("run_storage")
        yaml.safe_dump({"storage": server.dagster_storage(db)})
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVER_USER = "postgres"
"""The account the Debian package creates; the cluster runs as it when we are root."""

SEARCH_GLOB = "/usr/lib/postgresql/*/bin"
"""Where Debian installs the server binaries (not on PATH: only the client wrappers are)."""

PG_BIN_ENV = "BRAIN_PG_BIN"
"""Optional override: a directory holding initdb and pg_ctl (e.g. another distribution's)."""

DAGSTER_SCHEME = "postgresql+psycopg2"
"""SQLAlchemy URL scheme for dagster-postgres (see `dagster_storage`)."""

_START_TIMEOUT_S = 60
_START_ATTEMPTS = 3  # a free port can be taken by another process between probe and bind


class PostgresUnavailable(RuntimeError):
    """The server cannot be started here; the message says what is missing and how to fix it."""


def find_server_binaries() -> Path:
    """The directory holding `initdb` and `pg_ctl`: $BRAIN_PG_BIN, Debian's, else PATH."""
    override = os.environ.get(PG_BIN_ENV, "").strip()
    candidates: list[Path] = []
    if override:
        # An explicit choice is used or refused, never silently replaced by another install.
        candidates.append(Path(override))
    else:
        # Newest major version first: /usr/lib/postgresql/15/bin before .../13/bin.
        debian = sorted(
            glob.glob(SEARCH_GLOB),
            key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
            reverse=True,
        )
        candidates.extend(Path(p) for p in debian)
        on_path = shutil.which("pg_ctl")
        if on_path:
            candidates.append(Path(on_path).parent)
    for directory in candidates:
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    where = f"${PG_BIN_ENV}={override}" if override else f"{SEARCH_GLOB} or on PATH"
    raise PostgresUnavailable(
        f"PostgreSQL server binaries (initdb, pg_ctl) not found in {where}. Install them: "
        "apt-get install -y --no-install-recommends postgresql "
        "(tools/system_deps.sh, run by pytest and .ci/run, does this when missing)."
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    """One running throw-away cluster; `stop()` (or leaving `running()`) removes it all."""

    bin_dir: Path
    base_dir: Path
    """The mkdtemp folder: data directory, server log and the Unix socket live inside."""
    port: int
    run_as: str | None
    """The user the server commands run as (None: the current, non-root user)."""
    host: str = "127.0.0.1"
    superuser: str = SERVER_USER

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "server.log"

    @property
    def socket_dir(self) -> Path:
        return self.base_dir

    # -- lifecycle -------------------------------------------------------------------

    @classmethod
    @contextmanager
    def running(cls) -> Iterator[PostgresServer]:
        """Start a cluster, yield it, and always stop it and delete its folder."""
        server = cls.start()
        try:
            yield server
        finally:
            server.stop()

    @classmethod
    def start(cls) -> PostgresServer:
        """initdb + pg_ctl start; returns once the server accepts connections."""
        bin_dir = find_server_binaries()
        run_as = cls._server_account()
        base = Path(tempfile.mkdtemp(prefix="brain-pg-"))
        os.chmod(base, 0o700)
        if run_as is not None:
            account = pwd.getpwnam(run_as)
            os.chown(base, account.pw_uid, account.pw_gid)
        server = cls(bin_dir=bin_dir, base_dir=base, port=0, run_as=run_as)
        try:
            server._initdb()
            server._start_on_free_port()
        except BaseException:
            server.stop()
            raise
        return server

    @staticmethod
    def _server_account() -> str | None:
        """`postgres` when we are root (the server refuses root), else run as ourselves."""
        if os.geteuid() != 0:
            return None
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            raise PostgresUnavailable(
                f"running as root, but there is no '{SERVER_USER}' user to run PostgreSQL as "
                "(the Debian postgresql package creates it; or: useradd --system "
                f"--home-dir /var/lib/postgresql --shell /bin/bash {SERVER_USER})"
            ) from None
        if shutil.which("runuser") is None:
            raise PostgresUnavailable("running as root, but `runuser` (util-linux) is missing")
        return SERVER_USER

    def _command(self, args: Sequence[str]) -> list[str]:
        if self.run_as is None:
            return list(args)
        return ["runuser", "-u", self.run_as, "--", *args]

    def _run(self, args: Sequence[str], what: str) -> None:
        completed = subprocess.run(
            self._command(args),
            cwd=self.base_dir,  # root's working directory may be closed to the server user
            capture_output=True,
            text=True,
            timeout=_START_TIMEOUT_S + 30,
            check=False,
        )
        if completed.returncode != 0:
            output = (completed.stdout + completed.stderr).strip()
            raise PostgresUnavailable(
                f"{what} failed (exit {completed.returncode}): {output[-2000:]}{self._log_tail()}"
            )

    def _log_tail(self) -> str:
        try:
            text = self.log_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\nserver log:\n" + text[-2000:] if text else ""

    def _initdb(self) -> None:
        # Trust for local-socket and loopback connections; the server listens on nothing else.
        self._run(
            [
                str(self.bin_dir / "initdb"),
                "--pgdata",
                str(self.data_dir),
                "--username",
                self.superuser,
                "--auth-local=trust",
                "--auth-host=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            "initdb",
        )

    def _start_on_free_port(self) -> None:
        last: PostgresUnavailable | None = None
        for _ in range(_START_ATTEMPTS):
            self.port = _free_port()
            options = " ".join(
                [
                    f"-c listen_addresses={self.host}",
                    f"-c port={self.port}",
                    f"-c unix_socket_directories={self.socket_dir}",
                    # A throw-away cluster: durability costs time and buys nothing here.
                    "-c fsync=off",
                    "-c synchronous_commit=off",
                    "-c full_page_writes=off",
                ]
            )
            try:
                self._run(
                    [
                        str(self.bin_dir / "pg_ctl"),
                        "--pgdata",
                        str(self.data_dir),
                        "--log",
                        str(self.log_file),
                        "--wait",
                        f"--timeout={_START_TIMEOUT_S}",
                        "-o",
                        options,
                        "start",
                    ],
                    "pg_ctl start",
                )
                return
            except PostgresUnavailable as exc:
                last = exc
                self._kill_leftover()
        assert last is not None
        raise last

    def stop(self) -> None:
        """pg_ctl stop -m fast; kill the postmaster if that fails; delete the folder."""
        try:
            if (self.data_dir / "postmaster.pid").exists():
                try:
                    self._run(
                        [
                            str(self.bin_dir / "pg_ctl"),
                            "--pgdata",
                            str(self.data_dir),
                            "--mode=fast",
                            "--wait",
                            "stop",
                        ],
                        "pg_ctl stop",
                    )
                except (PostgresUnavailable, subprocess.TimeoutExpired):
                    self._kill_leftover()
        finally:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def _kill_leftover(self) -> None:
        """SIGQUIT (immediate shutdown) to this cluster's own postmaster, by its pid file."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGQUIT)

    # -- use -------------------------------------------------------------------------

    def connect(self, database: str = "postgres") -> Any:
        """A psycopg2 connection over TCP (autocommit), as Dagster itself connects."""
        import psycopg2

        connection = psycopg2.connect(
            host=self.host, port=self.port, user=self.superuser, dbname=database
        )
        connection.autocommit = True
        return connection

    def create_database(self, name: str) -> str:
        """Create (drop first if present) a database; tests each take a fresh one."""
        if not name.replace("_", "").isalnum():
            raise ValueError(f"database names here are plain identifiers, not {name!r}")
        connection = self.connect()
        try:
            with connection.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
                cursor.execute(f'CREATE DATABASE "{name}"')
        finally:
            connection.close()
        return name

    def dagster_storage(self, database: str) -> dict[str, Any]:
        """The `storage:` block of a dagster.yaml putting runs, events and schedules here.

        `scheme` names the driver: dagster-postgres installs psycopg2, while SQLAlchemy 2.1
        maps a bare `postgresql://` URL to psycopg 3, which is not installed.
        """
        return {
            "postgres": {
                "postgres_db": {
                    "hostname": self.host,
                    "port": self.port,
                    "username": self.superuser,
                    "db_name": database,
                    "scheme": DAGSTER_SCHEME,
                }
            }
        }
