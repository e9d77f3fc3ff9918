"""The hand-off between assets across runs and instances: selections on a fresh instance,
build-dir binding, staleness (the IO manager itself: test_hand_off.py)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from dagster._utils.test.data_versions import get_stale_status_resolver

from brain_pipeline.definitions import build_definitions
from brain_pipeline_tests.defs.conftest import (
    Project,
    edit_corpus,
    make_project,
    observe_with_sensor,
    tiny_fixture,
    write_tiny_corpus,
)

GRAPH = ["knowledge_chunks", "knowledge_store", "embeddings", "published_local"]


def _statuses(project: Project) -> dict[str, str]:
    defs = build_definitions(str(project.config_path))
    assets = list(defs.assets or [])
    resolver = get_stale_status_resolver(project.instance, assets)  # type: ignore[arg-type]
    return {name: resolver.get_status(dg.AssetKey(name)).value for name in GRAPH}


def test_any_selection_runs_on_a_fresh_instance_from_the_build_directory(
    tiny_project: Project,
) -> None:
    assert tiny_project.materialize("group:ingest").success
    tiny_project.instance = dg.DagsterInstance.ephemeral()  # no pickles, no history
    outcome = tiny_project.materialize("embeddings")
    assert outcome.success, outcome.lines
    tiny_project.instance = dg.DagsterInstance.ephemeral()
    outcome = tiny_project.materialize("embeddings+")
    assert outcome.success, outcome.lines
    published = tiny_project.published() / "knowledge-store.json"
    assert published.read_bytes() == tiny_project.store_file.read_bytes()


def test_a_selection_whose_inputs_are_missing_says_what_to_run(tiny_project: Project) -> None:
    outcome = tiny_project.materialize("embeddings")
    assert not outcome.success
    assert any(
        "knowledge_store" in line and "materialise it first" in line for line in outcome.lines
    )


def test_a_second_build_directory_on_one_instance_is_refused(
    tiny_project: Project, tmp_path: Path
) -> None:
    assert tiny_project.materialize().success
    other_root = tmp_path / "other"
    other_corpus = other_root / "corpus"
    other = make_project(other_root, other_corpus, tiny_fixture(write_tiny_corpus(other_corpus)))
    other.instance = tiny_project.instance
    outcome = other.materialize()
    assert not outcome.success
    assert any("serves the ledger" in line for line in outcome.lines), outcome.lines
    assert not (other.publish_root / "src" / "storage" / "knowledge-store.json").exists()
    assert not other.store_file.exists()


def test_unchanged_inputs_skip_the_work_and_keep_every_asset_fresh(tiny_project: Project) -> None:
    assert tiny_project.materialize().success
    assert set(_statuses(tiny_project).values()) == {"FRESH"}
    store_inode = tiny_project.store_file.stat().st_ino
    assert tiny_project.materialize().success
    assert tiny_project.store_file.stat().st_ino == store_inode  # not rewritten
    assert set(_statuses(tiny_project).values()) == {"FRESH"}


def test_a_corpus_edit_makes_the_chunks_stale_in_dagster(tiny_project: Project) -> None:
    assert tiny_project.materialize().success
    edit_corpus(tiny_project)
    observe_with_sensor(tiny_project)
    assert _statuses(tiny_project)["knowledge_chunks"] == "STALE"
    assert tiny_project.materialize().success
    assert set(_statuses(tiny_project).values()) == {"FRESH"}


def test_rebind_moves_the_instance_to_another_build_directory(
    tiny_project: Project, tmp_path: Path
) -> None:
    from brain_pipeline.config import load_config
    from brain_pipeline.lib.steps import rebind_build_dir

    assert tiny_project.materialize().success
    moved = tmp_path / "moved-build"
    tiny_project.write_config(build_dir=str(moved))
    refused = tiny_project.materialize()
    assert not refused.success and any("--rebind" in line for line in refused.lines)
    before = rebind_build_dir(tiny_project.instance, load_config(tiny_project.config_path))
    assert before is not None and str(tiny_project.build) in before
    assert tiny_project.materialize().success
    assert (moved / "knowledge-store.json").exists()


def test_an_unchanged_publish_skips_unless_a_live_file_was_touched(tiny_project: Project) -> None:
    assert tiny_project.materialize().success
    live = tiny_project.published() / "knowledge-store.json"
    inode = live.stat().st_ino
    assert tiny_project.materialize().success
    assert live.stat().st_ino == inode  # nothing rewritten, nothing re-read
    live.write_text("[]")  # a person (or a bad copy) damages the live store
    assert tiny_project.materialize().success
    assert live.read_bytes() == tiny_project.store_file.read_bytes()
