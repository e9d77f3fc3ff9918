"""The hand-off between assets (Dagster's IO manager over the ledger and the blobs):
selections on a fresh instance, a step in an empty folder, build-dir binding, staleness."""

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


HANDED_ON = {
    ("knowledge_store", "knowledge_chunks"),
    ("embeddings", "knowledge_store"),
    ("published_local", "embeddings"),
    ("published_s3", "published_local"),
}
"""(asset, upstream): every building step's upstream arrives as a parameter."""


def test_every_step_is_handed_its_upstream_by_the_ledger_io_manager() -> None:
    from brain_pipeline.defs.hand_off import ledger_hand_off

    defs = build_definitions()
    handed = set()
    for assets_def in defs.assets or []:
        if isinstance(assets_def, dg.AssetsDefinition) and not assets_def.is_observable:
            for key in assets_def.keys:
                handed |= {
                    (key.to_user_string(), upstream.to_user_string())
                    for upstream in assets_def.keys_by_input_name.values()
                    if upstream.to_user_string() not in ("corpus", "eval_fixture")
                }
    assert handed == HANDED_ON
    assert defs.resources["io_manager"] is ledger_hand_off
    (check,) = [c for c in defs.asset_checks or [] if "retrieval_eval" in str(c.check_keys)]
    assert "embeddings" in {k.to_user_string() for k in check.keys_by_input_name.values()}


def test_only_the_hand_off_reads_an_upstream_record_or_the_build() -> None:
    """A step that fetched its upstream itself would read another step's files by path
    again (before the IO manager: `fetch_build` in the evaluate and publish steps)."""
    package = Path(build_definitions.__code__.co_filename).parent
    allowed = {package / "steps" / "contract.py", package / "defs" / "hand_off.py"}
    callers = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path not in allowed
        and ("upstream_record(" in path.read_text() or "load_build(" in path.read_text())
    )
    assert callers == []


def test_a_step_in_an_empty_build_folder_is_handed_the_recorded_files(
    tiny_project: Project,
) -> None:
    """The publish step of a fresh process whose build folder lost the store (a pod, a
    process per step) is handed the recorded bytes from the blobs, not refused."""
    assert tiny_project.materialize().success
    recorded = tiny_project.store_file.read_bytes()
    tiny_project.store_file.unlink()
    (tiny_project.published() / "knowledge-store.json").unlink()
    tiny_project.instance = dg.DagsterInstance.ephemeral()

    outcome = tiny_project.materialize("published_local")

    assert outcome.success, outcome.lines
    assert (tiny_project.published() / "knowledge-store.json").read_bytes() == recorded
    assert tiny_project.store_file.read_bytes() == recorded


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
