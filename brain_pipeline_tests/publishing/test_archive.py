"""A publication's files are kept as blobs: they survive the live file's replacement, a
missing one is named, and only blobs no kept generation (nor step result) names go."""

from __future__ import annotations

from pathlib import Path

from brain_pipeline.publishing.publication_log import append_events
from brain_pipeline.state.blobs import LocalBlobs
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Ledger, StepKey, StepResult, sqlite_url
from brain_pipeline.state.memory import Memory
from brain_pipeline.steps.publications import keep_file, missing_blobs, prune_blobs
from brain_pipeline.utils.digest import sha256_hex
from brain_pipeline_tests.publishing.test_publication_log import pub


def _memory(tmp_path: Path) -> Memory:
    layout = StateLayout.of(tmp_path / "build")
    return Memory(Ledger(sqlite_url(layout.ledger)), LocalBlobs(tmp_path / "blobs"), layout)


def test_a_published_file_is_kept_by_link_and_survives_its_replacement(tmp_path: Path) -> None:
    memory = _memory(tmp_path)
    live = tmp_path / "src" / "knowledge-store.json"
    live.parent.mkdir()
    live.write_bytes(b"first store")
    sha = sha256_hex(b"first store")
    keep_file(memory, live, sha)
    (kept,) = (tmp_path / "blobs").glob(f"sha256/*/{sha}")
    assert kept.stat().st_ino == live.stat().st_ino  # same filesystem: no second copy
    replacement = live.with_name("new")
    replacement.write_bytes(b"second store")
    replacement.replace(live)  # how a commit replaces a live file
    assert memory.blobs.get_bytes(sha) == b"first store"


def test_missing_blobs_are_named_and_prune_keeps_what_is_reachable(tmp_path: Path) -> None:
    memory = _memory(tmp_path)
    blobs = {n: memory.blobs.put_bytes(n.encode()) for n in ("m1", "m2", "m3", "s1", "s2", "s3")}
    events = []
    for n in (1, 2, 3):
        event = pub(n, "x")
        event["store_sha256"], event["manifest_sha256"] = blobs[f"s{n}"], blobs[f"m{n}"]
        events.append(event)
    history = append_events(memory, events)
    # The current record naming #1's store (another family's blob): never deleted here.
    key = StepKey("knowledge_store", "i", "c", "s")
    memory.ledger.record_step(StepResult(key, {"store": blobs["s1"]}))
    assert memory.ledger.set_pointer("record:knowledge_store", "i c", expected=None)
    # An older record naming #1's manifest keeps nothing: it is no longer current.
    memory.ledger.record_step(StepResult(StepKey("knowledge_store", "j", "c", "s"),
                                         {"manifest": blobs["m1"]}))
    removed = prune_blobs(memory, history, 2)
    assert removed == [blobs["m1"]]
    assert memory.blobs.has(blobs["s1"]) and memory.blobs.has(blobs["m2"])
    (problem,) = missing_blobs(memory, {"manifest.json": blobs["m1"], "store": blobs["s3"]})
    assert problem.startswith("manifest.json (sha256 ") and blobs["m1"] in problem
