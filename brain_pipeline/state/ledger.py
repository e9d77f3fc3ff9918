"""The ledger of what was built from what: records, verdicts, baselines, publications,
vector packs, the run lease; every worker sharing it shares what the pipeline remembers.

One SQL schema and one class over two engines, chosen by the URL:

* `sqlite:///<path>` (the default, in the build directory): stdlib `sqlite3` in WAL mode;
* `postgresql://user@host:5432/db` (several machines): `psycopg2`, imported only then.
  The password comes from where libpq looks (PGPASSWORD, ~/.pgpass); `redacted(url)` is
  the form to log.

The dialects differ in three words only (`_Dialect`): the placeholder, the type of an
auto-numbered key, and how a writer takes the database (`BEGIN IMMEDIATE` against a
transaction-scoped advisory lock). Upserts are `INSERT ... ON CONFLICT`, which both speak.

Rows (all digests are sha256 hex from `utils.digest`; JSON columns are canonical JSON):

* `step_results`: (step, inputs, code, settings) -> outputs {name: blob digest}, facts;
* `verdicts`: (check, data, rule) -> severity, description, overridable;
* `pointers`: name -> value, changed only by compare-and-set;
* `claims`: a topic claimed once, the first INSERT winning (`evaluation.judgements` marks
  its one-time import of the old files with it, in the import's own transaction);
* `lock_holders`: who holds the run lock (text to name them; the lock itself is the OS's
  or the server's, so a killed holder never leaves it taken).
"""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from brain_pipeline.state.lock import acquire_lock, read_holder, reentrant, wait_for
from brain_pipeline.utils.digest import canonical_json, sha256_hex

POSTGRES_EXTRA = 'pip install "brain-pipeline[postgres]"'
SQLITE_SCHEMES = ("sqlite",)
POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg2")
RUN_LOCK = "run"
_BUSY_TIMEOUT_S = 60.0


_SCHEMA = """
CREATE TABLE IF NOT EXISTS step_results (
  step TEXT NOT NULL, inputs TEXT NOT NULL, code TEXT NOT NULL, settings TEXT NOT NULL,
  outputs TEXT NOT NULL, facts TEXT NOT NULL, run_id TEXT, recorded_at TEXT NOT NULL,
  PRIMARY KEY (step, inputs, code, settings));
CREATE TABLE IF NOT EXISTS verdicts (
  check_name TEXT NOT NULL, data TEXT NOT NULL, rule TEXT NOT NULL,
  severity TEXT NOT NULL, description TEXT NOT NULL, overridable INTEGER NOT NULL,
  run_id TEXT, recorded_at TEXT NOT NULL,
  PRIMARY KEY (check_name, data, rule));
CREATE TABLE IF NOT EXISTS pointers (
  name TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS claims (
  topic TEXT PRIMARY KEY, claimant TEXT NOT NULL, claimed_at TEXT NOT NULL,
  delivered_at TEXT);
CREATE TABLE IF NOT EXISTS lock_holders (name TEXT PRIMARY KEY, holder TEXT NOT NULL);
"""


class LedgerError(RuntimeError):
    """The ledger cannot be opened or used; one line saying what to do (no password)."""


# ---- the rows, as the code sees them ----------------------------------------------


@dataclass(frozen=True)
class StepKey:
    """What a step result is looked up by: the step and the digests that decide it."""

    step: str
    inputs: str
    code: str
    settings: str


@dataclass(frozen=True)
class StepResult:
    key: StepKey
    outputs: Mapping[str, str]
    """Output name -> blob digest."""
    facts: Mapping[str, Any] = field(default_factory=dict)
    run_id: str | None = None
    recorded_at: str = ""


@dataclass(frozen=True)
class Verdict:
    """A blocking check's verdict on the data digested into `data`, by the rule `rule`."""

    check: str
    data: str
    rule: str
    severity: str
    """PASS, WARN (publishable, with the warning) or ERROR (blocks)."""
    description: str
    overridable: bool = True
    run_id: str | None = None
    recorded_at: str = ""

    @property
    def blocks(self) -> bool:
        return self.severity not in ("PASS", "WARN")


# ---- URLs ---------------------------------------------------------------------------


def redacted(url: str) -> str:
    """`url` without its password (`postgresql://ann:***@db/x` -> `postgresql://ann@db/x`)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = (f"{parts.username}@" if parts.username else "") + host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def sqlite_url(path: Path | str) -> str:
    """The SQLAlchemy-style URL of a SQLite file (`sqlite:////abs/path.sqlite`)."""
    return f"sqlite:///{Path(path).expanduser().resolve()}"


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def check_ledger_url(url: str) -> str:
    """`url` if the ledger can be opened from it, else a ValueError saying what to write.
    Never echoes the URL (it may hold a password)."""
    scheme = _scheme(url)
    if scheme in SQLITE_SCHEMES:
        if not url.split("://", 1)[1].lstrip("/"):
            raise ValueError("sqlite:/// needs a file path: sqlite:////srv/build/ledger.sqlite")
        return url
    if scheme in POSTGRES_SCHEMES:
        if not urlsplit(url).hostname and "host=" not in url:
            raise ValueError("a postgresql:// URL needs a host: postgresql://user@host:5432/db")
        return url
    raise ValueError(
        f"unknown ledger scheme {scheme or '(none)'!r}: use sqlite:///<path> or "
        "postgresql://user@host:5432/db"
    )


# ---- the two dialects -------------------------------------------------------------


@dataclass(frozen=True)
class _Dialect:
    name: str
    serial: str
    connect: Callable[[], Any]
    placeholder: str = "?"

    def sql(self, statement: str) -> str:
        return statement if self.placeholder == "?" else statement.replace("?", self.placeholder)


def sqlite_path(url: str) -> Path:
    """The file of `sqlite:///<path>` (relative after three slashes, absolute after four)."""
    return Path(unquote(url.split("://", 1)[1])[1:])


def _wal(connection: sqlite3.Connection) -> None:
    """Switch a database to WAL. Connections opening a new file at once can be refused
    this switch with "database is locked" without the busy timeout being applied: retry
    (what was measured with four workers opening one new ledger)."""
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _sqlite_dialect(url: str) -> _Dialect:
    path = sqlite_path(url)

    def connect() -> sqlite3.Connection:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
            _wal(connection)
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError(
                f"cannot open the ledger {path}: {exc} (check state.ledger / BRAIN_STATE_LEDGER)"
            ) from None
        connection.execute("PRAGMA synchronous=NORMAL")
        return connection

    return _Dialect("sqlite", "INTEGER PRIMARY KEY AUTOINCREMENT", connect)


def _postgres_dialect(url: str) -> _Dialect:
    try:
        import psycopg2
    except ImportError:
        raise LedgerError(
            f"state.ledger is PostgreSQL but psycopg2 is not installed: {POSTGRES_EXTRA}"
        ) from None
    dsn = url.replace("postgresql+psycopg2://", "postgresql://", 1)

    def connect() -> Any:
        try:
            return psycopg2.connect(dsn)
        except psycopg2.OperationalError as exc:
            reason = " ".join(str(exc).split())
            raise LedgerError(
                f"cannot connect to the ledger {redacted(url)}: {reason} "
                "(check state.ledger / BRAIN_STATE_LEDGER and PGPASSWORD)"
            ) from None

    return _Dialect("postgresql", "BIGSERIAL PRIMARY KEY", connect, placeholder="%s")


def _advisory_key(name: str) -> int:
    """A signed 64-bit key for pg_advisory_lock, the same on every host for `name`."""
    return int(sha256_hex(f"brain-pipeline:{name}".encode())[:15], 16)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _json(value: Any) -> str:
    return canonical_json(value).decode("utf-8")


# ---- the ledger ---------------------------------------------------------------------


class Ledger:
    """One connection to the ledger at `url` (see the module), its schema created if
    missing. Not shared between threads: open one per thread or process."""

    def __init__(self, url: str) -> None:
        check_ledger_url(url)
        self.url = url
        scheme = _scheme(url)
        sqlite = scheme in SQLITE_SCHEMES
        self._dialect = _sqlite_dialect(url) if sqlite else _postgres_dialect(url)
        self._connection = self._dialect.connect()
        self._areas: set[str] = set()
        self._create_schema()

    @property
    def backend(self) -> str:
        return self._dialect.name

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing -----------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, write: bool = True) -> Iterator[Any]:
        """One transaction. A SQLite writer takes the write lock at once (BEGIN IMMEDIATE:
        no deadlock upgrading a read lock); a SQLite read runs on its own (autocommit).
        psycopg2 opens a transaction implicitly."""
        cursor = self._connection.cursor()
        try:
            if write and self._dialect.name == "sqlite":
                cursor.execute("BEGIN IMMEDIATE")
            yield cursor
            self._connection.commit()
        except BaseException:
            self._connection.rollback()
            raise
        finally:
            cursor.close()

    def execute(self, statement: str, params: tuple[Any, ...] = ()) -> int:
        """Run one writing statement; the number of rows it changed."""
        with self.transaction() as cursor:
            cursor.execute(self._dialect.sql(statement), params)
            return int(cursor.rowcount)

    def query(
        self, statement: str, params: tuple[Any, ...] = (), *, write: bool = False
    ) -> list[tuple[Any, ...]]:
        with self.transaction(write) as cursor:
            cursor.execute(self._dialect.sql(statement), params)
            return list(cursor.fetchall())

    def _create_schema(self) -> None:
        self.ensure_tables("core", _SCHEMA)

    def ensure_tables(self, area: str, ddl: str) -> None:
        """Create the tables of `ddl` (statements separated by `;`, `{serial}` for an
        auto-numbered key) unless this connection already did for `area`. An area of the
        pipeline (publications, evaluation, embeddings, ...) keeps its own tables in its
        own module and calls this before its first statement.

        Idempotent, and safe when several workers start at once: creation is serialised
        (SQLite's write lock; a transaction-scoped advisory lock on PostgreSQL, where two
        concurrent CREATE TABLE IF NOT EXISTS can otherwise collide in the catalogue)."""
        if area in self._areas:
            return
        with self.transaction() as cursor:
            if self._dialect.name == "postgresql":
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_advisory_key("schema"),))
            for statement in ddl.format(serial=self._dialect.serial).split(";"):
                if statement.strip():
                    cursor.execute(statement)
        self._areas.add(area)

    def sql(self, statement: str) -> str:
        """`statement` with `?` placeholders in this engine's style (for `transaction`)."""
        return self._dialect.sql(statement)

    # -- step results ----------------------------------------------------------------

    def record_step(self, result: StepResult) -> StepResult:
        """Keep `result` under its key (replacing an earlier row under the same key)."""
        stamped = replace(
            result, outputs=dict(result.outputs), facts=dict(result.facts), recorded_at=_now()
        )
        k = result.key
        self.execute(
            "INSERT INTO step_results VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (step, inputs, code, settings) DO UPDATE SET outputs = "
            "excluded.outputs, facts = excluded.facts, run_id = excluded.run_id, "
            "recorded_at = excluded.recorded_at",
            (k.step, k.inputs, k.code, k.settings, _json(stamped.outputs),
             _json(stamped.facts), stamped.run_id, stamped.recorded_at),
        )  # fmt: skip
        return stamped

    def step_result(self, key: StepKey) -> StepResult | None:
        rows = self.query(
            "SELECT outputs, facts, run_id, recorded_at FROM step_results "
            "WHERE step = ? AND inputs = ? AND code = ? AND settings = ?",
            (key.step, key.inputs, key.code, key.settings),
        )
        if not rows:
            return None
        outputs, facts, run_id, recorded_at = rows[0]
        return StepResult(key, json.loads(outputs), json.loads(facts), run_id, recorded_at)

    # -- verdicts ----------------------------------------------------------------------

    def record_verdict(self, verdict: Verdict) -> Verdict:
        v = replace(verdict, recorded_at=_now())
        self.execute(
            "INSERT INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (check_name, data, rule) DO UPDATE SET severity = excluded.severity, "
            "description = excluded.description, overridable = excluded.overridable, "
            "run_id = excluded.run_id, recorded_at = excluded.recorded_at",
            (v.check, v.data, v.rule, v.severity, v.description, int(v.overridable),
             v.run_id, v.recorded_at),
        )  # fmt: skip
        return v

    def verdict(self, check: str, data: str, rule: str) -> Verdict | None:
        rows = self.query(
            "SELECT severity, description, overridable, run_id, recorded_at FROM verdicts "
            "WHERE check_name = ? AND data = ? AND rule = ?",
            (check, data, rule),
        )
        if not rows:
            return None
        severity, description, overridable, run_id, recorded_at = rows[0]
        return Verdict(
            check, data, rule, severity, description, bool(overridable), run_id, recorded_at
        )

    # -- pointers ---------------------------------------------------------------------

    def pointer(self, name: str) -> str | None:
        rows = self.query("SELECT value FROM pointers WHERE name = ?", (name,))
        return str(rows[0][0]) if rows else None

    def set_pointer(self, name: str, value: str, *, expected: str | None) -> bool:
        """Point `name` at `value` only if it points at `expected` now (None: unset).
        False when another writer moved it first: re-read and decide again."""
        if expected is None:
            changed = self.execute(
                "INSERT INTO pointers VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING",
                (name, value, _now()),
            )
        else:
            changed = self.execute(
                "UPDATE pointers SET value = ?, updated_at = ? WHERE name = ? AND value = ?",
                (value, _now(), name, expected),
            )
        return changed == 1

    # -- the run lock ----------------------------------------------------------------

    def _lock_file(self) -> Path:
        database = sqlite_path(self.url)
        return database.with_name(database.name + ".lock")

    def lock_holder(self) -> dict[str, object] | None:
        """Who holds the run lock, as they described themselves (`lock.make_holder`);
        None when free (or the holder has not written its description yet)."""
        if self._dialect.name == "sqlite":
            return read_holder(self._lock_file()) or None
        rows = self.query("SELECT holder FROM lock_holders WHERE name = ?", (RUN_LOCK,))
        return json.loads(rows[0][0]) if rows else None

    @contextlib.contextmanager
    def run_lock(
        self,
        holder: Mapping[str, object],
        *,
        wait_seconds: float,
        poll_seconds: float = 0.25,
        on_wait: Callable[[str], None] | None = None,
    ) -> Iterator[None]:
        """Hold the ledger's run lock for the `with` block; one holder across every host.

        SQLite: `state.lock`'s OS lock on the file `<database>.lock`. PostgreSQL:
        `pg_advisory_lock` on a connection of its own, held for the block. Either way
        the kernel or the server drops it when the holder dies, `kill -9` included.
        Re-entrant within a process on both, so a step inside a run that holds it goes on.
        Busy after `wait_seconds`: `LockBusyError` naming the holder (`make_holder`).
        """
        if self._dialect.name == "sqlite":
            with acquire_lock(
                self._lock_file(),
                wait_seconds=wait_seconds,
                holder=holder,
                poll_seconds=poll_seconds,
                on_wait=on_wait,
                label=f"the ledger {sqlite_path(self.url)}",
            ):
                yield
            return
        session = functools.partial(
            self._advisory_session, holder, wait_seconds, poll_seconds, on_wait
        )
        with reentrant(("advisory lock", redacted(self.url)), session):
            yield

    @contextlib.contextmanager
    def _advisory_session(
        self,
        holder: Mapping[str, object],
        wait_seconds: float,
        poll_seconds: float,
        on_wait: Callable[[str], None] | None,
    ) -> Iterator[None]:
        session = self._dialect.connect()
        session.autocommit = True
        key = _advisory_key(RUN_LOCK)
        try:
            with session.cursor() as cursor:

                def attempt(_remaining: float) -> bool:
                    cursor.execute("SELECT pg_try_advisory_lock(%s)", (key,))
                    return bool(cursor.fetchone()[0])

                wait_for(
                    attempt,
                    label=f"the ledger {redacted(self.url)}",
                    holder=self.lock_holder,
                    wait_seconds=wait_seconds,
                    on_wait=on_wait,
                    poll_seconds=poll_seconds,
                )
                cursor.execute(
                    "INSERT INTO lock_holders VALUES (%s, %s) ON CONFLICT (name) "
                    "DO UPDATE SET holder = excluded.holder",
                    (RUN_LOCK, _json(dict(holder))),
                )
                try:
                    yield
                finally:
                    cursor.execute("DELETE FROM lock_holders WHERE name = %s", (RUN_LOCK,))
                    cursor.execute("SELECT pg_advisory_unlock(%s)", (key,))
        finally:
            session.close()
