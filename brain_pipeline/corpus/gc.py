"""Keep the build directory's caches bounded: drop what no live record still names.

(The blobs, shared by every worker, are collected by reachability over the ledger:
`steps.publications.collect_blobs`, which `brain-pipeline gc` runs after these.)

What is collected here is keyed by content (snapshots in the ledger and blobs by corpus
digest, chunk cache rows by file hash, indexes by chunk digest), so each corpus edit adds
entries and nothing would ever leave. What is *live* is named by the records: the snapshot
the chunks were made from, the one the published store was built from, and the latest
observation. The chunk history is not a cache (it explains old fixture labels) and is
never collected. The retrieval caches bound themselves as they write (the newest store
sidecars and area indexes are kept, token segments are merged without dead ids).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.memory import memory_for_layout
from brain_pipeline.state.records import read_record, store_facts


@dataclass
class GcReport:
    """What a collection removed, and the bytes it freed."""

    snapshots: list[str] = field(default_factory=list)
    chunk_rows: int = 0
    blobs: list[str] = field(default_factory=list)
    """Blobs no kept publication, current record, baseline or pack reaches (and stale
    temporary files of a local blob folder), removed by the caller (`cli.gc`)."""
    bytes_before: int = 0
    bytes_after: int = 0

    def summary(self) -> str:
        return (
            f"removed {len(self.snapshots)} snapshot(s), {self.chunk_rows} chunk-cache row(s); "
            f"state/ {self.bytes_before:,} -> {self.bytes_after:,} bytes; "
            f"{len(self.blobs)} unreachable blob(s) removed"
        )


def tree_bytes(root: Path) -> int:
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except FileNotFoundError:
                continue
    return total


def live_snapshot_digests(layout: StateLayout, extra: Iterable[str | None] = ()) -> set[str]:
    """Snapshots still named: the chunks' input, the store's corpus, and `extra` ones."""
    keep = {digest for digest in extra if digest}
    chunks = read_record(layout, "knowledge_chunks")
    if chunks is not None:
        keep.add(str(chunks.inputs.get("corpus")))
    store = store_facts(layout)
    if store is not None and store.corpus_digest:
        keep.add(store.corpus_digest)
    return keep


def prune_old_snapshots(layout: StateLayout, extra: Iterable[str | None] = ()) -> list[str]:
    """The retention rule run by every chunking step: only live snapshots stay."""
    from brain_pipeline.corpus.observation import prune_snapshots

    return prune_snapshots(layout, live_snapshot_digests(layout, extra))


def collect(
    layout: StateLayout, *, variant: str = "", published_digest: str | None = None
) -> GcReport:
    """Drop unreferenced snapshots and chunk-cache rows (and stale index files)."""
    from brain_pipeline.corpus.chunk_cache import gc_chunk_cache
    from brain_pipeline.corpus.observation import load_snapshot

    report = GcReport(bytes_before=tree_bytes(layout.state_dir))
    # The assembly's own record of older versions: the knowledge_store step's record says
    # whether the store is current now, and nothing reads the file.
    (layout.chunks_dir / "assembled.json").unlink(missing_ok=True)
    report.snapshots = prune_old_snapshots(layout, [published_digest])
    chunks = read_record(layout, "knowledge_chunks")
    if chunks is not None:
        live = load_snapshot(layout, str(chunks.inputs["corpus"]))
        report.chunk_rows = gc_chunk_cache(layout, live, variant=variant)
    ledger = memory_for_layout(layout).ledger
    if ledger.backend == "sqlite":  # the rows deleted sit in its write-ahead log until then
        ledger.query("PRAGMA wal_checkpoint(TRUNCATE)")
    report.bytes_after = tree_bytes(layout.state_dir)
    return report
