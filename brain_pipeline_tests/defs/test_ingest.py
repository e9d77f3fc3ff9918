"""Junk in the corpus is reported by the ingest assets and never reaches the store."""

from __future__ import annotations

import dagster as dg

from brain_pipeline.corpus.store import parse_store
from brain_pipeline_tests.defs.conftest import Project


def _metadata(project: Project, name: str) -> dict[str, object]:
    event = project.instance.get_latest_materialization_event(dg.AssetKey(name))
    assert event is not None and event.asset_materialization is not None
    return {k: getattr(v, "value", v) for k, v in event.asset_materialization.metadata.items()}


def test_binary_and_non_object_roadmaps_are_problems_not_chunks(tiny_project: Project) -> None:
    elf = b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4
    (tiny_project.corpus / "alpha" / "program.md").write_bytes(elf)
    (tiny_project.corpus / "alpha" / "formatted-list.json").write_text("[1, 2]\n")
    outcome = tiny_project.materialize("group:ingest")
    assert outcome.success, outcome.lines
    problems = str(_metadata(tiny_project, "knowledge_chunks")["problems"])
    assert "alpha/program.md" in problems and "binary file" in problems
    assert "alpha/formatted-list.json" in problems and "not an object" in problems
    sources = {c.source for c in parse_store(tiny_project.store_file.read_bytes())}
    assert sources == {"alpha/notes.md", "beta/guide.md"}
