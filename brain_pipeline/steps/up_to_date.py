"""Could a full run change anything? Answered from the last successful full run's record.

A re-run after nothing changed used to cost seconds of fixed overhead (importing and
opening Dagster, writing a run's events) to conclude what a few stats can prove. The
record, a row of the ledger (table `up_to_date`, this module's area), holds every
input's digest (corpus, fixture, configuration, code, embedding provider and key), the
signature (utils.file_signature, the project's one "unchanged" rule) of every file the
run's outcome lives in (the build's artifacts and records, each file of the live
publication, proven first to be what the publish step stamped) and the Dagster instance
that saw it.

It is written in two moves, whichever launcher started the run (the command line,
the UI, a schedule, automation), once per run however many processes its steps take:

1. `run_started` (the run's own resource, defs/resources.py `BrainSettings`, under the
   run's lease): the record is removed (until a run is proven, nothing is) and the
   inputs are taken as the run starts, as *pending*; every run does this, whatever it
   selects, so a failed or partial run always leaves a build that is not "up to date";
2. `confirm`, once Dagster says the run is over: the pending row goes, and only when the
   run SUCCEEDED as a full run (every asset and every blocking check) what it left
   becomes the record: by the command after its own run, by the `up_to_date_record`
   sensor for the others.

The ledger is shared by every worker on it: any worker's run forgets the record, and a
record names the files of the build directory it rests on, so another worker (another
build directory) finds them changed and runs.

`check` compares the present with the record; `materialize` without a selection skips
the run only when everything is equal. Any doubt means a run: a missing, unreadable or
foreign record, another Dagster instance (DAGSTER_HOME or its dagster.yaml), a changed
or missing file, an interrupted publication, a configured S3 bucket (the bucket is only
checked by a run) — each is a reason, and the first one found is reported.

Nothing here imports Dagster, so the answer costs a corpus walk (settled files are not
read again: the observation's file index) and a few hundred stats. What only the
instance can say (its assets were wiped) is asked at most once per
CONSULT_AFTER_SECONDS (`UpToDate.consult_due`, `defs.up_to_date.consult_instance`). The skip
writes nothing to the instance: it is not a run, so it leaves no materialisation or
observation that automation, or the asset's history, would read as new data.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brain_pipeline.config import BrainConfig, CorpusNotFoundError, memory_of
from brain_pipeline.corpus.discovery import STATUS_SKIPPED
from brain_pipeline.corpus.observation import CorpusSnapshot, load_snapshot, observe_corpus
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Ledger
from brain_pipeline.state.records import read_record, store_facts
from brain_pipeline.utils.digest import file_sha256_or, value_digest
from brain_pipeline.utils.file_signature import FileSignature

_DDL = "CREATE TABLE IF NOT EXISTS up_to_date (name TEXT PRIMARY KEY, body TEXT NOT NULL)"
CONSULT_AFTER_SECONDS = 3600.0
"""How long a skip trusts the instance's last confirmation that it holds the recorded
run's materialisations: after that, the command asks the instance again, which costs an
import of Dagster (see docs/operations.md)."""
FULL_RUN_ASSETS = ("knowledge_chunks", "knowledge_store", "embeddings", "published_local")
"""What a run must have selected (with FULL_RUN_CHECKS) to be recorded: a partial run
proves nothing about the rest."""
FULL_RUN_CHECKS = (
    "embeddings:retrieval_eval",
    "knowledge_store:fits_agent_string_limit",
)
"""The code location's blocking checks (`asset:check`), which a recorded run must have
run: what the publication rests on. Non-blocking checks are advice (an automation run
may leave the separately defined ones out). Pinned against the code location by
brain_pipeline_tests/defs/test_up_to_date.py, so a new blocking check must be added here."""
_SOURCE_ROOT = Path(__file__).resolve().parents[1]
S3_CONFIGURED = "S3 publishing is configured (only a run checks the bucket)"


RECORD = "record"
"""The one row: the last successful full run's record (with when the instance last
confirmed it holds that run, `seen_at`), or, `pending`, the run in progress (or the last
run, until settled): a run that starts replaces the record, so none outlives it."""


def _read(ledger: Ledger) -> dict[str, Any] | None:
    ledger.ensure_tables("up_to_date", _DDL)
    rows = ledger.query("SELECT body FROM up_to_date WHERE name = ?", (RECORD,))
    try:
        body = json.loads(rows[0][0]) if rows else None
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _write(ledger: Ledger, body: Mapping[str, Any] | None) -> None:
    """Write the row, or remove it (`body` None)."""
    ledger.ensure_tables("up_to_date", _DDL)
    if body is None:
        ledger.execute("DELETE FROM up_to_date WHERE name = ?", (RECORD,))
        return
    ledger.execute(
        "INSERT INTO up_to_date VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET body = excluded.body",
        (RECORD, json.dumps(body, sort_keys=True)),
    )


@dataclass(frozen=True)
class UpToDate:
    """The answer: `current` with the run and publication time it rests on, else why not."""

    current: bool
    reason: str
    run_id: str | None = None
    published_at: str | None = None
    seen_at: float | None = None
    """When the instance last confirmed it holds the run (None: never)."""

    def consult_due(self, now: float) -> bool:
        """Whether the skip must ask the instance first: it never confirmed this run, or
        not within CONSULT_AFTER_SECONDS (a wipe since)."""
        seen = self.seen_at
        return seen is None or not 0 <= now - seen < CONSULT_AFTER_SECONDS

    def message(self) -> str:
        if self.current:
            return (
                f"up to date: nothing changed since run {self.run_id} "
                f"(published {self.published_at or 'at an unknown time'})"
            )
        return f"running: {self.reason}"


# --- the inputs ----------------------------------------------------------------------------


def source_digest(root: Path = _SOURCE_ROOT) -> str:
    """The signatures of every module of the package: any edit to the code (an upgrade
    too) is a change, without a version kept by hand (a stat per file, nothing read)."""
    rows: list[tuple[str, list[int]]] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                signature = FileSignature.of(path)
                rows.append((os.path.relpath(path, root), signature.as_list() if signature else []))
    return value_digest(rows)


def key_digest(key: str | None, salt: str) -> str | None:
    """A salted digest of the embedding key: tells a changed key from the same one
    without the record ever holding (or allowing a dictionary lookup of) the key."""
    return None if key is None else value_digest([salt, key])[:16]


def corpus_identity(snapshot: CorpusSnapshot) -> str:
    """The corpus digest plus what the walk skipped and why: a new ignored or unreadable
    file changes the run's report, so it is a change too (mtimes alone are not)."""
    skipped = [
        (e.source, e.status, e.reason) for e in snapshot.entries if e.status == STATUS_SKIPPED
    ]
    return value_digest([snapshot.digest, snapshot.root, snapshot.areas, skipped])


def current_inputs(cfg: BrainConfig, salt: str) -> dict[str, Any]:
    """Every input of a full run but the corpus (the costly one, read last)."""
    return {
        "config": value_digest(cfg.model_dump(mode="json")),
        "provider": cfg.effective_provider(),
        "provider_label": cfg.provider_label(),
        "key": key_digest(cfg.gemini_api_key(), salt),
        "fixture": file_sha256_or(cfg.evaluation.fixture, "missing"),
        "source": source_digest(),
    }


# --- the files a run's outcome lives in ------------------------------------------------------


def _outcome_files(layout: StateLayout) -> list[Path]:
    """The build's artifacts and records: a later run (UI, schedule, a selection) that
    changed any of them rewrote it, which changes its signature. (The evaluation's
    outcomes, baselines and the asset records are in the ledger: a later run that
    judged or built other bytes rewrote the store or the vectors.)"""
    return [layout.store_file, layout.embeddings_file]


def _signatures(paths: Iterable[Path | str]) -> dict[str, list[int] | None]:
    out: dict[str, list[int] | None] = {}
    for path in paths:
        signature = FileSignature.of(path)
        out[str(path)] = signature.as_list() if signature is not None else None
    return out


def _listing(directory: Path) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except FileNotFoundError:
        return []


class NotVerified(Exception):
    """The live publication is not (provably) what the last run built: no record is kept."""


def verified_publication(cfg: BrainConfig, layout: StateLayout) -> dict[str, Any]:
    """The live publication, proven to be what the publish step left, and the build's.

    Every file the `published_local` record stamped (each storage copy's artifacts and
    manifest) must still match its stamp by the one rule (nothing is hashed again), each
    storage folder must hold those files and no other, and the store the live manifest
    publishes must be the build's store. Returns what `check` compares later: the
    storage directories, their listings and the signatures of every live file. Raises
    NotVerified otherwise.
    """
    from brain_pipeline.publishing.commit import intent_path, pending_commit, storage_dirs
    from brain_pipeline.publishing.local import live_manifest

    root = cfg.publish_root()
    if pending_commit(root) is not None:
        raise NotVerified("a publication commit awaits recovery")
    manifest = live_manifest(root)
    if manifest is None:
        raise NotVerified("nothing is published")
    published = read_record(memory_of(cfg), "published_local")
    store = read_record(memory_of(cfg), "knowledge_store")
    if published is None or store is None:
        raise NotVerified("no record of the publication or of the store")
    if published.facts.get("publish_root") != str(root):
        raise NotVerified("the publication record is of another publish root")
    build_store = store.outputs.get(layout.store_file.name)
    if build_store is None or not build_store.still_matches(layout.store_file):
        raise NotVerified("the build's store is not the one its record describes")
    if manifest.store.sha256 != build_store.sha256:
        raise NotVerified("the live store is not the build's")
    live = [Path(path) for path in published.outputs]
    for path in live:
        if not published.outputs[str(path)].still_matches(path):
            raise NotVerified(f"{path} is not the file the publish step left")
    targets = storage_dirs(root)
    for directory in targets:
        names = {path.name for path in live if path.parent == directory}
        if not names or set(_listing(directory)) != names:
            raise NotVerified(f"{directory} holds other files than the publish step left")
    # What `check` lists instead of importing the publishing code: the root (a new
    # `dist` adds a target), the folder an interrupted commit leaves its intent in, and
    # each storage copy (a file added to it).
    intent_dir = intent_path(root).parent
    return {
        "root": str(root),
        "intent_dir": str(intent_dir),
        "listings": {str(d): _listing(d) for d in [root, intent_dir, *targets]},
        "files": _signatures(live),
        "published_at": manifest.published_at,
    }


# --- the record -------------------------------------------------------------------------------


def instance_identity(home: Path | str) -> dict[str, Any]:
    """The Dagster instance a run was seen by: its folder and its dagster.yaml's signature
    (another folder, or storages switched in the same folder, is an instance that has
    not seen the run)."""
    folder = Path(home).expanduser().resolve()
    signature = FileSignature.of(folder / "dagster.yaml")
    return {"home": str(folder), "settings": signature.as_list() if signature else None}


def touches_record(assets: Iterable[str] | None, checks: Iterable[str] | None) -> bool:
    """Whether a run selecting `assets` and `checks` (as for `is_full_selection`) can change
    what the record rests on or what the UI shows for it: any asset of a full run, or
    any check of one. A run of `published_s3` alone (uploading nothing when no bucket
    is configured) cannot."""
    if assets is None:
        return True
    if set(assets) & set(FULL_RUN_ASSETS):
        return True
    return any(name.split(":", 1)[0] in FULL_RUN_ASSETS for name in checks or ())


def is_full_selection(assets: Iterable[str] | None, checks: Iterable[str] | None) -> bool:
    """Whether a run selected every asset of a full run and every blocking check: `assets`
    are the run's asset names (None: all), `checks` its check names as `asset:check`
    (None: Dagster runs every check of the selected assets)."""
    if assets is not None and not set(FULL_RUN_ASSETS) <= set(assets):
        return False
    return checks is None or set(FULL_RUN_CHECKS) <= set(checks)


def run_started(
    cfg: BrainConfig,
    run_id: str,
    assets: Iterable[str] | None = None,
    checks: Iterable[str] | None = None,
) -> None:
    """A run is starting on this build directory (called under its lock, by every run).

    The record goes (a failed or partial run must leave no "up to date"), and the inputs
    are taken as the run starts: an input edited while the run reads it is then a reason
    not to record. Idempotent for one run (a step process of a multiprocess run enters
    the run's resource again). `assets`, `checks`: the run's selection (None: all), for
    `touches_record`."""
    if not touches_record(assets, checks):
        return
    ledger = memory_of(cfg).ledger
    if pending_run(ledger) != run_id:
        _write(ledger, {"run_id": run_id, "pending": True, "inputs": current_inputs(cfg, run_id)})


def confirm(
    cfg: BrainConfig,
    run_id: str,
    instance_home: Path | str,
    *,
    refused: str | None = None,
    now: float | None = None,
) -> str | None:
    """Run `run_id` is over (Dagster says so): settle its pending row. Unless `refused`
    says why the run proves nothing (it did not succeed, or was not a full run), what
    it left becomes the record; None when recorded, else why not. Call under the
    ledger's run lease, before another run starts (that run's `run_started` replaces
    the pending row: then nothing).

    The inputs taken as the run started must still be the inputs: one edited while the
    run read it (the fixture, a module) is not what the run used, so then, when the
    publication cannot be verified, or when S3 publishing is configured (only a run
    checks the bucket), there is no record and the next run runs in full.
    """
    ledger = memory_of(cfg).ledger
    pending = _read(ledger)
    if pending is None or not pending.get("pending") or pending.get("run_id") != run_id:
        return refused or "another run started since this one"
    _write(ledger, None)
    if refused is not None:
        return refused
    layout = memory_of(cfg).layout
    if cfg.publish.s3.bucket:
        return S3_CONFIGURED
    inputs = current_inputs(cfg, run_id)
    if inputs != pending.get("inputs"):
        return "an input changed during the run"
    try:
        publication = verified_publication(cfg, layout)
    except NotVerified as exc:
        return str(exc)
    # The corpus as the run observed it (the snapshot its store was built from), not as
    # it is now: a file edited during the run then differs at the next check, which runs.
    store = store_facts(memory_of(cfg))
    digest = store.corpus_digest if store is not None else None
    try:
        snapshot = load_snapshot(memory_of(cfg), str(digest))
    except (OSError, ValueError):
        return "the corpus snapshot of the run cannot be read"
    at = time.time() if now is None else now
    _write(
        ledger,
        {
            "run_id": run_id,
            "inputs": {**inputs, "corpus": corpus_identity(snapshot)},
            "build": _signatures(_outcome_files(layout)),
            "publication": publication,
            "instance": instance_identity(instance_home),
            "seen_at": at,  # the instance has just seen the run: not asked for an hour
        },
    )
    return None


def _run_of(ledger: Ledger, *, pending: bool) -> str | None:
    body = _read(ledger)
    run_id = body.get("run_id") if body is not None else None
    ours = body is not None and bool(body.get("pending")) == pending
    return run_id if ours and isinstance(run_id, str) else None


def pending_run(ledger: Ledger) -> str | None:
    """The run whose outcome awaits Dagster's verdict (None: none)."""
    return _run_of(ledger, pending=True)


def recorded_run(ledger: Ledger) -> str | None:
    """The run the record rests on (None: no readable record)."""
    return _run_of(ledger, pending=False)


def forget(ledger: Ledger, run_id: str) -> None:
    """Remove the record of run `run_id` (the instance no longer holds that run)."""
    if recorded_run(ledger) == run_id:
        _write(ledger, None)


def mark_seen(ledger: Ledger, run_id: str, now: float) -> None:
    """The instance holds run `run_id`'s materialisations (asked at `now`): no need to ask
    it again for CONSULT_AFTER_SECONDS."""
    body = _read(ledger)
    if body is not None and not body.get("pending") and body.get("run_id") == run_id:
        _write(ledger, {**body, "seen_at": now})


# --- the check --------------------------------------------------------------------------------


def _first_difference(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> str | None:
    names = {
        "config": "the configuration changed",
        "provider": "the embedding provider changed",
        "provider_label": "the embedding provider changed",
        "key": "the embedding key changed",
        "fixture": "the evaluation fixture changed",
        "source": "the code changed",
        "corpus": "the corpus changed",
    }
    for key, why in names.items():
        if key in now and recorded.get(key) != now[key]:
            return why
    return None


def _changed_file(recorded: Mapping[str, Any]) -> str | None:
    for path, signature in recorded.items():
        now = FileSignature.of(path)
        if (now.as_list() if now is not None else None) != signature:
            return path
    return None


def check(cfg: BrainConfig) -> UpToDate:
    """Whether a full run could change anything now (cheapest comparisons first)."""
    layout = memory_of(cfg).layout
    body = _read(memory_of(cfg).ledger)
    if body is None or body.get("pending"):
        return UpToDate(False, "no successful full run is recorded for this build directory")
    run_id = str(body.get("run_id"))
    if cfg.publish.s3.bucket:
        return UpToDate(False, S3_CONFIGURED)
    if body.get("instance") != instance_identity(cfg.instance_home()):
        return UpToDate(
            False,
            f"the Dagster instance {cfg.instance_home()} has not seen run {run_id} "
            "(another DAGSTER_HOME, or its dagster.yaml changed)",
        )
    recorded_inputs = dict(body.get("inputs") or {})
    publication = dict(body.get("publication") or {})
    if publication.get("root") != str(cfg.publish_root()):
        return UpToDate(False, "the publish root changed")
    build = dict(body.get("build") or {})
    changed = _changed_file(build)
    if changed:
        return UpToDate(False, f"{changed} changed since run {run_id}")
    if set(map(str, _outcome_files(layout))) != set(build):
        return UpToDate(False, f"another asset was materialised since run {run_id}")
    changed = _changed_file(dict(publication.get("files") or {}))
    if changed:
        return UpToDate(False, f"the live publication changed ({changed})")
    listings = dict(publication.get("listings") or {})
    if not listings:
        return UpToDate(False, "the record lists no publication folders")
    for directory, names in listings.items():
        if _listing(Path(directory)) != names:
            if directory == publication.get("intent_dir"):
                return UpToDate(False, "a publication commit awaits recovery")
            return UpToDate(False, f"{directory} holds other files than were published")
    difference = _first_difference(recorded_inputs, current_inputs(cfg, run_id))
    if difference:
        return UpToDate(False, difference)
    try:  # the corpus as the `corpus` observation would see it, writing nothing
        limits = cfg.ingest_limits()
        snapshot = observe_corpus(cfg.corpus_root(), memory_of(cfg), limits=limits, record=False)
    except (CorpusNotFoundError, OSError) as exc:
        return UpToDate(False, f"the corpus cannot be read: {exc}")
    if corpus_identity(snapshot) != recorded_inputs.get("corpus"):
        return UpToDate(False, "the corpus changed")
    seen_at = body.get("seen_at")
    return UpToDate(
        True,
        "",
        run_id,
        publication.get("published_at"),
        float(seen_at) if isinstance(seen_at, int | float) else None,
    )
