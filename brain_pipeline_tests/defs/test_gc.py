"""Caches stay bounded: a run keeps only live snapshots; gc drops dead chunk-cache rows."""

from __future__ import annotations

import os
import subprocess
import sys

from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.memory import memory_for_layout
from brain_pipeline_tests.defs.conftest import Project


def _snapshots(project: Project) -> set[str]:
    """The snapshots the project's ledger keeps, and each one's blob is still there."""
    memory = memory_for_layout(StateLayout.of(project.build))
    rows = memory.ledger.query("SELECT digest, blob FROM corpus_snapshots")
    assert all(memory.blobs.has(blob) for _, blob in rows)
    return {digest for digest, _ in rows}


def test_each_run_keeps_only_the_snapshots_still_named(tiny_project: Project) -> None:
    notes = tiny_project.corpus / "alpha" / "notes.md"
    assert tiny_project.materialize("group:ingest").success
    seen = [_snapshots(tiny_project)]
    for round_ in range(4):
        notes.write_text(notes.read_text() + f"\nAn added paragraph number {round_} here.\n")
        assert tiny_project.materialize("group:ingest").success
        seen.append(_snapshots(tiny_project))
    # Bounded: the current corpus's snapshot and at most the previous build's.
    assert all(len(kept) <= 2 for kept in seen)
    assert not seen[0] & seen[-1]  # the first version is long gone


def test_gc_drops_chunk_cache_rows_of_deleted_files(tiny_project: Project) -> None:
    assert tiny_project.materialize("group:ingest").success
    (tiny_project.corpus / "beta" / "guide.md").unlink()
    extra = tiny_project.corpus / "beta" / "other.md"
    extra.write_text("A replacement paragraph long enough to be kept as a chunk.\n")
    assert tiny_project.materialize("group:ingest").success
    env = {**os.environ, "BRAIN_CONFIG": str(tiny_project.config_path)}
    done = subprocess.run(
        [sys.executable, "-m", "brain_pipeline.cli", "gc"],
        env=env, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "1 chunk-cache row(s)" in done.stdout, done.stdout
    # The next run finds everything it needs: nothing live was collected.
    before = tiny_project.store_file.read_bytes()
    assert tiny_project.materialize("group:ingest").success
    assert tiny_project.store_file.read_bytes() == before
