"""Assets of group `ingest`: corpus_manifest -> knowledge_chunks -> knowledge_store."""

from collections import Counter
from typing import Any

import dagster as dg

from brain_pipeline.corpus.discovery import STATUS_SKIPPED, Manifest, discover
from brain_pipeline.corpus.ingest import ChunkedCorpus, chunk_corpus
from brain_pipeline.defs.common import markdown_table, store_path, to_metadata
from brain_pipeline.defs.resources import BrainSettings
from brain_pipeline.publishing.manifest import fingerprint_digest, sha256_hex

PREVIEW_ROWS = 12


@dg.asset(
    group_name="ingest",
    kinds={"python"},
    description=(
        "Every file of the corpus considered: area, corpus-relative source, size, sha256 and "
        "what happened to it (text, roadmap, or skipped and why: raw/ folders, other file "
        "types, symlinks leaving the root or looping, unreadable files)."
    ),
)
def corpus_manifest(
    context: dg.AssetExecutionContext, settings: BrainSettings
) -> dg.Output[Manifest]:
    cfg = settings.load()
    root = cfg.corpus_root()
    manifest = discover(root)
    statuses = Counter(e.status for e in manifest.entries)
    skipped = Counter(str(e.reason) for e in manifest.entries if e.status == STATUS_SKIPPED)
    problems = [e for e in manifest.entries if e.problem]
    for entry in problems:
        context.log.warning(
            f"{entry.source}: {entry.reason}{f' ({entry.detail})' if entry.detail else ''}"
        )
    rows = [
        [e.area, e.source, e.status, e.reason or "", e.size or 0, (e.sha256 or "")[:12]]
        for e in manifest.entries
    ]
    metadata = to_metadata(
        {
            "corpus_root": str(root),
            "areas": len(manifest.areas),
            "files_seen": statuses.get("text", 0) + statuses.get("roadmap", 0),
            "text_files": statuses.get("text", 0),
            "roadmap_files": statuses.get("roadmap", 0),
            "skipped": statuses.get(STATUS_SKIPPED, 0),
            "problems": len(problems),
        }
    )
    metadata["skipped_by_reason"] = dg.MetadataValue.json(dict(skipped))
    metadata["manifest"] = dg.MetadataValue.md(
        markdown_table(["area", "source", "status", "reason", "bytes", "sha256"], rows[:200])
        + (f"\n\n… and {len(rows) - 200} more" if len(rows) > 200 else "")
    )
    return dg.Output(manifest, metadata=metadata)


def _manifest_digest(entries: Any) -> str:
    """The corpus digest the publish manifest records, over the files this walk hashed."""
    return fingerprint_digest({e.source: e for e in entries if e.sha256 is not None})


@dg.asset(
    group_name="ingest",
    kinds={"python"},
    description=(
        "Paragraph chunks (text files) and roadmap statements (JSON) with their provenance — "
        "area, corpus-relative source, heading — and content-addressed ids (sha256 of the "
        "text), every occurrence in discovery order, duplicates included."
    ),
)
def knowledge_chunks(
    context: dg.AssetExecutionContext, settings: BrainSettings, corpus_manifest: Manifest
) -> dg.Output[ChunkedCorpus]:
    cfg = settings.load()
    chunked = chunk_corpus(cfg.corpus_root())
    if _manifest_digest(chunked.manifest) != _manifest_digest(corpus_manifest.entries):
        context.log.warning(
            "the corpus changed since corpus_manifest was taken; chunks reflect the newer files"
        )
    problems = [e for e in chunked.manifest if e.problem]
    for entry in problems:
        context.log.warning(
            f"{entry.source}: {entry.reason}{f': {entry.detail}' if entry.detail else ''}"
        )
    per_area = Counter(c.area for c in chunked.occurrences)
    per_file = Counter(c.source for c in chunked.occurrences)
    metadata = to_metadata(
        {
            "occurrences": len(chunked.occurrences),
            "files_seen": chunked.files_seen,
            "files_with_chunks": len(per_file),
            "malformed_or_problem_files": len(problems),
        }
    )
    metadata["occurrences_per_area"] = dg.MetadataValue.json(dict(per_area))
    metadata["problems"] = dg.MetadataValue.md(
        markdown_table(
            ["file", "reason", "detail"],
            [[e.source, e.reason or "", e.detail or ""] for e in problems],
        )
        if problems
        else "none"
    )
    return dg.Output(chunked, metadata=metadata)


@dg.asset(
    group_name="ingest",
    kinds={"python"},
    description=(
        "knowledge-store.json in the build directory: chunks de-duplicated by content id "
        "across the whole corpus (first occurrence wins), byte-identical to what the agent's "
        "original ingest wrote (JSON.stringify(chunks, null, 2)). Rewritten atomically, and "
        "only when its bytes change."
    ),
)
def knowledge_store(
    context: dg.AssetExecutionContext, settings: BrainSettings, knowledge_chunks: ChunkedCorpus
) -> dg.MaterializeResult:
    from brain_pipeline.publishing.atomic import write_if_changed

    cfg = settings.load()
    result = knowledge_chunks.deduplicated()
    data = result.store_bytes()
    target = store_path(cfg.build_dir)
    changed = write_if_changed(target, data)
    chunks = result.chunks
    if not chunks:
        context.log.warning("the knowledge store is empty: the corpus produced no chunks")
    if result.duplicates_collapsed:
        context.log.info(f"{result.duplicates_collapsed} duplicate chunk(s) collapsed")
    preview = [
        [c.id, c.area, c.source, "" if not c.has_heading else c.heading, c.content[:80]]
        for c in chunks[:PREVIEW_ROWS]
    ]
    metadata = to_metadata(
        {
            "path": str(target),
            "status": "written" if changed else "unchanged",
            "chunks": len(chunks),
            "duplicates_collapsed": result.duplicates_collapsed,
            "store_bytes": len(data),
            "store_sha256": sha256_hex(data),
            "corpus_digest": _manifest_digest(result.manifest),
        }
    )
    metadata["chunks_per_area"] = dg.MetadataValue.json(result.chunks_per_area)
    for area, count in result.chunks_per_area.items():
        metadata[f"chunks.{area}"] = dg.MetadataValue.int(count)
    metadata["preview"] = dg.MetadataValue.md(
        markdown_table(["id", "area", "source", "heading", "content"], preview)
    )
    return dg.MaterializeResult(metadata=metadata)
