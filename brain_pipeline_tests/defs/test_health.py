"""WARN checks as the UI shows them: what a person should look at, without blocking."""

from __future__ import annotations

import contextlib
import json
import sqlite3

import dagster as dg
import pytest

from brain_pipeline.definitions import build_definitions
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.defs.conftest import Project, edit_corpus, observe_with_sensor


def _check(project: Project, asset: str, name: str) -> tuple[bool, str, str]:
    record = project.instance.get_latest_asset_check_evaluation_record(
        dg.AssetCheckKey(dg.AssetKey(asset), name)
    )
    assert record is not None and record.event is not None
    assert record.event.dagster_event is not None
    evaluation = record.event.dagster_event.event_specific_data
    return (
        bool(getattr(evaluation, "passed", False)),
        str(getattr(getattr(evaluation, "severity", None), "value", "")),
        str(getattr(evaluation, "description", "")),
    )


def test_malformed_files_warn_without_blocking_the_publish(sample_project: Project) -> None:
    outcome = sample_project.materialize()
    assert outcome.success, outcome.lines
    passed, severity, description = _check(sample_project, "knowledge_chunks", "corpus_problems")
    assert not passed and severity == "WARN" and "file(s) need a look" in description
    assert (sample_project.published() / "knowledge-store.json").exists()


def test_withheld_vectors_and_freshness_are_reported(tiny_project: Project) -> None:
    assert tiny_project.materialize().success
    passed, severity, description = _check(tiny_project, "published_local", "vectors_reach_agent")
    assert not passed and severity == "WARN" and "lexical only" in description
    passed, _, description = _check(tiny_project, "published_local", "published_store_is_current")
    assert passed and description.startswith("current")
    # An old publication (the manifest says so) is overdue for the nightly schedule.
    manifest_path = tiny_project.published() / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["published_at"] = "2020-01-01T00:00:00Z"
    manifest_path.write_text(json.dumps(manifest))
    assert tiny_project.materialize("published_local").success
    passed, severity, description = _check(
        tiny_project, "published_local", "published_store_is_current"
    )
    assert not passed and severity == "WARN" and description.startswith("overdue")


def test_a_new_corpus_version_is_reported_at_the_end_of_the_graph(tiny_project: Project) -> None:
    assert tiny_project.materialize().success
    edit_corpus(tiny_project)
    observe_with_sensor(tiny_project)
    key = dg.AssetCheckKey(dg.AssetKey("published_local"), "published_store_is_current")
    check_only = dg.define_asset_job("check_only", selection=dg.AssetSelection.checks(key))
    defs = build_definitions(str(tiny_project.config_path))
    with_job = dg.Definitions.merge(defs, dg.Definitions(jobs=[check_only]))
    run = with_job.resolve_job_def("check_only").execute_in_process(
        instance=tiny_project.instance
    )
    assert run.success
    passed, severity, description = _check(
        tiny_project, "published_local", "published_store_is_current"
    )
    assert not passed and severity == "WARN" and "older corpus" in description


def test_junk_files_are_skipped_reported_and_never_published(tiny_project: Project) -> None:
    tiny_project.write_config(**{"corpus.max_file_bytes": 4000})
    big = tiny_project.corpus / "alpha" / "huge.txt"
    big.write_text(("A long paragraph about subnets and routing. " * 20 + "\n\n") * 10)
    binary = tiny_project.corpus / "beta" / "program.md"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)
    outcome = tiny_project.materialize()
    assert outcome.success, outcome.lines
    passed, severity, description = _check(tiny_project, "knowledge_chunks", "corpus_problems")
    assert not passed and severity == "WARN" and description.startswith("2 file(s)")
    published = (tiny_project.published() / "knowledge-store.json").read_text()
    assert "huge.txt" not in published and "program.md" not in published


def test_roadmaps_that_multiply_are_refused_and_the_rest_is_published(
    tiny_project: Project,
) -> None:
    from brain_pipeline_tests.corpus.hostile import (
        hostile_roadmaps,
        refusal_reason,
        write_hostile_roadmaps,
    )

    write_hostile_roadmaps(tiny_project.corpus / "alpha" / "roadmaps")
    before = {p.name for p in (tiny_project.corpus / "alpha").rglob("*.md")}
    outcome = tiny_project.materialize()
    assert outcome.success, outcome.lines
    passed, severity, description = _check(tiny_project, "knowledge_chunks", "corpus_problems")
    assert not passed and severity == "WARN"
    assert description.startswith(f"{len(hostile_roadmaps())} file(s)")
    store = tiny_project.published() / "knowledge-store.json"
    published = store.read_text(encoding="utf-8")
    assert store.stat().st_size < 3_000_000 and "roadmaps/formatted-" not in published
    assert all(f"alpha/{name}" in published for name in before)  # the rest is there
    record = tiny_project.instance.get_latest_asset_check_evaluation_record(
        dg.AssetCheckKey(dg.AssetKey("knowledge_chunks"), "corpus_problems")
    )
    assert record is not None and record.event is not None and record.event.dagster_event
    files = record.event.dagster_event.event_specific_data.metadata["files"]
    named = {row.data["file"]: row.data["reason"] for row in files.records}
    assert named == {f"alpha/roadmaps/{name}": refusal_reason(name) for name in hostile_roadmaps()}


def test_status_agrees_with_the_pipeline_on_junk_and_writes_nothing(
    tiny_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    from brain_pipeline.cli import main

    tiny_project.write_config(**{"corpus.max_file_bytes": 4000})
    big = tiny_project.corpus / "alpha" / "huge.txt"
    big.write_text(("Subnets and route tables, at length. " * 40 + "\n\n") * 10)
    assert tiny_project.materialize().success
    monkeypatch.setenv("BRAIN_CONFIG", str(tiny_project.config_path))
    layout = StateLayout.of(tiny_project.build)

    def index_rows() -> list[tuple[str, str]]:  # the corpus file index, in the ledger
        with contextlib.closing(sqlite3.connect(layout.ledger)) as db:
            return db.execute("SELECT source, row FROM corpus_files ORDER BY source").fetchall()

    before = index_rows()
    assert before  # the observation indexed the corpus
    # The same junk rule as the observation: the skipped file does not make it "stale".
    assert main(["status"]) == 0
    assert index_rows() == before  # read-only
    edit_corpus(tiny_project)
    assert main(["status"]) == 2  # a real edit is stale


def test_area_names_in_a_check_description_render_as_text(tiny_project: Project) -> None:
    """The UI renders check descriptions as Markdown: a folder name must not become an
    image fetched from another host, or a link."""
    hostile = "![x](www.evil.example?p.png) [click](https:x) <img src=x>"
    (tiny_project.corpus / hostile).mkdir()
    (tiny_project.corpus / hostile / "data.csv").write_text("a,b\n", encoding="utf-8")
    assert tiny_project.materialize().success
    passed, severity, description = _check(tiny_project, "knowledge_store", "no_empty_area")
    assert not passed and severity == "WARN"
    assert "!\\[x\\](www\\.evil.example?p.png) \\[click\\](https:x) \\<img src=x\\>" in description
