"""Group `ingest`: the observed `corpus` and `eval_fixture`, then chunks and the store.

`corpus` is an observable source asset whose data version is the corpus digest, so
Dagster itself knows when the corpus changed: the chunks become stale and automation
re-runs what the change affects. Nothing proportional to the corpus passes through the
instance: each step reads its upstream's record in the build directory
(`brain_pipeline.state.records`) and writes its own.
"""


import functools
import hashlib
from collections import Counter
from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.corpus.discovery import STATUS_SKIPPED
from brain_pipeline.corpus.ingest import ingest_file
from brain_pipeline.defs.resources import BrainSettings
from brain_pipeline.lib.conditions import (
    CONSUMED_DIGEST_METADATA,
    TRIGGER_TAG,
    chunks_condition,
    downstream_condition,
    fired_conditions,
)
from brain_pipeline.lib.steps import (
    CORPUS,
    DATA_VERSION_TAG,
    claim_build_dir,
    latest_corpus_observation,
    layout_for,
    recheck_input,
    start_step,
    table,
    to_metadata,
    upstream_record,
)
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.records import AssetRecord, digest_of, stamp_outputs, write_record

STORE_CODE_VERSION = "store-1"
PROBLEM_ROWS_KEPT = 500


def _snapshot_metadata(snapshot: Any, build_dir: str) -> dict[str, Any]:
    statuses = Counter(e.status for e in snapshot.entries)
    skipped = Counter(str(e.reason) for e in snapshot.entries if e.status == STATUS_SKIPPED)
    metadata = to_metadata(
        {
            "corpus_digest": snapshot.digest,
            "corpus_root": snapshot.root,
            "build_dir": build_dir,
            "areas": len(snapshot.areas),
            "text_files": statuses.get("text", 0),
            "roadmap_files": statuses.get("roadmap", 0),
            "skipped": statuses.get(STATUS_SKIPPED, 0),
        }
    )
    metadata["skipped_by_reason"] = dg.MetadataValue.json(dict(skipped))
    return metadata


def observe(cfg: BrainConfig) -> Any:
    """A fresh observation of the configured corpus (the file index makes it cheap)."""
    from brain_pipeline.corpus.observation import observe_corpus

    return observe_corpus(cfg.corpus_root(), layout_for(cfg), limits=cfg.ingest_limits())


def fixture_version(cfg: BrainConfig) -> str:
    """The fixture's data version: sha256 of its bytes ('missing' when absent)."""
    try:
        return hashlib.sha256(cfg.evaluation.fixture.read_bytes()).hexdigest()[:16]
    except OSError:
        return "missing"


@dg.observable_source_asset(
    name="corpus",
    group_name="ingest",
    required_resource_keys={"settings"},
    description=(
        "The curated content as it is on disk: one folder per area. Observing it walks the "
        "corpus and re-hashes only files whose size or mtime changed; its data version is "
        "the corpus digest (paths and content hashes), so a touch changes nothing and any "
        "edit makes the chunks stale."
    ),
)
def corpus(context: dg.OpExecutionContext) -> dg.ObserveResult:
    cfg = context.resources.settings.load()
    claim_build_dir(context.instance, cfg.build_dir)
    snapshot = observe(cfg)
    return dg.ObserveResult(
        data_version=dg.DataVersion(snapshot.digest),
        metadata=_snapshot_metadata(snapshot, str(cfg.build_dir)),
    )


@dg.observable_source_asset(
    name="eval_fixture",
    group_name="ingest",
    required_resource_keys={"settings"},
    description=(
        "The hand-labelled retrieval fixture (evaluation.fixture); its data version is the "
        "hash of its bytes, so editing it re-runs the retrieval_eval check."
    ),
)
def eval_fixture(context: dg.OpExecutionContext) -> dg.ObserveResult:
    cfg = context.resources.settings.load()
    return dg.ObserveResult(
        data_version=dg.DataVersion(fixture_version(cfg)),
        metadata={"path": dg.MetadataValue.path(str(cfg.evaluation.fixture))},
    )


def _snapshot_for_run(context: dg.AssetExecutionContext, cfg: BrainConfig) -> Any:
    """The snapshot this run chunks: its own observation's, else a fresh observation.

    A fresh observation that differs from the last one Dagster knows is recorded as an
    observation of `corpus`, so the lineage names the corpus version that was read.
    """
    from brain_pipeline.corpus.observation import load_snapshot

    known, observed_by = latest_corpus_observation(context.instance)
    if known is not None and observed_by == context.run.run_id:  # this run's own step
        return load_snapshot(layout_for(cfg), known)
    snapshot = observe(cfg)
    if known != snapshot.digest:
        context.log_event(
            dg.AssetObservation(
                asset_key=CORPUS,
                tags={DATA_VERSION_TAG: snapshot.digest},
                metadata=_snapshot_metadata(snapshot, str(cfg.build_dir)),
            )
        )
    return snapshot


def chunks_code_version(cfg: BrainConfig) -> str:
    """Chunking code version plus the configuration that shapes chunks (junk limits)."""
    from brain_pipeline.corpus.chunk_cache import CHUNKING_VERSION

    shaping = cfg.corpus.model_dump(mode="json", exclude={"path", "candidates"})
    return f"chunks-{CHUNKING_VERSION}-{digest_of(shaping)[:8]}"


def _trigger(context: dg.AssetExecutionContext) -> str:
    """Why this run exists: the observation sensor, automation (with the conditions that
    were true), the schedule, or a person."""
    tags = dict(context.run.tags)
    fired = fired_conditions(context.instance, tags, context.asset_key)
    if fired:
        return "automation_sensor: " + ", ".join(fired)
    if TRIGGER_TAG in tags:
        return tags[TRIGGER_TAG]
    if "dagster/schedule_name" in tags:
        return f"schedule {tags['dagster/schedule_name']}"
    return "launched by hand (CLI or UI)"


def _problem_rows(entries: Any) -> list[list[Any]]:
    return [[e.source, e.reason or "", e.detail or ""] for e in entries if e.problem]


def build_knowledge_chunks(cfg: BrainConfig) -> dg.AssetsDefinition:
    code_version = chunks_code_version(cfg)

    @dg.asset(
        name="knowledge_chunks",
        group_name="ingest",
        deps=[CORPUS],
        kinds={"python"},
        code_version=code_version,
        automation_condition=chunks_condition(),
        owners=["team:knowledge"],
        tags={"domain": "ingest"},
        description=(
            "Paragraph chunks (text files) and roadmap statements (JSON) of the observed "
            "corpus snapshot, with provenance (area, source, heading) and content-addressed "
            "ids. Cached per file by content hash: only files whose bytes changed are "
            "chunked again."
        ),
    )
    def knowledge_chunks(
        context: dg.AssetExecutionContext, settings: BrainSettings
    ) -> dg.MaterializeResult:
        from brain_pipeline.corpus.chunk_cache import chunk_snapshot

        cfg, layout = start_step(context.instance, settings)
        snapshot = _snapshot_for_run(context, cfg)
        limits = cfg.ingest_limits()
        report = chunk_snapshot(
            snapshot,
            layout,
            variant=limits.cache_variant,
            chunker=functools.partial(ingest_file, limits=limits),
        )
        data_version = digest_of([snapshot.digest, code_version])
        problem_rows = _problem_rows(report.entries)  # one count for the asset and its check
        write_record(
            layout,
            AssetRecord(
                asset="knowledge_chunks",
                data_version=data_version,
                code_version=code_version,
                inputs={"corpus": snapshot.digest},
                facts={
                    "occurrences": report.occurrences,
                    "problems": problem_rows[:PROBLEM_ROWS_KEPT],
                    "problem_count": len(problem_rows),
                },
                run_id=context.run.run_id,
            ),
        )
        from brain_pipeline.corpus.gc import prune_old_snapshots

        prune_old_snapshots(layout, [snapshot.digest])
        for source, reason in report.problems:
            context.log.warning(f"{source}: {reason}")
        per_area = dict(report.occurrences_per_area)
        metadata = to_metadata(
            {
                CONSUMED_DIGEST_METADATA: snapshot.digest,
                "triggered_by": _trigger(context),
                "occurrences": report.occurrences,
                "files_chunked": report.files_chunked,
                "files_reused": report.files_reused,
                "problem_files": len(problem_rows),
                "dagster/row_count": report.occurrences,
            }
        )
        metadata["occurrences_per_area"] = table(
            [("area", "string"), ("occurrences", "int")],
            [[area, per_area.get(area, 0)] for area in snapshot.areas],
        )
        metadata["problems"] = table(
            [("file", "string"), ("reason", "string"), ("detail", "string")],
            problem_rows,
        )
        return dg.MaterializeResult(metadata=metadata, data_version=dg.DataVersion(data_version))

    return knowledge_chunks


def _assemble(cfg: BrainConfig, layout: StateLayout, digest: str) -> Any:
    from brain_pipeline.corpus.assembly import assemble_store
    from brain_pipeline.corpus.observation import load_snapshot

    return assemble_store(
        load_snapshot(layout, digest),
        layout,
        layout.store_file,
        variant=cfg.ingest_limits().cache_variant,
    )


def _remember_chunks(cfg: BrainConfig, layout: StateLayout, store_sha256: str) -> None:
    """Add the store's chunks to the history (seeded first from the live published store,
    which still holds the texts an edit replaced), so a stale label can be explained."""
    from datetime import UTC, datetime

    from brain_pipeline.corpus import history

    if history.is_empty(layout):
        from brain_pipeline.publishing.local import live_store_file

        history.seed_from_store(layout, live_store_file(cfg.publish_root()))
    from brain_pipeline.corpus.store_reader import open_store_view

    view = open_store_view(layout.store_file, layout, sha256=store_sha256)
    history.record_store_view(layout, view, datetime.now(UTC))


def build_knowledge_store(cfg: BrainConfig) -> dg.AssetsDefinition:
    @dg.asset(
        name="knowledge_store",
        group_name="ingest",
        deps=["knowledge_chunks"],
        kinds={"python", "json"},
        code_version=STORE_CODE_VERSION,
        automation_condition=downstream_condition(),
        owners=["team:knowledge"],
        tags={"domain": "ingest"},
        description=(
            "knowledge-store.json in the build directory: chunks de-duplicated by content id "
            "across the whole corpus (first occurrence wins), byte-identical to what the "
            "agent's original ingest wrote (JSON.stringify(chunks, null, 2)). Assembled from "
            "the per-file chunk cache; rewritten atomically, and only when its bytes change."
        ),
    )
    def knowledge_store(
        context: dg.AssetExecutionContext, settings: BrainSettings
    ) -> dg.MaterializeResult:
        from brain_pipeline.state.records import read_record

        cfg, layout = start_step(context.instance, settings)
        chunks = upstream_record(layout, "knowledge_chunks", "knowledge_store")
        digest = str(chunks.inputs["corpus"])
        inputs = {"knowledge_chunks": chunks.data_version}
        previous = read_record(layout, "knowledge_store")
        if previous is not None and previous.is_current_for(layout, STORE_CODE_VERSION, inputs):
            facts = previous.facts
            status = "unchanged"
        else:
            report = _assemble(cfg, layout, digest)
            facts = {
                "store_sha256": report.sha256,
                "store_bytes": report.size,
                "chunks": report.chunks,
                "duplicates_collapsed": report.duplicates_collapsed,
                "chunks_per_area": dict(report.chunks_per_area),
                "corpus_digest": digest,
                "utf16_units": report.utf16_units,
                "preview": [
                    [
                        row["id"],
                        row["area"],
                        row["source"],
                        str(row.get("heading", "")),
                        str(row["content"])[:80],
                    ]
                    for row in report.preview
                ],
            }
            status = "written" if report.written else "unchanged"
            _remember_chunks(cfg, layout, report.sha256)
            recheck_input(layout, "knowledge_chunks", chunks.data_version)
            write_record(
                layout,
                AssetRecord(
                    asset="knowledge_store",
                    data_version=report.sha256,
                    code_version=STORE_CODE_VERSION,
                    inputs=inputs,
                    outputs=stamp_outputs(layout, {layout.store_file.name: report.sha256}),
                    facts=facts,
                    run_id=context.run.run_id,
                ),
            )
        if not facts["chunks"]:
            context.log.warning("the knowledge store is empty: the corpus produced no chunks")
        per_area: dict[str, int] = facts["chunks_per_area"]
        metadata = to_metadata(
            {
                "path": str(layout.store_file),
                "status": status,
                "chunks": facts["chunks"],
                "dagster/row_count": facts["chunks"],
                "duplicates_collapsed": facts["duplicates_collapsed"],
                "store_bytes": facts["store_bytes"],
                "store_sha256": facts["store_sha256"],
                "corpus_digest": digest,
            }
        )
        metadata["chunks_per_area"] = table(
            [("area", "string"), ("chunks", "int")], [[a, n] for a, n in per_area.items()]
        )
        for area, count in per_area.items():
            metadata[f"chunks.{area}"] = dg.MetadataValue.int(count)
        metadata["preview"] = table(
            [
                ("id", "string"),
                ("area", "string"),
                ("source", "string"),
                ("heading", "string"),
                ("content", "string"),
            ],
            list(facts.get("preview") or []),
        )
        return dg.MaterializeResult(
            metadata=metadata, data_version=dg.DataVersion(str(facts["store_sha256"]))
        )

    return knowledge_store

