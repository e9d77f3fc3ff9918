"""The two publish steps: to the agent's storage folders, then to S3, each gated.

Within one Dagster run a failed blocking check keeps these steps from running at all.
Run without it (a selection below it, a UI launch of the publish asset alone, a
re-execution), they still refuse unless *every* blocking check recorded a passing
verdict on exactly what they would publish: the evaluation's record for the inputs
(store, vectors, fixture, thresholds, code) judged under today's rule (settings and
baselines: `evaluation.verdict_rule`), and the ledger's `verdicts` for the store
(`steps.health.BLOCKING_CHECK_KEYS`). The verdicts are read as their checks stored them
and `publishing.gate.decide` makes the decision (a person can override a refusal with
`force`, which is logged once per step). The build directory, not the Dagster instance,
is the source of truth, so the gate holds on a fresh instance and cannot read another
build's result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brain_pipeline.config import BrainConfig, memory_of
from brain_pipeline.state.records import FileStamp, code_version, read_record, store_facts
from brain_pipeline.steps.contract import (
    StepFailure,
    StepLog,
    current_record,
    record_step,
)
from brain_pipeline.steps.evaluate import known_item_figures
from brain_pipeline.steps.publications import (
    held_by_rollback,
    publications_table,
    record_in_history,
    record_s3_upload,
    retained_s3_keys,
)
from brain_pipeline.steps.report import Markdown, RunLink, StepResult

if TYPE_CHECKING:
    from brain_pipeline.evaluation.verdict import EvaluationVerdict
    from brain_pipeline.publishing.gate import CheckOutcome, Decision
    from brain_pipeline.publishing.source import ArtifactSource
    from brain_pipeline.steps.contract import Build

PUBLISH_CODE_VERSION = code_version("published_local")


@dataclass
class BuildArtifacts:
    """What a publish step publishes: the build's files by path (never their bytes: the
    store of a large corpus is ~480 MB) with the digests already known for them."""

    store: ArtifactSource
    """sha256 from the store view's index: known without hashing the file again."""
    embeddings: ArtifactSource | None
    """sha256 from the embeddings record's stamp (or the evaluation's stat-keyed memo)."""
    counts: tuple[dict[str, int], list[str]]
    """Chunks per area and the live ids, for the manifest."""
    evaluation: dict[str, float]
    evaluation_run_id: str | None
    corpus_digest: str | None
    verdict: EvaluationVerdict | None
    """The evaluation's verdict on these bytes, as it was recorded."""
    decision: Decision
    """What `publishing.gate.decide` made of it."""

    @property
    def store_sha256(self) -> str:
        return self.store.sha256


def recover(cfg: BrainConfig, log: StepLog) -> None:
    """Finish or undo an interrupted publication before anything is judged or written."""
    from brain_pipeline.publishing.commit import RecoveryError, recover_publication

    try:
        report = recover_publication(cfg.publish_root())
    except RecoveryError as exc:
        raise StepFailure(str(exc)) from None
    if report.changed_anything:
        log.warning(report.summary())


def evaluation_of_build(
    cfg: BrainConfig, build: Build
) -> tuple[str | None, dict[str, Any] | None]:
    """(key, record) of the evaluation of exactly `build`'s inputs; record None if none,
    or if its verdict was made under another rule (settings, baselines: see
    `evaluation.verdict_rule`)."""
    from brain_pipeline.evaluation.service import evaluation_inputs, judgement_memory
    from brain_pipeline.evaluation.verdict_rule import lookup_judged

    layout = build.layout
    if not layout.store_file.exists():
        raise StepFailure(
            f"nothing to publish: {layout.store_file} does not exist (materialise knowledge_store)"
        )
    inputs = evaluation_inputs(cfg, layout.build_dir)
    if inputs is None:
        return None, None
    key = inputs.key()
    return key, lookup_judged(cfg, judgement_memory(cfg), key)


def blocking_checks(cfg: BrainConfig, store_sha256: str) -> list[CheckOutcome]:
    """Each blocking check's recorded verdict on the store with `store_sha256` (but the
    evaluation's, which `evaluation_of_build` finds): severity None where it has none."""
    from brain_pipeline.evaluation.service import judgement_memory
    from brain_pipeline.publishing.gate import CheckOutcome
    from brain_pipeline.steps.health import BLOCKING_CHECK_KEYS

    ledger = judgement_memory(cfg).ledger
    outcomes = []
    for check, key_of in BLOCKING_CHECK_KEYS.items():
        record = ledger.verdict(check, store_sha256, key_of(cfg, store_sha256))
        if record is None:
            outcomes.append(CheckOutcome(check, None))
        else:
            outcomes.append(
                CheckOutcome(check, record.severity, record.description, record.overridable)
            )
    return outcomes


def refuse_unfit_force(cfg: BrainConfig, force: bool, reason: str) -> None:
    """Raise (before any work) when force is asked without a reason or where the
    deployment turned it off (`publish.allow_force`): every launch path comes through the
    publish steps, so a UI Launchpad or a re-executed run's config is refused here too."""
    from brain_pipeline.publishing.gate import force_refusal

    refused = force_refusal(
        force,
        reason,
        allow_force=cfg.publish.allow_force,
        how="set `reason` next to `force` in the run config (brain-pipeline materialize "
        '--force-publish --reason "...")',
    )
    if refused is not None:
        raise StepFailure(f"publishing refused: {refused}")


def gate(
    cfg: BrainConfig,
    build: Build,
    force: bool,
    record: dict[str, Any] | None,
    log: StepLog,
    reason: str = "",
) -> BuildArtifacts:
    """Refuse (raise) unless `publishing.gate.decide` allows publishing these bytes on
    the verdicts every blocking check recorded for them (`build`'s files); a forced
    publication is logged here, once, with its reason."""
    from brain_pipeline.corpus.store_reader import open_store_view
    from brain_pipeline.evaluation.eval_record import known_sha256
    from brain_pipeline.evaluation.service import stored_verdict
    from brain_pipeline.publishing.gate import decide
    from brain_pipeline.publishing.source import ArtifactSource

    layout = build.layout
    view = open_store_view(layout.store_file, layout)
    verdict = stored_verdict(record)
    decision = decide(
        verdict,
        force=force,
        store_chunk_count=len(view),
        checks=blocking_checks(cfg, view.sha256),
        reason=reason,
        allow_force=cfg.publish.allow_force,
    )
    if not decision.allowed:
        raise StepFailure(f"publishing refused: {decision.reason}")
    if decision.forced:
        log.warning(decision.reason)
    store = ArtifactSource.of_file(layout.store_file, view.sha256)
    emb_file = layout.embeddings_file
    emb_sha = known_sha256(layout, emb_file)
    embeddings = None if emb_sha is None else ArtifactSource.of_file(emb_file, emb_sha)
    # Chunks per area and the live ids are all a manifest needs: no chunk is decoded.
    counts = (view.count_per_area(), view.ids)
    figures = {
        k: float(v)
        for k, v in dict((record or {}).get("figures") or {}).items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    facts = store_facts(memory_of(cfg))
    return BuildArtifacts(
        store,
        embeddings,
        counts,
        figures,
        (record or {}).get("run_id"),
        (facts.corpus_digest or None) if facts else None,
        verdict,
        decision,
    )


def _manifest(artifacts: BuildArtifacts, run_id: str) -> Any:
    from brain_pipeline.publishing.manifest import build_manifest

    return build_manifest(
        artifacts.store,
        artifacts.embeddings,
        None,
        artifacts.evaluation,
        artifacts.corpus_digest,
        run_id,
        counts=artifacts.counts,
    )


def _live_local_manifest(cfg: BrainConfig, artifacts: BuildArtifacts) -> Any | None:
    """The manifest published_local made for these bytes, so S3 carries the same one."""
    from brain_pipeline.publishing.local import live_manifest

    manifest = live_manifest(cfg.publish_root())
    if manifest is None or manifest.store.sha256 != artifacts.store_sha256:
        return None
    return manifest


def publish_version(manifest: Any) -> str:
    embeddings = manifest.embeddings.sha256 if manifest.embeddings is not None else "none"
    return f"{manifest.store.sha256[:16]}-{embeddings[:16]}"


def _publish_inputs(cfg: BrainConfig, key: str | None) -> dict[str, Any]:
    """What a local publication is made from: the evaluated build and where it goes."""
    from brain_pipeline.publishing.local import storage_dirs

    store = read_record(memory_of(cfg), "knowledge_store")
    vectors = read_record(memory_of(cfg), "embeddings")
    return {
        "store": store.data_version if store else None,
        "embeddings": vectors.data_version if vectors else None,
        "evaluation": key,
        "agent_query_model": cfg.publish.agent_query_model,
        "targets": [str(target) for target in storage_dirs(cfg.publish_root())],
    }


def _record_baseline(cfg: BrainConfig, evaluation: dict[str, Any] | None, log: StepLog) -> None:
    """The published store's evaluation becomes the baseline of the regression gate."""
    from brain_pipeline.evaluation.service import record_as_baseline

    if evaluation is None:
        log.warning("no evaluation of the published bytes: the baseline is unchanged")
        return
    try:
        record_as_baseline(cfg, evaluation, kind="published")
    except (OSError, KeyError, TypeError, ValueError) as exc:
        log.warning(f"the evaluation baseline was not recorded: {exc}")


def _record_publication(
    cfg: BrainConfig,
    inputs: dict[str, Any],
    version: str,
    report: Any,
    run_id: str,
    artifacts: BuildArtifacts,
) -> dict[str, Any]:
    """Stamp every live file (absolute paths), so an unchanged re-run can skip by stat;
    keep the verdict the publication went out on and the gate's decision, for `status`.
    Returns the facts kept, which the step also shows."""
    stamps = {
        str(target.directory / f.filename): FileStamp.of(target.directory / f.filename, f.sha256)
        for target in report.targets
        for f in target.files
        if f.sha256 is not None
    }
    facts = {
        "publish_root": str(cfg.publish_root()),
        "chunk_count": report.manifest.chunk_count,
        "store_sha256": report.manifest.store.sha256,
        "corpus_digest": report.manifest.corpus_digest,
        "embeddings_published": report.embeddings_published,
        "verdict": artifacts.verdict.to_dict() if artifacts.verdict is not None else None,
        "decision": artifacts.decision.reason,
        "forced": artifacts.decision.forced,
        "force_reason": artifacts.decision.force_reason,
    }
    record_step(
        memory_of(cfg),
        "published_local",
        data_version=version,
        code_version=PUBLISH_CODE_VERSION,
        inputs=inputs,
        facts=facts,
        outputs=stamps,
        run_id=run_id,
    )
    return facts


def publish_to_agent(
    cfg: BrainConfig,
    build: Build,
    *,
    force: bool,
    run_id: str,
    log: StepLog,
    trigger: str = "manual",
    reason: str = "",
) -> StepResult:
    """Publish the evaluated `build` (as the hand-off passes it) to the agent's storage
    folders, or find it live.

    After a rollback the rolled-back build is held (`publishing.publication_log.Hold`): this
    step then changes nothing and says so, unless `force` is set. `reason` is why a person
    forces: required with `force`, and recorded with a forced publication.
    """
    from brain_pipeline.evaluation.service import stored_verdict
    from brain_pipeline.publishing.commit import PublicationError
    from brain_pipeline.publishing.gate import decide
    from brain_pipeline.publishing.local import publish_local

    memory = memory_of(cfg)
    refuse_unfit_force(cfg, force, reason)
    recover(cfg, log)
    held = held_by_rollback(cfg, memory.layout, force=force, log=log)
    if held is not None:
        return held
    key, evaluation = evaluation_of_build(cfg, build)
    inputs = _publish_inputs(cfg, key)
    previous = current_record(memory, "published_local", PUBLISH_CODE_VERSION, inputs)
    if (
        previous is not None
        and decide(
            stored_verdict(evaluation),
            force=False,
            store_chunk_count=int(previous.facts.get("chunk_count") or 0),
            checks=blocking_checks(cfg, str(previous.facts.get("store_sha256"))),
        ).allowed
    ):
        # The same evaluated bytes are live and untouched (every live file's stat is the
        # one recorded when it was published): nothing to read, nothing to write (but the
        # baseline, when it was lost or is of another evaluation version).
        from brain_pipeline.evaluation.baseline import load_baseline
        from brain_pipeline.evaluation.service import judgement_memory

        if load_baseline(judgement_memory(cfg)).baseline is None:
            _record_baseline(cfg, evaluation, log)
        shown = {k: v for k, v in previous.facts.items() if k not in ("verdict", "forced")}
        published_on = stored_verdict(previous.facts)
        shown["verdict"] = published_on.headline() if published_on else "none recorded"
        current = stored_verdict(evaluation)
        if current is not None:  # this build's known items, asked of the live bytes
            shown.update(known_item_figures(current.known_items))
        return StepResult(previous.data_version, {**shown, "status": "unchanged"})
    artifacts = gate(cfg, build, force, evaluation, log, reason)
    try:
        report = publish_local(
            artifacts.store,
            artifacts.embeddings,
            cfg.publish_root(),
            agent_query_model=cfg.publish.agent_query_model,
            manifest=_manifest(artifacts, run_id),
        )
    except PublicationError as exc:
        raise StepFailure(str(exc)) from None
    for line in report.summary().splitlines():
        log.info(line)
    version = publish_version(report.manifest)
    # Kept (hard-linked) before the live files are stamped: a link changes their ctime.
    record_in_history(
        cfg,
        report,
        evaluation,
        run_id=run_id,
        trigger=trigger,
        log=log,
        forced=artifacts.decision.forced_record(),
    )
    facts = _record_publication(cfg, inputs, version, report, run_id, artifacts)
    _record_baseline(cfg, evaluation, log)
    # What was recorded (a forced publication says so where the catalog shows it, with
    # the person's reason), the verdict in words rather than as recorded.
    metadata: dict[str, Any] = {
        **facts,
        "status": "updated" if report.changed else "unchanged",
        "embeddings_note": report.embeddings_note or "",
        "dagster/row_count": report.manifest.chunk_count,
        "verdict": artifacts.verdict.headline() if artifacts.verdict else "none recorded",
        "force_overrode": artifacts.decision.overrode,
    }
    # The run whose check passed these bytes, and the run that made the manifest now live
    # (an earlier one when this publish changed nothing).
    if artifacts.evaluation_run_id:
        metadata["evaluated_in_run"] = RunLink(artifacts.evaluation_run_id)
    if report.manifest.run_id:
        metadata["live_since_run"] = RunLink(report.manifest.run_id)
    if artifacts.verdict is not None:  # what the agent can still find, over publications
        metadata.update(known_item_figures(artifacts.verdict.known_items))
    metadata["manifest"] = Markdown(report.manifest.to_markdown())
    metadata["targets"] = report.to_metadata()["targets"]
    metadata["publications"] = publications_table(cfg)
    return StepResult(version, metadata)


Upload = Callable[
    [BrainConfig, "ArtifactSource", "ArtifactSource | None", Any, frozenset[str]], Any
]
"""(cfg, store file, embeddings file, manifest, keys to retain) -> an S3 publish report."""


def publish_to_s3(
    cfg: BrainConfig,
    build: Build,
    *,
    force: bool,
    run_id: str,
    log: StepLog,
    upload: Upload,
    reason: str = "",
) -> StepResult | None:
    """Upload the evaluated `build` (as the hand-off passes it) to S3; None when no
    bucket is configured."""
    from brain_pipeline.publishing.s3_client import PublishError

    refuse_unfit_force(cfg, force, reason)
    s3 = cfg.publish.s3
    if not s3.bucket:
        log.info(
            "S3 publishing skipped: no bucket configured (publish.s3.bucket / S3_BUCKET_NAME); "
            "nothing is materialised"
        )
        return None
    if held_by_rollback(cfg, cfg.layout, force=force, log=log) is not None:
        return None
    _, evaluation = evaluation_of_build(cfg, build)
    artifacts = gate(cfg, build, force, evaluation, log, reason)
    manifest = _live_local_manifest(cfg, artifacts) or _manifest(artifacts, run_id)
    try:
        report = upload(
            cfg, artifacts.store, artifacts.embeddings, manifest, retained_s3_keys(cfg)
        )
    except PublishError as exc:
        raise StepFailure(f"S3 publish failed: {exc}") from None
    for line in report.summary().splitlines():
        log.info(line)
    record_s3_upload(cfg, report, log)
    return StepResult(
        publish_version(manifest),
        {
            "status": report.status,
            "bucket": s3.bucket,
            "prefix": s3.prefix,
            "objects": report.to_metadata()["objects"],
            "publications": publications_table(cfg),
        },
    )


def upload_to_s3(
    cfg: BrainConfig, store: Any, embeddings: Any, manifest: Any, retain: frozenset[str]
) -> Any:
    """Upload with boto3 where the configuration says (`publish.s3`), keeping `retain`:
    the one S3 upload of a run (`S3Publisher`) and of `brain-pipeline rollback`."""
    from brain_pipeline.publishing.s3 import publish_s3
    from brain_pipeline.publishing.s3_client import S3Protection, S3Timeouts

    s3 = cfg.publish.s3
    return publish_s3(
        store,
        embeddings,
        bucket=s3.bucket,
        prefix=s3.prefix,
        region=s3.region,
        endpoint_url=s3.endpoint_url,
        include_embeddings=s3.include_embeddings,
        manifest=manifest,
        timeouts=S3Timeouts.from_settings(s3),
        retain=retain,
        protection=S3Protection.from_settings(s3),
    )
