"""`defs.hand_off`: Dagster's IO manager over the ledger and the blobs hands every step its
upstream's record (or the build), read from the ledger and fetched onto this disk."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from brain_pipeline.definitions import build_definitions
from brain_pipeline_tests.defs.conftest import Project

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
