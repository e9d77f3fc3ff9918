"""Tell someone when a publish is blocked, a run fails, a regression goes out, or it is fixed.

Pure: no Dagster. The sensors in `defs/notify.py` turn a finished run into `RunFacts`
(plain values read from its events) and hand them here:

- `classify(facts, previous)` says which event a run is, if any: `blocked` (a blocking
  check failed or the publish step refused), `failed` (a step failed before anything
  was published), `regression` (published under `on_regression: warn` with a WARN
  regression), `recovered` (the first good publication after one of those; `previous`
  is the event of the run before it), or None (nothing to say).
- `build_message(event)` makes the one message of that run: a first line that reads as
  a subject, the cause in one line, what is live, and the run's link in the UI.
- `deliver(settings, message)` sends it to every configured channel with bounded
  retries and one overall deadline per attempt (`publishing.deadline`), and never
  raises: a channel that is down is a line in the returned `Delivery`, not a failure.
- `run_lease`, `RunDelivery`, `try_delivery`: each run's message delivered once. One
  deliverer at a time holds a run's lease, tries the channels that have not accepted it
  and records the outcome before letting go; a message not accepted stays `pending`
  and is tried again with a doubling backoff (`Redelivery`), until it is delivered or
  given up (`failed`, which `undelivered` lists for `brain-pipeline status`).

Secrets: the SMTP password is read from the environment variable the configuration
names, at sending time; the webhook URL (which often embeds a token) is only ever
described by its host; and every known secret value is scrubbed from the message text
and from each delivery line before either leaves this module.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import smtplib
import ssl
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from email.message import EmailMessage
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from brain_pipeline.publishing.deadline import Deadline
from brain_pipeline.state.ledger import Ledger

if TYPE_CHECKING:
    from brain_pipeline.state.memory import Memory

EventKind = Literal["blocked", "failed", "regression", "recovered", "forced"]
Previous = Literal["blocked", "failed", "regression", "recovered", "forced", "good"]
"""What the runs before one said: a run's event, or `good` (a clean publication)."""
BAD_EVENTS = frozenset({"blocked", "failed", "regression", "forced"})
PUBLISH_STEPS = ("published_local", "published_s3")
USER_AGENT = "brain-pipeline-notify/1"


@dataclass(frozen=True)
class CheckOutcome:
    """One asset check evaluation of the run (name like `embeddings:retrieval_eval`)."""

    name: str
    passed: bool
    severity: str
    """ERROR or WARN."""
    description: str
    blocking: bool = True
    headline: str | None = None
    """`EvaluationVerdict.headline()` when the check is the evaluation (its metadata carries
    it): the one line that decided the verdict, preferred over the description's first line."""

    def cause(self) -> str:
        return f"{self.name}: {first_line(self.headline or self.description)}"


@dataclass(frozen=True)
class RunFacts:
    """What a finished run did, in plain values (read from its Dagster events)."""

    run_id: str
    job: str
    succeeded: bool
    failed_steps: Sequence[tuple[str, str]] = ()
    """(step, its failure's description), in order."""
    checks: Sequence[CheckOutcome] = ()
    published: bool = False
    """published_local materialised in this run (the store is live, changed or not)."""
    publish_status: str | None = None
    """The materialisation's status: updated, unchanged, held."""
    trigger: str | None = None
    succeeded_steps: Sequence[str] = ()
    """Steps that succeeded, in order (a run killed midway still did these)."""
    run_failure: str | None = None
    """What Dagster (or the reaper) said when it marked the run failed."""
    forced: str | None = None
    """published_local went out forced in this run: what it overrode and the person's reason."""


@dataclass(frozen=True)
class Event:
    """The one thing a run's message reports."""

    kind: EventKind
    run_id: str
    job: str
    cause: str
    """One line: which check or step, and why."""
    link: str | None = None
    trigger: str | None = None


def first_line(text: str, limit: int = 300) -> str:
    """The first non-empty line, cut to `limit` characters (messages stay one line)."""
    line = next((raw.strip() for raw in str(text).splitlines() if raw.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def classify(facts: RunFacts, previous: Previous | None, link: str | None = None) -> Event | None:
    """Which event `facts` is (see the module); `previous` is the previous run's event."""

    def event(kind: EventKind, cause: str) -> Event:
        return Event(kind, facts.run_id, facts.job, cause, link, facts.trigger)

    if not facts.succeeded:
        blocking = [
            c for c in facts.checks if not c.passed and c.severity == "ERROR" and c.blocking
        ]
        if blocking:
            return event("blocked", blocking[0].cause())
        refused = [(s, d) for s, d in facts.failed_steps if s in PUBLISH_STEPS and "refus" in d]
        if refused:
            step, description = refused[0]
            return event("blocked", f"{step}: {first_line(description)}")
        if facts.failed_steps:
            step, description = facts.failed_steps[0]
            return event("failed", f"{step} failed: {first_line(description)}")
        return event("failed", ended_midway(facts))
    if not facts.published or facts.publish_status == "held":
        return None
    if facts.forced:  # a person overrode the blocking checks: always said, never "recovered"
        return event("forced", facts.forced)
    # A blocking check that failed with WARN severity: the gate let a regression through
    # (on_regression: warn). A failed non-blocking check is advice, not a regression.
    warned = [c for c in facts.checks if not c.passed and c.severity == "WARN" and c.blocking]
    if warned:
        return event("regression", warned[0].cause())
    if previous in BAD_EVENTS:
        return event("recovered", f"published after the {previous} run; the live store is current")
    return None


def ended_midway(facts: RunFacts) -> str:
    """The cause of a run that failed with no step failing (killed, crashed, stopped):
    what had succeeded before it ended, and what Dagster said."""
    said = f": {first_line(facts.run_failure, 200)}" if facts.run_failure else ""
    if facts.succeeded_steps:
        done = ", ".join(dict.fromkeys(facts.succeeded_steps))
        return f"the run ended after {done} succeeded, before the rest finished{said}"
    return f"the run ended before any step finished{said}"


def superseded_by(event: Event, newer: Iterable[RunFacts]) -> RunFacts | None:
    """The newer finished run that makes `event` stale, if any: a RECOVERED is no longer
    the truth once a later run was blocked or failed (a daemon catching up on old runs
    must not announce a recovery after a newer failure). `newer`: runs finished after
    the event's run, any order."""
    if event.kind != "recovered":
        return None
    for facts in newer:
        later = classify(facts, None)
        if later is not None and later.kind in BAD_EVENTS:
            return facts
    return None


def previous_outcome(earlier: Iterable[RunFacts]) -> Previous | None:
    """What the finished runs before one said, given newest first: the kind of the last
    bad event (blocked, failed, regression), `good` when a clean publication (not held)
    came after it, None when none of them published or failed. `earlier` may be lazy:
    it is read only as far as the answer (`defs.notify` reads the instance's runs)."""
    for facts in earlier:
        event = classify(facts, None)
        if event is not None and event.kind in BAD_EVENTS:
            return event.kind
        if facts.succeeded and facts.published and facts.publish_status != "held":
            return "good"
    return None


_HEADLINES: dict[EventKind, str] = {
    "blocked": "publish BLOCKED",
    "failed": "run FAILED before publishing",
    "regression": "regression PUBLISHED (on_regression: warn)",
    "recovered": "RECOVERED: a good publication is live",
    "forced": "FORCED publication is live",
}
_CONSEQUENCES: dict[EventKind, str] = {
    "blocked": "Nothing was published: the agent keeps the previous store.",
    "failed": "Nothing was published: the agent keeps the previous store.",
    "regression": "The new store IS live. Undo it with `brain-pipeline rollback` if needed.",
    "recovered": "The agent now reads the new store.",
    "forced": "The store its blocking checks refused IS live. Undo it with `brain-pipeline "
    "rollback` if needed.",
}


@dataclass(frozen=True)
class Message:
    subject: str
    text: str
    payload: dict[str, Any]


def build_message(event: Event, secrets: Iterable[str] = ()) -> Message:
    """The run's one message: subject, plain text (also the webhook's `text`), payload."""
    subject = f"[brain-pipeline] {_HEADLINES[event.kind]}: {event.cause}"
    lines = [
        f"brain-pipeline: {_HEADLINES[event.kind]} (run {event.run_id[:8]}, {event.job})",
        event.cause,
        _CONSEQUENCES[event.kind],
    ]
    if event.trigger:
        lines.append(f"Started by: {event.trigger}")
    if event.link:
        lines.append(f"Run: {event.link}")
    hidden = [s for s in secrets if s and len(s) >= 4]
    text = scrub("\n".join(lines), hidden)
    subject = scrub(first_line(subject, 200), hidden)
    payload = {
        "text": text,
        "event": event.kind,
        "run_id": event.run_id,
        "job": event.job,
        "cause": scrub(event.cause, hidden),
        "link": event.link,
    }
    return Message(subject, text, payload)


def run_link(base_url: str | None, run_id: str) -> str | None:
    """The run's page in the Dagster UI (None without a configured base URL)."""
    return f"{base_url.rstrip('/')}/runs/{run_id}" if base_url else None


def scrub(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


# -- each run's message, delivered once ---------------------------------------------------

KEEP_CLAIMS = 500
MAX_BACKOFF_SECONDS = 3600.0
"""The longest wait between two tries of one run's message (the backoff doubles up to it)."""
DeliveryState = Literal["pending", "delivered", "failed", "superseded"]
"""`pending`: not yet accepted, tried again once `next_at` comes; `delivered`: every
channel accepted it; `failed`: given up after `notify.retry_for_seconds`; `superseded`:
a RECOVERED a newer failure made stale, never sent."""


@dataclass(frozen=True)
class ChannelResult:
    channel: str
    """`webhook <host>` or `email <host>:<port>`: never a token or a password."""
    ok: bool
    attempts: int
    detail: str

    def describe(self) -> str:
        said = f"{self.channel}: {'sent' if self.ok else 'NOT sent'} after {self.attempts}"
        return said + " attempt(s)" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class RunDelivery:
    """The delivery record of one run's message, a row of the ledger (`run_alerts`).

    Written only under the run's lease (`run_lease`) before the lease is released: the
    next deliverer to take the lease reads what the last one did, so a channel that
    accepted the message is never sent it again, and one that did not is tried again
    (the message itself is kept, already scrubbed of every secret, so the retry sends
    the same text whoever makes it)."""

    run_id: str
    kind: str
    state: DeliveryState
    message: Message | None
    first_at: float
    tries: int = 0
    next_at: float = 0.0
    channels: dict[str, ChannelResult] = field(default_factory=dict)
    """The last result per channel (`webhook <host>`, `email <host>:<port>`)."""
    newer: str | None = None
    """`superseded`: the newer run that did not publish."""

    def accepted(self) -> frozenset[str]:
        return frozenset(name for name, result in self.channels.items() if result.ok)

    def due(self, now: float) -> bool:
        return self.state == "pending" and now >= self.next_at

    def describe(self) -> str:
        """One line for a tick, a log or `brain-pipeline status` (never a secret: channels
        are named by host and details were scrubbed when recorded)."""
        head = f"run {self.run_id[:8]}: {self.kind} message"
        said = "; ".join(result.describe() for result in self.channels.values())
        if self.state == "superseded":
            return f"{head} not sent: a newer run ({(self.newer or '?')[:8]}) did not publish"
        if self.state == "failed":
            return f"{head} NOT delivered, given up after {self.tries} tries: {said}"
        if self.state == "pending":
            return f"{head}: {said}; try {self.tries}, tried again later"
        return f"{head}: {said}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> RunDelivery:
        """A record as `to_json` (and the earlier versions' `notified/<run>.json`) wrote it;
        ValueError, KeyError or TypeError for a shape this code does not read, checked by
        the fields themselves (no format number to bump; the `"format": 1` of an earlier
        release's record is ignored)."""
        body = json.loads(text)
        if not isinstance(body, dict):
            raise ValueError("not a delivery record")
        message = body["message"]
        return cls(
            run_id=str(body["run_id"]),
            kind=str(body["kind"]),
            state=body["state"],
            message=None if message is None else Message(**message),
            first_at=float(body["first_at"]),
            tries=int(body["tries"]),
            next_at=float(body["next_at"]),
            channels={
                name: ChannelResult(name, bool(r["ok"]), int(r["attempts"]), str(r["detail"]))
                for name, r in dict(body.get("channels") or {}).items()
            },
            newer=body.get("newer"),
        )

    @classmethod
    def parse(cls, run_id: str, text: str | bytes) -> RunDelivery:
        """The stored record of run `run_id`; a damaged one counts as handled (`failed`, so
        `status` names it): a second message is worse than a reported gap."""
        try:
            return cls.from_json(text)
        except (ValueError, KeyError, TypeError):
            damaged = ChannelResult("record", False, 0, "the delivery record is unreadable")
            return cls(run_id, "unknown", "failed", None, 0.0, channels={"record": damaged})


_DDL = """
CREATE TABLE IF NOT EXISTS run_alerts (
  run_id TEXT PRIMARY KEY, state TEXT, first_at REAL, body TEXT, updated_at REAL NOT NULL,
  holder TEXT, lease_until REAL)
"""
LEASE_SECONDS = 900.0
"""How long a deliverer's lease on a run's message lasts: one try of every channel, with
its retries and deadlines, ends well within it; a deliverer killed mid-send leaves the
lease to whoever comes after it expires (the record as it was before that try)."""


def _table(ledger: Ledger) -> Ledger:
    ledger.ensure_tables("run_alerts", _DDL)
    return ledger


@contextlib.contextmanager
def run_lease(
    ledger: Ledger, run_id: str, *, now: Callable[[], float] = time.time
) -> Iterator[bool]:
    """Hold the lease on run `run_id`'s message: True for the one deliverer (a sensor
    tick, the command, on any worker of the ledger) that may read, send and record it
    now; False when another holds it (it is sending: this one leaves the run alone).
    A compare-and-set on the run's row (`run_alerts`), never waited for, given back
    on the way out and expiring after LEASE_SECONDS."""
    token, at = uuid.uuid4().hex, now()
    _table(ledger).execute(
        "INSERT INTO run_alerts (run_id, updated_at) VALUES (?, ?) "
        "ON CONFLICT (run_id) DO NOTHING",
        (run_id, at),
    )
    taken = ledger.execute(
        "UPDATE run_alerts SET holder = ?, lease_until = ? "
        "WHERE run_id = ? AND (holder IS NULL OR lease_until < ?)",
        (token, at + LEASE_SECONDS, run_id, at),
    )
    if taken != 1:
        yield False
        return
    try:
        yield True
    finally:
        ledger.execute(
            "UPDATE run_alerts SET holder = NULL, lease_until = NULL "
            "WHERE run_id = ? AND holder = ?",
            (run_id, token),
        )


def read_delivery(ledger: Ledger, run_id: str) -> RunDelivery | None:
    """The run's delivery record; None when nobody has handled its message yet."""
    rows = _table(ledger).query("SELECT body FROM run_alerts WHERE run_id = ?", (run_id,))
    return RunDelivery.parse(run_id, rows[0][0]) if rows and rows[0][0] is not None else None


def write_delivery(ledger: Ledger, record: RunDelivery) -> None:
    """Keep the record (call under the run's lease), then drop settled ones beyond the
    newest KEEP_CLAIMS (a run that old is never reported again: the sensors look back
    far fewer runs); a pending record is kept until it is settled."""
    _table(ledger).execute(
        "INSERT INTO run_alerts (run_id, state, first_at, body, updated_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, "
        "first_at = excluded.first_at, body = excluded.body, updated_at = excluded.updated_at",
        (record.run_id, record.state, record.first_at, record.to_json(), time.time()),
    )
    ledger.execute(
        "DELETE FROM run_alerts WHERE state IS NOT NULL AND state <> 'pending' AND run_id "
        "NOT IN (SELECT run_id FROM run_alerts ORDER BY updated_at DESC LIMIT ?)",
        (KEEP_CLAIMS,),
    )


def import_earlier(ledger: Ledger, state_dir: Path) -> None:
    """Once per ledger, what earlier versions kept in `<state>/notified/`: their delivery
    records `<run>.json` and their bare claim files `<run>` (handled: never sent again)."""
    if ledger.pointer("imported notified/") is not None:
        return
    folder = state_dir / "notified"
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if path.suffix == ".json":
            record = RunDelivery.parse(path.stem, path.read_bytes())
        elif path.suffix != ".lease":
            record = RunDelivery(path.name, "earlier", "delivered", None, 0.0)
        else:
            continue
        if read_delivery(ledger, record.run_id) is None:
            write_delivery(ledger, record)
    ledger.set_pointer("imported notified/", "1", expected=None)


def alerts_ledger(memory: Memory) -> Ledger:
    """The ledger the delivery records live in, the earlier versions' records of the
    build directory read into it once (`import_earlier`)."""
    import_earlier(memory.ledger, memory.layout.state_dir)
    return memory.ledger


@dataclass(frozen=True)
class Redelivery:
    """How a message that was not accepted is tried again (`notify.*`)."""

    backoff_seconds: float = 60.0
    """The wait before the second try; doubled after each failed try, up to
    MAX_BACKOFF_SECONDS."""
    give_up_after_seconds: float = 86400.0
    """The total: a message still not accepted this long after its first try is `failed`."""

    @classmethod
    def of(cls, settings: Any) -> Redelivery:
        return cls(float(settings.retry_backoff_seconds), float(settings.retry_for_seconds))

    def wait_after(self, tries: int) -> float:
        return min(MAX_BACKOFF_SECONDS, self.backoff_seconds * 2 ** max(0, tries - 1))


def try_delivery(
    record: RunDelivery,
    settings: Any,
    *,
    now: float,
    env: dict[str, str] | None = None,
    sleep: Sleep = time.sleep,
) -> RunDelivery:
    """One try of a pending record (call under its lease): `deliver` to the channels that
    have not accepted it yet, and the record as it stands after. Never raises."""
    if record.message is None or record.state != "pending":
        return record
    delivery = deliver(settings, record.message, env=env, sleep=sleep, skip=record.accepted())
    channels = {**record.channels, **{r.channel: r for r in delivery.results}}
    tries = record.tries + 1
    policy = Redelivery.of(settings)
    state: DeliveryState = "pending"
    next_at = now + policy.wait_after(tries)
    if delivery.ok:  # every channel still configured has now accepted it
        state = "delivered"
    elif now - record.first_at >= policy.give_up_after_seconds:
        state = "failed"
    elif next_at - record.first_at > policy.give_up_after_seconds:
        next_at = record.first_at + policy.give_up_after_seconds  # one last try at the end
    return replace(record, state=state, tries=tries, next_at=next_at, channels=channels)


def pending_deliveries(ledger: Ledger) -> list[str]:
    """The runs whose message is still pending, oldest record first (what the retrying
    sensor and the command look at)."""
    rows = _table(ledger).query(
        "SELECT run_id FROM run_alerts WHERE state = 'pending' ORDER BY updated_at, run_id"
    )
    return [str(row[0]) for row in rows]


def undelivered(ledger: Ledger) -> list[RunDelivery]:
    """Messages not delivered: given up (`failed`) or still being retried (`pending`),
    newest first, for `brain-pipeline status`. Read-only."""
    rows = _table(ledger).query(
        "SELECT run_id, body FROM run_alerts WHERE state IN ('failed', 'pending')"
    )
    records = [RunDelivery.parse(str(run_id), body) for run_id, body in rows]
    return sorted(records, key=lambda record: record.first_at, reverse=True)


# -- delivery ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    results: tuple[ChannelResult, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)


Sleep = Callable[[float], None]


def _with_retries(
    channel: str, attempts: int, sleep: Sleep, send: Callable[[], None], hidden: list[str]
) -> ChannelResult:
    """Try `send` up to `attempts` times (1 s, 2 s, ... apart); never raises."""
    detail = ""
    for attempt in range(1, attempts + 1):
        try:
            send()
            return ChannelResult(channel, True, attempt, "")
        except Exception as exc:  # a channel never fails the caller: reported instead
            detail = scrub(f"{type(exc).__name__}: {first_line(str(exc), 200)}", hidden)
        if attempt < attempts:
            sleep(float(attempt))
    return ChannelResult(channel, False, attempts, detail)


def describe_url(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}" + (f":{parts.port}" if parts.port else "")


def post_webhook(url: str, message: Message, timeout: float) -> None:
    """POST the payload as JSON; any answer but 2xx raises. `timeout` bounds the whole
    attempt (connect, send, the answer), not each read (see `publishing.deadline`)."""
    request = urllib.request.Request(
        url,
        data=json.dumps(message.payload).encode("utf-8"),
        headers={"Content-Type": "application/json", "User-Agent": USER_AGENT},
        method="POST",
    )
    with Deadline(timeout) as deadline:
        opener = urllib.request.build_opener(_WatchedHandler(deadline))
        with opener.open(request, timeout=timeout) as response:
            if not 200 <= response.status < 300:
                raise RuntimeError(f"HTTP {response.status}")


class _WatchedHTTPConnection(http.client.HTTPConnection):
    """A connection whose socket `deadline` watches from the moment it connects: before
    the request is sent and, for HTTPS (`_WatchedHTTPSConnection`'s order of bases puts
    this `connect` under the TLS one), before the handshake a trickling peer can stall."""

    deadline: Deadline

    def connect(self) -> None:
        own = self.timeout if isinstance(self.timeout, int | float) else self.deadline.seconds
        self.timeout = min(own, self.deadline.remaining())
        super().connect()
        self.deadline.watch(self.sock)


class _WatchedHTTPSConnection(http.client.HTTPSConnection, _WatchedHTTPConnection):
    pass


class _WatchedHandler(urllib.request.HTTPHandler, urllib.request.HTTPSHandler):
    """urllib's handler of both schemes (so `build_opener` adds neither default one), on
    connections `deadline` watches."""

    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def _connection(self, http_class: type[_WatchedHTTPConnection]) -> Any:
        """The connection factory urllib calls (`http_class(host, timeout=..., ...)`)."""

        def connection(host: str, **kwargs: Any) -> http.client.HTTPConnection:
            conn = http_class(host, **kwargs)
            conn.deadline = self._deadline
            return conn

        return connection

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(self._connection(_WatchedHTTPConnection), req)

    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(self._connection(_WatchedHTTPSConnection), req)


class _WatchedSMTP(smtplib.SMTP):
    """`smtplib.SMTP` whose connection `deadline` watches before its first reply (the
    banner) is read, so the banner, STARTTLS, the login and DATA are all bounded."""

    def __init__(self, deadline: Deadline, host: str, port: int) -> None:
        self._deadline = deadline
        super().__init__(host, port, timeout=deadline.remaining())

    def getreply(self) -> tuple[int, bytes]:
        if self.sock is not None and not getattr(self, "_watching", False):
            self._deadline.watch(self.sock)
            self._watching = True
        return super().getreply()


def send_email(email: Any, message: Message, timeout: float, env: dict[str, str]) -> None:
    """One message over SMTP (STARTTLS and login as configured). `timeout` bounds the
    whole attempt, not each read (see `publishing.deadline`)."""
    mail = EmailMessage()
    mail["Subject"] = message.subject
    mail["From"] = email.sender
    mail["To"] = ", ".join(email.recipients)
    mail.set_content(message.text)
    with Deadline(timeout) as deadline, _WatchedSMTP(deadline, email.host, email.port) as smtp:
        if email.starttls:
            smtp.starttls(context=ssl.create_default_context())
        user = env.get(email.username_env or "", "") if email.username_env else ""
        password = env.get(email.password_env or "", "") if email.password_env else ""
        if user or password:
            smtp.login(user, password)
        smtp.send_message(mail)


def known_secrets(settings: Any, env: dict[str, str]) -> list[str]:
    """Values that must never appear in a message, a tick or a log."""
    values = [settings.webhook_url or ""]
    if settings.webhook_url:
        parts = urlsplit(settings.webhook_url)
        values += [parts.path, parts.query, parts.password or ""]
    if settings.email is not None and settings.email.password_env:
        values.append(env.get(settings.email.password_env, ""))
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        values.append(env.get(name, ""))
    return [v for v in values if v and len(v) >= 4 and v != "/"]


def deliver(
    settings: Any,
    message: Message,
    *,
    env: dict[str, str] | None = None,
    sleep: Sleep = time.sleep,
    skip: Collection[str] = (),
) -> Delivery:
    """Send `message` to every channel `settings` (config.NotifySettings) names, but
    those named in `skip` (they accepted it at an earlier try)."""
    env = dict(os.environ) if env is None else env
    hidden = known_secrets(settings, env)
    channels: list[tuple[str, Callable[[], None]]] = []
    url, email = settings.webhook_url, settings.email
    if url:
        post = lambda: post_webhook(url, message, settings.timeout_seconds)  # noqa: E731
        channels.append((f"webhook {describe_url(url)}", post))
    if email is not None:
        mail = lambda: send_email(email, message, settings.timeout_seconds, env)  # noqa: E731
        channels.append((f"email {email.host}:{email.port}", mail))
    return Delivery(
        tuple(
            _with_retries(name, settings.max_attempts, sleep, send, hidden)
            for name, send in channels
            if name not in skip
        )
    )
