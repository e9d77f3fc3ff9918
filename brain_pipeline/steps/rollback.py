"""Make an earlier publication live again, and hold the one it replaces.

One function for the CLI (`brain-pipeline rollback`) and the Dagster job
(`rollback_job`): `rollback(cfg, layout, to=..., ...)`. The caller holds the run locks
(build directory, then publish root), as a publishing run does.

Order, each step crash-safe on its own:

1. Check first, change nothing: the target publication exists in the shared history
   (the ledger), is not already live, and every blob it needs (store, vectors, manifest,
   evaluation record) is in the blob store, whichever worker published it. Anything
   missing is listed, blob by blob, and the rollback refused. Then the publish gate
   (`publishing.gate.decide`) judges the target as it would a build: its kept
   evaluation verdict, its store (fetched from the blobs) measured again by
   `fits_agent_string_limit`'s rule, its chunk count. A rollback must not put live what
   publishing would refuse: a publication that passed goes back freely, a forced one
   only forced again (with a reason, where `publish.allow_force` allows it), and one
   the agent cannot load (too long, or empty) never.
2. Local: the fetched files go through `publish_local`, the same staged, journaled
   commit as a publication (a `kill -9` anywhere leaves the old set or the new one,
   finished or undone by `recover_publication`).
3. The regression baseline goes back to the restored publication's evaluation, and one
   transaction of the history records the rollback (a new publication restoring the
   old one) and a hold on the publication it replaced: from here on no scheduled run
   publishes the replaced store again, whatever happens to S3.
4. S3 (when a bucket is configured): `publish_s3` with the archived files and manifest;
   the content-addressed objects are normally still there (kept for the same
   generations), so only the manifest and the fixed names change; objects gone from the
   bucket are uploaded again from the fetched files. When this step fails or is cut, the
   history shows the live publication without its upload, and `rollback --to <that id>`
   finishes S3 alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from brain_pipeline.config import BrainConfig, memory_of
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.memory import Memory
from brain_pipeline.steps.contract import StepFailure, StepLog
from brain_pipeline.steps.publications import (
    build_identity,
    drop_fetched,
    fetched,
    missing_blobs,
    publications_table,
    record_in_history,
    record_s3_upload,
    retained_s3_keys,
)
from brain_pipeline.steps.publish import Upload, publish_version, recover
from brain_pipeline.steps.report import StepResult


class RollbackRefused(StepFailure):
    """Nothing was changed: the target is unknown, already live, or its blobs are gone."""


@dataclass(frozen=True)
class RollbackPlan:
    """What a rollback would restore and what it replaces."""

    target: Any
    """`publishing.publication_log.Publication` to make live again."""
    replaces: Any
    """The live publication it replaces (held afterwards)."""
    s3_only: bool = False
    """The target is live locally already and only its S3 upload is missing (a rollback
    or a publication whose upload failed or was cut): finish S3, change nothing else."""


def plan_rollback(memory: Memory, to: int | None, *, s3: bool = False) -> RollbackPlan:
    """The target (default: the publication before the live one) and the live one, or
    RollbackRefused saying why not, with every missing blob named. `s3`: a bucket is
    configured (then a live rollback whose upload never finished is finished)."""
    from brain_pipeline.publishing.publication_log import HistoryError, read_history
    from brain_pipeline.state.ledger import redacted

    try:
        history = read_history(memory)
    except HistoryError as exc:
        raise RollbackRefused(f"rollback refused: {exc}") from None
    live = history.live()
    if live is None:
        raise RollbackRefused(
            f"rollback refused: no publication is recorded in the ledger "
            f"{redacted(memory.ledger.url)}"
        )
    target = history.get(to) if to is not None else history.previous()
    if target is None:
        known = ", ".join(f"#{p.id}" for p in history.publications()) or "none"
        what = (
            f"publication #{to} is not in the history"
            if to is not None
            else (f"there is no publication before #{live.origin} to go back to")
        )
        raise RollbackRefused(f"rollback refused: {what} (known: {known})")
    source = history.get(target.origin) or target
    s3_only = source.manifest_sha256 == live.manifest_sha256
    if s3_only and (not s3 or live.s3):
        raise RollbackRefused(f"rollback refused: publication #{target.id} is already live")
    if s3_only and to is None:
        raise RollbackRefused(
            f"publication #{live.id} is live here but not yet in S3: finish it with "
            f"`brain-pipeline rollback --to {live.id}`"
        )
    wanted = {name: sha for name, (sha, _) in source.files().items()}
    wanted["manifest.json"] = source.manifest_sha256
    if source.evaluation_blob:
        wanted["evaluation.json"] = source.evaluation_blob
    missing = missing_blobs(memory, wanted)
    if source.evaluation.get("key") and not source.evaluation_blob:
        missing.append("evaluation.json: never kept")
    if missing:
        lines = "; ".join(missing)
        raise RollbackRefused(
            f"rollback to publication #{source.id} refused, nothing was changed: "
            f"{len(missing)} kept file(s) missing: {lines} "
            f"(only the last publish.keep_generations publications are kept)"
        )
    return RollbackPlan(source, live, s3_only)


def rollback(
    cfg: BrainConfig,
    layout: StateLayout,
    *,
    to: int | None,
    run_id: str,
    trigger: str,
    log: StepLog,
    upload: Upload | None,
    force: bool = False,
    reason: str = "",
) -> StepResult:
    """Make publication `to` (default: the previous one) live again everywhere; see the
    module. `upload` is the S3 publisher (None: S3 is left alone). `force` and `reason`:
    a person restores a publication its blocking checks did not pass (recorded)."""
    from brain_pipeline.publishing.commit import PublicationError
    from brain_pipeline.publishing.gate import Decision, force_refusal
    from brain_pipeline.publishing.local import publish_local
    from brain_pipeline.publishing.manifest import PublishManifest
    from brain_pipeline.publishing.publication_log import utc_now
    from brain_pipeline.publishing.s3_client import PublishError
    from brain_pipeline.publishing.source import ArtifactSource

    refused = force_refusal(
        force, reason, allow_force=cfg.publish.allow_force, how='rollback --force --reason "..."'
    )
    if refused is not None:
        raise RollbackRefused(f"rollback refused, nothing was changed: {refused}")
    recover(cfg, log)
    s3_wanted = upload is not None and bool(cfg.publish.s3.bucket)
    memory = memory_of(cfg)
    plan = plan_rollback(memory, to, s3=s3_wanted)
    target, replaced = plan.target, plan.replaces
    sources = {
        name: ArtifactSource.of_file(fetched(memory, sha, name), sha)
        for name, (sha, _) in target.files().items()
    }
    manifest = PublishManifest.from_json(memory.blobs.get_bytes(target.manifest_sha256))
    # Finishing the S3 upload of what is live here already puts nothing new live: no gate.
    decision = (
        Decision(True, f"publication #{target.id} is live here already: S3 only")
        if plan.s3_only
        else judge_target(cfg, target, manifest.chunk_count, force=force, reason=reason)
    )
    if not decision.allowed:
        raise RollbackRefused(
            f"rollback to publication #{target.id} refused, nothing was changed: {decision.reason}"
        )
    if decision.forced:
        log.warning(decision.reason)
    store = sources["knowledge-store.json"]
    vectors = sources.get("embeddings.bin")
    try:
        report = publish_local(
            store,
            vectors,
            cfg.publish_root(),
            agent_query_model=cfg.publish.agent_query_model,
            manifest=manifest,
        )
    except PublicationError as exc:
        raise StepFailure(str(exc)) from None
    for line in report.summary().splitlines():
        log.info(line)

    # Local first, then the record and the hold (one write): from here on no scheduled
    # run publishes the replaced store again, whatever happens to the S3 step below.
    publication = replaced
    if not plan.s3_only:
        _restore_baseline(cfg, target, log)
        _, corpus, fixture = build_identity(cfg, layout)
        hold = {
            "kind": "hold",
            "publication": replaced.origin,
            "store_sha256": replaced.store_sha256,
            "corpus_digest": corpus,
            "fixture_sha256": fixture,
            "when": utc_now(),
        }
        publication = record_in_history(
            cfg,
            report,
            _kept_evaluation(memory, target),
            run_id=run_id,
            trigger=trigger,
            log=log,
            kind="rollback",
            restores=target.id,
            then=lambda _: [hold],
            forced=decision.forced_record(),
        )

    s3_report = None
    if s3_wanted and upload is not None:
        try:
            s3_report = upload(cfg, store, vectors, report.manifest, retained_s3_keys(cfg))
        except PublishError as exc:
            done = (
                f"publication #{target.id} is live locally"
                if plan.s3_only
                else f"publication #{target.id} is live again locally (as #{publication.id}) "
                f"and #{replaced.origin} is held"
            )
            raise StepFailure(
                f"{done}, but S3 still serves the replaced set: {exc}; "
                f"finish it with `brain-pipeline rollback --to {publication.id}`"
            ) from None
        for line in s3_report.summary().splitlines():
            log.info(line)
        record_s3_upload(cfg, s3_report, log)
    drop_fetched(memory)
    s3_status = s3_report.status if s3_report is not None else "skipped: no bucket configured"
    summary = (
        f"publication #{publication.id} (restoring #{target.id}) was live locally; S3 now "
        f"holds it too ({s3_status})"
        if plan.s3_only
        else f"publication #{target.id} is live again as #{publication.id}; "
        f"#{replaced.origin} is held (S3: {s3_status})"
    )
    # The restored manifest's own version: the catalog shows the restored bytes as live.
    return StepResult(
        publish_version(report.manifest),
        {
            "summary": summary,
            "status": "rolled back",
            "s3_uploaded": s3_report is not None,
            "restored_publication": target.id,
            "as_publication": publication.id,
            "held_publication": replaced.origin,
            "store_sha256": target.store_sha256,
            "s3": s3_status,
            "decision": decision.reason,
            "forced": decision.forced,
            "force_reason": decision.force_reason,
            "publications": publications_table(cfg),
        },
    )


def judge_target(
    cfg: BrainConfig,
    target: Any,
    chunk_count: int,
    *,
    force: bool,
    reason: str,
) -> Any:
    """The publish gate's `Decision` on making `target` live again (see the module): its
    kept evaluation verdict, `fits_agent_string_limit` measured on its kept store
    (not overridable), its chunk count; a forced publication counts as one whose checks
    did not pass, whatever they say now, so only force brings it back."""
    import mmap

    from brain_pipeline.corpus.agent_limits import utf16_units_of_utf8
    from brain_pipeline.corpus.store import STORE_FILENAME
    from brain_pipeline.evaluation.service import stored_verdict
    from brain_pipeline.publishing.gate import CheckOutcome, decide
    from brain_pipeline.steps.health import NOT_OVERRIDABLE, string_limit_verdict

    memory = memory_of(cfg)
    path = fetched(memory, target.store_sha256, STORE_FILENAME)
    with path.open("rb") as handle:
        size = path.stat().st_size
        if size == 0:
            units = 0
        else:
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                units = utf16_units_of_utf8(data)
    fits = string_limit_verdict(cfg, units)
    name = "fits_agent_string_limit"
    checks = [
        CheckOutcome(
            name,
            "PASS" if fits.passed else fits.severity,
            fits.description,
            overridable=name not in NOT_OVERRIDABLE,
        )
    ]
    if target.forced is not None:
        checks.append(
            CheckOutcome(
                f"publication #{target.id}",
                "ERROR",
                f"it was forced over its blocking checks "
                f"(reason: {target.forced.get('reason') or 'none given'})",
            )
        )
    return decide(
        stored_verdict(_kept_evaluation(memory, target)),
        force=force,
        store_chunk_count=chunk_count,
        checks=checks,
        reason=reason,
        allow_force=cfg.publish.allow_force,
    )


def _kept_evaluation(memory: Memory, target: Any) -> dict[str, Any] | None:
    if not target.evaluation.get("key") or not target.evaluation_blob:
        return None
    return dict(json.loads(memory.blobs.get_bytes(target.evaluation_blob)))


def _restore_baseline(cfg: BrainConfig, target: Any, log: StepLog) -> None:
    """The restored publication's evaluation becomes the regression baseline again."""
    from brain_pipeline.evaluation.service import record_as_baseline

    evaluation = _kept_evaluation(memory_of(cfg), target)
    if evaluation is None:
        log.warning(f"publication #{target.id} has no kept evaluation: baseline unchanged")
        return
    try:
        record_as_baseline(
            cfg, evaluation, kind="published", note=f"rollback to publication #{target.id}"
        )
    except (OSError, KeyError, TypeError, ValueError) as exc:
        log.warning(f"the evaluation baseline was not set back: {exc}")


def release_hold(cfg: BrainConfig) -> str:
    """End the active hold (`rollback --release`); the sentence says what was released."""
    from brain_pipeline.publishing.publication_log import read_history, release

    memory = memory_of(cfg)
    hold = read_history(memory).hold()
    if hold is None:
        raise RollbackRefused("nothing to release: no publication is held")
    release(memory, hold, "released by hand")
    return f"the hold on publication #{hold.publication} is released"
