"""The ingest steps: observe the corpus, chunk the observed snapshot, assemble the store.

Nothing proportional to the corpus passes through Dagster: each step reads its upstream's
record in the ledger and writes its own (`steps.contract`'s ritual); chunks come from the
per-file chunk cache, the store is assembled from it and rewritten only when its bytes
change. The store's record hands on `StoreFacts`: the corpus identity and its counts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from brain_pipeline.config import BrainConfig, memory_of
from brain_pipeline.corpus.discovery import STATUS_SKIPPED, describe_holdings
from brain_pipeline.corpus.observation import CorpusSnapshot, observe_corpus
from brain_pipeline.state.memory import Memory
from brain_pipeline.state.records import (
    AssetRecord,
    ChunksFacts,
    StoreFacts,
    code_version,
    digest_of,
    facts_of,
    read_record,
)
from brain_pipeline.steps.contract import StepLog, current_record, record_step
from brain_pipeline.steps.report import StepResult, Table
from brain_pipeline.utils.digest import file_sha256_or

STORE_CODE_VERSION = code_version("knowledge_store")
PROBLEM_ROWS_KEPT = 500
PROBLEM_COLUMNS = [("file", "string"), ("reason", "string"), ("detail", "string")]
"""The problem files' table, on `knowledge_chunks` and on its `corpus_problems` check."""
PER_AREA_COLUMNS = [("area", "string"), ("chunks", "int")]
"""Chunks per area, on `knowledge_store` and on its `no_empty_area` check."""
PREVIEW_COLUMNS = [(name, "string") for name in ("id", "area", "source", "heading", "content")]


def observe(cfg: BrainConfig) -> CorpusSnapshot:
    """A fresh observation of the configured corpus (the file index makes it cheap)."""
    return observe_corpus(cfg.corpus_root(), memory_of(cfg), limits=cfg.ingest_limits())


def fixture_version(cfg: BrainConfig) -> str:
    """The fixture's identity: the sha256 of its bytes ('missing' when absent) — the same
    digest the evaluation record keys its results by."""
    return file_sha256_or(cfg.evaluation.fixture, "missing")


def snapshot_facts(snapshot: CorpusSnapshot, build_dir: str) -> dict[str, Any]:
    """What an observation of the corpus shows."""
    statuses = Counter(e.status for e in snapshot.entries)
    skipped = Counter(str(e.reason) for e in snapshot.entries if e.status == STATUS_SKIPPED)
    return {
        "corpus_digest": snapshot.digest,
        "corpus_root": snapshot.root,
        "build_dir": build_dir,
        "areas": len(snapshot.areas),
        "text_files": statuses.get("text", 0),
        "roadmap_files": statuses.get("roadmap", 0),
        "skipped": statuses.get(STATUS_SKIPPED, 0),
        "skipped_by_reason": dict(skipped),
    }


def chunks_code_version(cfg: BrainConfig) -> str:
    """The digest of the chunking code (`code_version`) plus the configuration that shapes
    chunks (junk limits)."""
    shaping = cfg.corpus.model_dump(mode="json", exclude={"path", "candidates"})
    return f"{code_version('knowledge_chunks')}-{digest_of(shaping)[:8]}"


def chunk_corpus(
    cfg: BrainConfig, snapshot: CorpusSnapshot, *, run_id: str, log: StepLog
) -> StepResult:
    """Chunk `snapshot` through the per-file cache and record what came of it."""
    from brain_pipeline.corpus.chunk_cache import chunk_snapshot
    from brain_pipeline.corpus.gc import prune_old_snapshots

    memory = memory_of(cfg)
    code = chunks_code_version(cfg)
    inputs = {"corpus": snapshot.digest}
    limits = cfg.ingest_limits()
    report = chunk_snapshot(snapshot, memory.layout, variant=limits.cache_variant)
    previous = read_record(memory, "knowledge_chunks")
    # The same corpus under the same code keeps its data version: a record read in from a
    # build directory made before the code digests (its hand-bumped version taken as
    # today's code, `records._imported_code`) leaves the store current after an upgrade.
    if previous is not None and previous.is_current_for(memory, code, inputs):
        data_version = previous.data_version
    else:
        data_version = digest_of([snapshot.digest, code])
    problem_rows = [
        [e.source, e.reason or "", e.detail or ""] for e in report.entries if e.problem
    ]  # one count for the asset and its check
    per_area = dict(report.occurrences_per_area)
    empty_areas = {
        area: describe_holdings(e.source for e in snapshot.entries if e.area == area)
        for area in snapshot.areas
        if not per_area.get(area)
    }
    record = record_step(
        memory,
        "knowledge_chunks",
        data_version=data_version,
        code_version=code,
        inputs=inputs,
        facts=asdict(
            ChunksFacts(
                report.occurrences, problem_rows[:PROBLEM_ROWS_KEPT], len(problem_rows), empty_areas
            )
        ),
        run_id=run_id,
    )
    prune_old_snapshots(memory.layout, [snapshot.digest])
    for source, reason in report.problems:
        log.warning(f"{source}: {reason}")
    return StepResult(
        data_version,
        {
            "corpus_digest": snapshot.digest,
            "occurrences": report.occurrences,
            "files_chunked": report.files_chunked,
            "files_reused": report.files_reused,
            "problem_files": len(problem_rows),
            "dagster/row_count": report.occurrences,
            "occurrences_per_area": Table(
                [("area", "string"), ("occurrences", "int")],
                [[area, per_area.get(area, 0)] for area in snapshot.areas],
            ),
            "problems": Table(PROBLEM_COLUMNS, problem_rows),
        },
        record,
    )


def stored_snapshot(cfg: BrainConfig, digest: str) -> CorpusSnapshot:
    """The snapshot stored under `digest`; observed again when it is missing or was set
    aside as damaged, provided the corpus still has that digest (else the error says to
    observe the corpus)."""
    from brain_pipeline.corpus.observation import SnapshotNotFoundError, load_snapshot

    try:
        return load_snapshot(memory_of(cfg), digest)
    except SnapshotNotFoundError:
        again = observe(cfg)
        if again.digest != digest:
            raise
        return again


def _assemble(cfg: BrainConfig, memory: Memory, digest: str) -> Any:
    """Assemble the store from the chunk cache. The cache is this disk's: a step process
    in an empty folder, or a fresh worker, finds it without the files `knowledge_chunks`
    chunked elsewhere, so the missing files are chunked here (the same per-file ingest)
    and the assembly is tried once more."""
    from brain_pipeline.corpus.assembly import assemble_store
    from brain_pipeline.corpus.chunk_cache import ChunkCacheMissError, chunk_snapshot

    layout = memory.layout
    snapshot = stored_snapshot(cfg, digest)
    variant = cfg.ingest_limits().cache_variant
    try:
        return assemble_store(snapshot, layout, layout.store_file, variant=variant)
    except ChunkCacheMissError:
        chunk_snapshot(snapshot, layout, variant=variant)
        return assemble_store(snapshot, layout, layout.store_file, variant=variant)


def _remember_chunks(cfg: BrainConfig, memory: Memory, store_sha256: str) -> None:
    """Add the store's chunks to the history (seeded first from the live published store,
    which still holds the texts an edit replaced), so a stale label can be explained."""
    from brain_pipeline.corpus.chunk_history import remember_store
    from brain_pipeline.publishing.local import live_store_file

    remember_store(
        memory,
        memory.layout.store_file,
        datetime.now(UTC),
        seed_store=live_store_file(cfg.publish_root()),
        sha256=store_sha256,
    )


def _store_facts(report: Any, digest: str) -> StoreFacts:
    return StoreFacts(
        store_sha256=report.sha256,
        corpus_digest=digest,
        chunks=report.chunks,
        chunks_per_area=dict(report.chunks_per_area),
        utf16_units=report.utf16_units,
        store_bytes=report.size,
        duplicates_collapsed=report.duplicates_collapsed,
        preview=[
            [row["id"], row["area"], row["source"], str(row.get("heading", "")),
             str(row["content"])[:80]]
            for row in report.preview
        ],
    )


def assemble_knowledge_store(
    cfg: BrainConfig, chunks: AssetRecord, *, run_id: str, log: StepLog
) -> StepResult:
    """knowledge-store.json from the chunk cache (or the record saying it is current);
    `chunks` is knowledge_chunks' record, as the hand-off passes it."""
    memory = memory_of(cfg)
    layout = memory.layout
    digest = str(chunks.inputs["corpus"])
    inputs = {"knowledge_chunks": chunks.data_version}
    previous = current_record(memory, "knowledge_store", STORE_CODE_VERSION, inputs)
    record = previous
    if previous is not None:
        facts = facts_of(StoreFacts, previous)
        status = "unchanged"
    else:
        report = _assemble(cfg, memory, digest)
        facts = _store_facts(report, digest)
        status = "written" if report.written else "unchanged"
        _remember_chunks(cfg, memory, report.sha256)
        record = record_step(
            memory,
            "knowledge_store",
            data_version=report.sha256,
            code_version=STORE_CODE_VERSION,
            inputs=inputs,
            facts=asdict(facts),
            outputs={layout.store_file.name: report.sha256},
            run_id=run_id,
            upstream=chunks,
        )
    if not facts.chunks:
        log.warning("the knowledge store is empty: the corpus produced no chunks")
    per_area = facts.chunks_per_area
    metadata: dict[str, Any] = {
        "path": str(layout.store_file),
        "status": status,
        "chunks": facts.chunks,
        "dagster/row_count": facts.chunks,
        "duplicates_collapsed": facts.duplicates_collapsed,
        "store_bytes": facts.store_bytes,
        "store_sha256": facts.store_sha256,
        "corpus_digest": digest,
        "chunks_per_area": Table(PER_AREA_COLUMNS, [[a, n] for a, n in per_area.items()]),
    }
    for area, count in per_area.items():
        metadata[f"chunks.{area}"] = count
    metadata["preview"] = Table(PREVIEW_COLUMNS, list(facts.preview))
    return StepResult(facts.store_sha256, metadata, record)
