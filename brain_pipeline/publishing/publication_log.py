"""The publication history: every publication, rollback and hold, append-only.

Kept in the ledger (issue 41), so every worker sharing it sees the same history: the
table `publication_events` (this area's own, `ledger.ensure_tables("publications")`),
one row per event, oldest first, never edited. `pub_id` is unique, so of two workers
recording publication #N at once one wins and the other fails, re-reads and decides
again (the compare-and-set of the history's head: live and hold are derived from it).

Events (`kind`):

- `published`: a local publication that changed what the agent reads (an unchanged
  re-publish is not one). Its `id` (1, 2, ...) names it for `rollback --to`.
- `rollback`: a local publication that made publication `restores` live again; it gets
  its own id, like any publication.
- `s3`: publication `publication` reached the bucket (the keys it names there).
- `hold` / `release`: after a rollback, the rolled-back publication is held (the
  schedule and automation do not publish it again) until the corpus or the fixture
  changes, or a person releases it.

A publication's files (store, vectors, manifest, evaluation record) are blobs named by
the sha256 in its event (`evaluation_blob` for the evaluation record), so a rollback on
any worker fetches them from the shared blob store.

What is live, what a plain `rollback` goes back to, and whether a hold is active are
derived from the list (the functions below), never stored beside it.

Upgrade: a build directory made before the ledger (`state/publications.json`, the
archive `state/published/objects/<sha256>/<file>`) is read in once, by the first read
of an empty history (`_import_old_files`); the archive's files then live only as blobs.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from brain_pipeline.state.memory import Memory


class HistoryError(RuntimeError):
    """The history cannot be read or written (with the cause); nothing was changed."""


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


_OPTIONAL = ("restores", "forced", "evaluation_blob")


@dataclass(frozen=True)
class Publication:
    """One publication (a build's, or a rollback's) as the history knows it."""

    id: int
    kind: str
    """`published` or `rollback`."""
    when: str
    run_id: str | None
    trigger: str
    corpus_digest: str | None
    store_sha256: str
    store_size: int
    embeddings_sha256: str | None
    embeddings_size: int | None
    manifest_sha256: str
    evaluation: Mapping[str, Any]
    """passed, figures, evaluation key and the run that evaluated these bytes."""
    baseline: str | None
    """The evaluation key this publication made the regression baseline (None: unchanged)."""
    restores: int | None = None
    """For a rollback: the publication it made live again."""
    forced: Mapping[str, Any] | None = None
    """{"reason", "overrode"} when a person forced it over failed or missing blocking
    checks (a forced rollback too); None when it passed them."""
    evaluation_blob: str | None = None
    """The blob of the full evaluation record (to set the baseline back on rollback)."""
    s3: Mapping[str, Any] | None = field(default=None, compare=False)
    """{"bucket", "prefix", "objects": {filename: key}, "when"} once uploaded."""

    @property
    def origin(self) -> int:
        """The publication whose bytes these are (a rollback's, the one it restores)."""
        return self.restores if self.restores is not None else self.id

    def files(self) -> dict[str, tuple[str, int]]:
        """filename -> (sha256, size) of every artifact this publication put live (each
        a blob of that digest)."""
        from brain_pipeline.corpus.store import STORE_FILENAME
        from brain_pipeline.publishing.manifest import EMBEDDINGS_FILENAME

        out = {STORE_FILENAME: (self.store_sha256, self.store_size)}
        if self.embeddings_sha256 is not None and self.embeddings_size is not None:
            out[EMBEDDINGS_FILENAME] = (self.embeddings_sha256, self.embeddings_size)
        return out

    def to_event(self) -> dict[str, Any]:
        """The event as recorded: every field but the upload (its own event); the
        optional ones (restores, forced, evaluation_blob) only when set."""
        event = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "s3"}
        event["evaluation"] = dict(self.evaluation)
        return {k: v for k, v in event.items() if v is not None or k not in _OPTIONAL}

    @classmethod
    def from_event(cls, event: Mapping[str, Any], s3: Mapping[str, Any] | None) -> Publication:
        known = {f.name for f in fields(cls)} - {"s3"}
        given = {k: v for k, v in event.items() if k in known}
        return cls(**{"run_id": None, "trigger": "unknown", **given, "s3": s3})

    def to_dict(self) -> dict[str, Any]:
        """For `publications --json` and metadata: the event plus its S3 upload."""
        return {**self.to_event(), "s3": dict(self.s3) if self.s3 else None}

    def describe(self) -> str:
        """One line for `publications` and `status`."""
        what = f"rollback to #{self.restores}" if self.restores is not None else "published"
        figures = self.evaluation.get("figures") or {}
        headline = next(
            (f"{k} {v:.3f}" for k, v in sorted(figures.items()) if k.endswith("ndcg_at_10")),
            "no evaluation",
        )
        s3 = " +S3" if self.s3 else ""
        line = (
            f"#{self.id}  {self.when}  {what}{s3}  store {self.store_sha256[:12]}  "
            f"{headline}  ({self.trigger}, run {str(self.run_id or '-')[:8]})"
        )
        forced = self.forced_note()
        return f"{line}  {forced}" if forced else line

    def forced_note(self) -> str | None:
        """`FORCED (reason: ...)` for a forced publication, None for one that passed."""
        if self.forced is None:
            return None
        return f"FORCED (reason: {self.forced.get('reason') or 'none given'})"


@dataclass(frozen=True)
class Hold:
    """An active hold: publication `publication`'s bytes are not published again while
    the corpus digest and fixture are the ones recorded at the rollback."""

    publication: int
    store_sha256: str
    corpus_digest: str | None
    fixture_sha256: str | None
    when: str

    def holds(self, store_sha256: str, corpus_digest: str | None, fixture: str | None) -> bool:
        """True when publishing this build would put the rolled-back bytes (or the same
        inputs that made them) live again."""
        if store_sha256 == self.store_sha256:
            return True
        return corpus_digest == self.corpus_digest and fixture == self.fixture_sha256

    def describe(self) -> str:
        return (
            f"publication #{self.publication} is held since the rollback at {self.when}: "
            "scheduled and automatic runs do not publish it again until the corpus or the "
            "fixture changes (or `brain-pipeline rollback --release`)"
        )


@dataclass(frozen=True)
class History:
    """The events as read, and the views over them."""

    events: tuple[Mapping[str, Any], ...]

    def publications(self) -> list[Publication]:
        """Every publication, oldest first, each with its S3 upload when there was one."""
        uploads: dict[int, Mapping[str, Any]] = {}
        for event in self.events:
            if event.get("kind") == "s3":
                uploads[int(event["publication"])] = event
        return [
            Publication.from_event(e, uploads.get(int(e["id"])))
            for e in self.events
            if e.get("kind") in ("published", "rollback")
        ]

    def get(self, pub_id: int) -> Publication | None:
        return next((p for p in self.publications() if p.id == pub_id), None)

    def live(self) -> Publication | None:
        """The latest publication (what src/storage holds once it went through)."""
        pubs = self.publications()
        return pubs[-1] if pubs else None

    def previous(self) -> Publication | None:
        """What a plain `rollback` restores: the build publication before the live one's
        origin (so a second rollback goes one further back, not forward again)."""
        live = self.live()
        if live is None:
            return None
        earlier = [p for p in self.publications() if p.kind == "published" and p.id < live.origin]
        return earlier[-1] if earlier else None

    def hold(self) -> Hold | None:
        """The active hold (the last hold not followed by a release), if any."""
        active: Hold | None = None
        for event in self.events:
            if event.get("kind") == "hold":
                active = Hold(
                    int(event["publication"]),
                    str(event["store_sha256"]),
                    event.get("corpus_digest"),
                    event.get("fixture_sha256"),
                    str(event["when"]),
                )
            elif event.get("kind") == "release" and _ends(event, active):
                active = None
        return active

    def next_id(self) -> int:
        ids = [int(e["id"]) for e in self.events if "id" in e]
        return max(ids, default=0) + 1

    def generations(self, keep: int) -> list[Publication]:
        """The last `keep` distinct build publications (by origin), newest first, plus
        the live one: what rollback can still reach, so what archives must keep."""
        pubs = self.publications()
        kept: list[Publication] = []
        seen: set[str] = set()
        for pub in reversed(pubs):
            source = self.get(pub.origin) or pub
            if source.store_sha256 + str(source.embeddings_sha256) in seen:
                continue
            seen.add(source.store_sha256 + str(source.embeddings_sha256))
            kept.append(source)
            if len(kept) >= max(1, keep):
                break
        return kept


DDL = """
CREATE TABLE IF NOT EXISTS publication_events (
  seq {serial}, kind TEXT NOT NULL, pub_id INTEGER UNIQUE, event TEXT NOT NULL)
"""
_imported: set[tuple[int, str]] = set()


def _ready(memory: Memory) -> None:
    """The table exists and the old files of this build directory were read in (once)."""
    where = (id(memory.ledger), str(memory.layout.build_dir))
    if where in _imported:
        return
    memory.ledger.ensure_tables("publications", DDL)
    _import_old_files(memory)
    _imported.add(where)


def _insert(memory: Memory, events: Sequence[Mapping[str, Any]]) -> None:
    ledger = memory.ledger
    statement = ledger.sql("INSERT INTO publication_events (kind, pub_id, event) VALUES (?, ?, ?)")
    try:
        with ledger.transaction(write=True) as cursor:
            for event in events:
                numbered = event.get("kind") in ("published", "rollback")
                row = (str(event["kind"]), int(event["id"]) if numbered else None)
                cursor.execute(statement, (*row, json.dumps(dict(event), sort_keys=True)))
    except Exception as exc:
        if "unique" not in str(exc).lower():
            raise
        raise HistoryError(
            f"another worker recorded a publication meanwhile ({exc}); nothing was written"
        ) from None


def _ends(release: Mapping[str, Any], hold: Hold | None) -> bool:
    """A release ends the hold it names (the one its worker read), never a newer one
    another worker recorded meanwhile; a release naming none (older ones) ends any."""
    return hold is not None and release.get("publication") in (None, hold.publication)


def read_history(memory: Memory) -> History:
    """The shared history; empty when none was recorded."""
    _ready(memory)
    rows = memory.ledger.query("SELECT event FROM publication_events ORDER BY seq")
    try:
        return History(tuple(json.loads(event) for (event,) in rows))
    except ValueError as exc:
        raise HistoryError(f"the ledger's publication history is unreadable ({exc})") from None


def append_events(memory: Memory, events: Sequence[Mapping[str, Any]]) -> History:
    """Append `events` (one transaction) and return the history now recorded."""
    _ready(memory)
    _insert(memory, events)
    return read_history(memory)


def release(memory: Memory, hold: Hold, reason: str) -> None:
    """End `hold`, the one this worker read (never a newer one: see `_ends`)."""
    event = {"kind": "release", "publication": hold.publication, "when": utc_now()}
    append_events(memory, [{**event, "reason": reason}])


def _import_old_files(memory: Memory) -> None:
    """Read a pre-ledger build directory's history and archive in, once: only into an
    empty shared history (another worker's history is never mixed with this one)."""
    old = memory.layout.publications_record
    if not old.is_file() or memory.ledger.query("SELECT 1 FROM publication_events LIMIT 1"):
        return
    try:
        events = json.loads(old.read_bytes())["events"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HistoryError(f"{old} is unreadable ({exc}); nothing was imported") from None
    evaluations: dict[str, str] = {}
    objects = memory.layout.published_archive / "objects"
    for path in sorted(objects.glob("*/*")) if objects.is_dir() else ():
        digest = memory.blobs.put_file(path)
        if path.name == "evaluation.json":
            evaluations[path.parent.name] = digest
    for event in events:
        key = (event.get("evaluation") or {}).get("key")
        if key in evaluations:
            event["evaluation_blob"] = evaluations[key]
    _insert(memory, events)
    shutil.rmtree(objects, ignore_errors=True)  # its bytes are blobs now, checked by digest


def evaluation_summary(record: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the history keeps of an evaluation record: whether the gate let it through
    (its verdict's severity PASS or WARN), the figures, the record's key and run."""
    if not record:
        return {"passed": None, "severity": None, "figures": {}, "key": None, "run_id": None}
    figures = {
        k: float(v)
        for k, v in dict(record.get("figures") or {}).items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    verdict = record.get("verdict")
    severity = verdict.get("severity") if isinstance(verdict, Mapping) else None
    passed = severity != "ERROR" if severity is not None else record.get("passed")
    return {
        "passed": passed,
        "severity": severity,
        "figures": figures,
        "key": record.get("key"),
        "run_id": record.get("run_id"),
    }
