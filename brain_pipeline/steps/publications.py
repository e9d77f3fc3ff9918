"""The publication history and its files, as the publish steps and the rollback use them.

`publishing.publication_log` is the record, kept in the ledger; a publication's files are
blobs named by their sha256 (the store, its vectors, the manifest, the evaluation record),
so any worker sharing the ledger and the blobs can roll back to them. Here they meet the
configuration: whether a rollback holds the build back, what a publication adds to the
history, which blobs and S3 objects the kept generations (`publish.keep_generations`)
need (reachability from the shared history, never one worker's), and the table the
publish assets show.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from brain_pipeline.config import BrainConfig, memory_of
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.memory import Memory
from brain_pipeline.state.records import store_facts
from brain_pipeline.steps.contract import StepFailure, StepLog
from brain_pipeline.steps.report import StepResult, Table
from brain_pipeline.utils.digest import sha256_hex


def build_identity(
    cfg: BrainConfig, layout: StateLayout
) -> tuple[str | None, str | None, str | None]:
    """(store sha256, corpus digest, fixture sha256) of the build about to be published."""
    from brain_pipeline.evaluation.service import evaluation_inputs

    inputs = evaluation_inputs(cfg, layout.build_dir)
    store = store_facts(memory_of(cfg))
    digest = (store.corpus_digest or None) if store else None
    if inputs is None:
        return None, digest, None
    return inputs.store_sha256, digest, inputs.fixture_sha256


def held_by_rollback(
    cfg: BrainConfig, layout: StateLayout, *, force: bool, log: StepLog
) -> StepResult | None:
    """A "held" result when a rollback holds this build back; None to go on publishing.

    The hold ends by itself once the corpus or the fixture differs from what it was at
    the rollback (a release event is recorded, so `status` stops mentioning it).
    """
    from brain_pipeline.publishing.publication_log import HistoryError, read_history, release

    memory = memory_of(cfg)
    try:
        history = read_history(memory)
    except HistoryError as exc:
        raise StepFailure(f"publishing refused: {exc}") from None
    hold = history.hold()
    if hold is None:
        return None
    store_sha, corpus, fixture = build_identity(cfg, layout)
    if force:
        log.warning(f"FORCED PUBLISH despite the hold: {hold.describe()}")
    elif store_sha is not None and hold.holds(store_sha, corpus, fixture):
        log.warning(f"not published: {hold.describe()}")
        live = history.live()
        version = live.store_sha256[:16] if live else "held"
        return StepResult(
            version,
            {
                "status": "held",
                "held_publication": hold.publication,
                "hold": hold.describe(),
                "publications": publications_table(cfg),
            },
        )
    why = "forced" if force else "the corpus or the fixture changed since the rollback"
    release(memory, hold, why)
    log.info(f"hold on publication #{hold.publication} released: {why}")
    return None


def record_in_history(
    cfg: BrainConfig,
    report: Any,
    evaluation: dict[str, Any] | None,
    *,
    run_id: str,
    trigger: str,
    log: StepLog,
    kind: str = "published",
    restores: int | None = None,
    then: Callable[[int], list[dict[str, Any]]] | None = None,
    forced: dict[str, str] | None = None,
) -> Any:
    """Append a publication to the history and keep its files as blobs (for rollback),
    then delete the blobs of generations rollback can no longer reach. Nothing is
    recorded when the same bytes were already the live publication (an unchanged
    re-publish). `then(id)`: more events that go in the same transaction (a rollback's
    hold), so a crash never leaves the publication without them. `forced`: the force's
    reason and what it overrode, for a publication a person forced over its blocking
    checks."""
    from brain_pipeline.publishing.publication_log import (
        Publication,
        append_events,
        evaluation_summary,
        read_history,
        utc_now,
    )

    memory = memory_of(cfg)
    history = read_history(memory)
    manifest = report.manifest
    manifest_bytes = manifest.to_json()
    manifest_sha = sha256_hex(manifest_bytes)
    live = history.live()
    if kind == "published" and live is not None and live.manifest_sha256 == manifest_sha:
        return live
    source_dir = report.targets[0].directory
    keep_file(memory, source_dir / "knowledge-store.json", manifest.store.sha256)
    if manifest.embeddings is not None:
        keep_file(memory, source_dir / "embeddings.bin", manifest.embeddings.sha256)
    memory.blobs.put_bytes(manifest_bytes)
    summary = evaluation_summary(evaluation)
    evaluation_blob = None
    if evaluation is not None and summary["key"]:
        record = json.dumps(evaluation, sort_keys=True, default=str).encode("utf-8")
        evaluation_blob = memory.blobs.put_bytes(record)
    publication = Publication(
        id=history.next_id(),
        kind=kind,
        when=utc_now(),
        run_id=run_id,
        trigger=trigger,
        corpus_digest=manifest.corpus_digest,
        store_sha256=manifest.store.sha256,
        store_size=manifest.store.size,
        embeddings_sha256=manifest.embeddings.sha256 if manifest.embeddings else None,
        embeddings_size=manifest.embeddings.size if manifest.embeddings else None,
        manifest_sha256=manifest_sha,
        evaluation=summary,
        baseline=summary["key"] if evaluation is not None else None,
        restores=restores,
        forced=forced,
        evaluation_blob=evaluation_blob,
    )
    extra = then(publication.id) if then is not None else []
    history = append_events(memory, [publication.to_event(), *extra])
    removed = prune_blobs(memory, history, cfg.publish.keep_generations)
    if removed:
        log.info(f"publication blobs: {len(removed)} of older generations removed")
    return publication


def keep_file(memory: Memory, path: Path, sha256: str) -> None:
    """Keep a live file (already verified to hold `sha256`) as a blob: by hard link in a
    local blob folder on the same filesystem (live files are only replaced by rename),
    else stored (uploaded) and checked."""
    from brain_pipeline.state.blobs import LocalBlobs

    if isinstance(memory.blobs, LocalBlobs) and memory.blobs.link(path, sha256):
        return
    if memory.blobs.put_file(path) != sha256:
        raise StepFailure(f"{path} changed while it was being kept for rollback")


def blob_digests(pub: Any) -> set[str]:
    """The blobs a publication's rollback needs."""
    named = {pub.store_sha256, pub.manifest_sha256, pub.embeddings_sha256, pub.evaluation_blob}
    return {str(d) for d in named if d}


def reachable_blobs(memory: Memory, history: Any, keep: int) -> set[str]:
    """Every blob something kept still reaches (issue 41: clean-up is reachability from
    the ledger, the same from every worker), walked from these roots:

    - the generations the history keeps (`History.generations`): their files;
    - the current asset records' outputs (an older record's are not kept: such a record
      is simply no longer current when its blob is gone);
    - every pointer's value (baselines, gaps, shared query vectors), except a known-item
      candidate of an evaluation nothing below keeps;
    - the evaluation outcomes of the kept generations and the newest one (what the next
      publish gate looks up); an older outcome gone is measured again if ever needed;
    - the vector packs and bases (what a resumed embedding reads).

    A content-addressed blob can be reached several ways (the published embeddings.bin
    is the embeddings base), so a generation leaving the history never takes along a
    blob another root reaches. A pointer moved on leaves its old value unreachable."""
    from brain_pipeline.embedding.packs import DDL as PACKS_DDL
    from brain_pipeline.evaluation import judgements
    from brain_pipeline.state.records import POINTER

    ledger = judgements.ready(memory).ledger
    kept: set[str] = set()
    keys: set[str] = set()
    for pub in history.generations(keep):
        kept |= blob_digests(pub)
        if pub.evaluation.get("key"):
            keys.add(str(pub.evaluation["key"]))
    outcomes = ledger.query("SELECT key, outcome FROM eval_outcomes ORDER BY recorded_at DESC")
    keys |= {str(key) for key, _ in outcomes[:1]}
    kept |= {str(blob) for key, blob in outcomes if key in keys}
    current = ledger.query(
        "SELECT s.outputs FROM pointers p JOIN step_results s "
        "ON p.name = ? || s.step AND p.value = s.inputs || ' ' || s.code",
        (POINTER,),
    )
    for (outputs,) in current:
        kept |= {str(d) for d in json.loads(outputs).values()}
    for name, value in ledger.query("SELECT name, value FROM pointers"):
        candidate = str(name).startswith(judgements.CANDIDATE)
        if not candidate or str(name)[len(judgements.CANDIDATE) :] in keys:
            kept.add(str(value))
    ledger.ensure_tables("embedding", PACKS_DDL)
    kept |= {str(blob) for (blob,) in ledger.query("SELECT blob FROM embedding_packs")}
    return kept


def prune_blobs(memory: Memory, history: Any, keep: int) -> list[str]:
    """After a publication: delete the blobs of the generations the history no longer
    keeps, unless something else reaches them (`reachable_blobs`). Only the history's
    own blobs are looked at, so a publish never lists the whole blob store; `gc` does."""
    named: set[str] = set()
    for pub in history.publications():
        named |= blob_digests(pub)
    return _delete(memory, named - reachable_blobs(memory, history, keep))


def collect_blobs(memory: Memory, keep: int) -> list[str]:
    """`brain-pipeline gc`: delete every blob `reachable_blobs` does not reach (old
    evaluation outcomes and candidates, a pointer's former values, older records'
    outputs, pruned generations), and the temporary files an interrupted writer left in
    a local blob folder over an hour ago. Run under the run lease: no run of this ledger
    is writing blobs it has not yet recorded."""
    from brain_pipeline.publishing.publication_log import read_history

    reached = reachable_blobs(memory, read_history(memory), keep)
    gone = _delete(memory, set(memory.blobs.list()) - reached)
    return gone + [str(path) for path in _sweep_temporary(memory)]


def _delete(memory: Memory, digests: set[str]) -> list[str]:
    gone = sorted(d for d in digests if memory.blobs.has(d))
    for digest in gone:
        memory.blobs.delete(digest)
    return gone


def _sweep_temporary(memory: Memory, min_age_seconds: float = 3600.0) -> list[Path]:
    """The non-blob files of a local blob folder older than `min_age_seconds` (a writer
    killed between its temporary file and the rename), removed. A younger one may belong
    to a writer at work on another worker sharing the folder, so it stays."""
    import time

    from brain_pipeline.state.blobs import NAMESPACE, LocalBlobs

    if not isinstance(memory.blobs, LocalBlobs):
        return []  # an S3 put is atomic: it leaves no partial object behind
    swept: list[Path] = []
    digest = re.compile(r"[0-9a-f]{64}")
    for path in sorted((memory.blobs.root / NAMESPACE).glob("??/*")):
        with contextlib.suppress(FileNotFoundError):
            stale = time.time() - path.lstat().st_mtime > min_age_seconds
            if path.is_file() and not digest.fullmatch(path.name) and stale:
                path.unlink()
                swept.append(path)
    return swept


def missing_blobs(memory: Memory, wanted: Mapping[str, str]) -> list[str]:
    """`filename (sha256 ...)` for each of `wanted` (filename -> digest) the blobs lack."""
    return [
        f"{name} (sha256 {digest[:16]}): no blob {digest} in {memory.blobs!r} (pruned or deleted)"
        for name, digest in sorted(wanted.items())
        if not memory.blobs.has(digest)
    ]


def fetched(memory: Memory, digest: str, filename: str) -> Path:
    """A local copy of blob `digest` as `filename` (checked as it is fetched), in the
    build directory's cache of publication files."""
    path = memory.layout.published_archive / digest / filename
    if not path.is_file() or path.stat().st_size == 0:
        memory.blobs.get_file(digest, path)
    return path


def drop_fetched(memory: Memory) -> None:
    """Empty that cache (once a rollback is done everywhere: its files are live)."""
    import shutil

    root = memory.layout.published_archive
    for folder in root.glob("?" * 64) if root.is_dir() else ():
        shutil.rmtree(folder, ignore_errors=True)


def retained_s3_keys(cfg: BrainConfig) -> frozenset[str]:
    """The S3 objects of the generations the shared history keeps (the garbage collection
    leaves them, whichever worker uploaded them). An unreadable history fails the run:
    clean-up never guesses what is kept."""
    from brain_pipeline.publishing.publication_log import HistoryError, read_history

    try:
        history = read_history(memory_of(cfg))
    except HistoryError as exc:
        raise StepFailure(f"S3 clean-up refused: {exc}") from None
    keys: set[str] = set()
    for pub in history.generations(cfg.publish.keep_generations):
        upload = pub.s3 or {}
        keys |= {str(k) for k in dict(upload.get("objects") or {}).values()}
    return frozenset(keys)


def record_s3_upload(cfg: BrainConfig, report: Any, log: StepLog) -> None:
    """Note in the history that the live publication reached the bucket (once)."""
    from brain_pipeline.publishing.publication_log import append_events, read_history, utc_now

    if report.manifest is None:
        return
    memory = memory_of(cfg)
    live = read_history(memory).live()
    if live is None or live.store_sha256 != report.manifest.store.sha256:
        log.warning("S3 upload not recorded in the history: the local publication differs")
        return
    objects = {
        o.key.rsplit("/", 1)[-1]: o.key
        for o in report.objects
        if o.action != "removed" and "/objects/" in f"/{o.key}"
    }
    if live.s3 and dict(live.s3.get("objects") or {}) == objects:
        return
    where = {"bucket": report.bucket, "prefix": report.prefix, "objects": objects}
    append_events(memory, [{"kind": "s3", "publication": live.id, "when": utc_now(), **where}])


def publications_table(cfg: BrainConfig, limit: int = 20) -> Any:
    """The latest publications as a table (newest first), for the publish assets."""
    from brain_pipeline.publishing.publication_log import HistoryError, read_history

    try:
        pubs = read_history(memory_of(cfg)).publications()
    except HistoryError as exc:
        return str(exc)
    rows = [
        [
            p.id,
            p.when,
            p.kind if p.restores is None else f"rollback to #{p.restores}",
            p.trigger,
            str(p.run_id or ""),
            p.store_sha256[:16],
            (p.embeddings_sha256 or "")[:16],
            str(p.corpus_digest or "")[:16],
            bool(p.s3),
            str((p.forced or {}).get("reason") or ""),
        ]
        for p in reversed(pubs[-limit:])
    ]
    return Table(
        [
            ("id", "int"),
            ("when", "string"),
            ("kind", "string"),
            ("trigger", "string"),
            ("run_id", "string"),
            ("store_sha256", "string"),
            ("embeddings_sha256", "string"),
            ("corpus_digest", "string"),
            ("s3", "bool"),
            ("forced_reason", "string"),
        ],
        rows,
    )
