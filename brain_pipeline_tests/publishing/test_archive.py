"""A publication's files are kept as blobs: they survive the live file's replacement, a
missing one is named, and only blobs no kept generation (nor step result) names go."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from brain_pipeline.evaluation import eval_record
from brain_pipeline.publishing.publication_log import append_events
from brain_pipeline.state.blobs import LocalBlobs
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Ledger, StepKey, StepResult, sqlite_url
from brain_pipeline.state.memory import Memory
from brain_pipeline.steps.publications import keep_file, missing_blobs, prune_blobs
from brain_pipeline.utils.digest import canonical_json, sha256_hex
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


def test_gc_removes_every_blob_nothing_kept_reaches_and_keeps_what_is_reached(
    tmp_path: Path,
) -> None:
    """One reachability walk over the ledger: kept publications, the current record,
    baselines, packs, the newest evaluation and the kept ones' candidates stay; an older
    evaluation outcome, a candidate of an evaluation nothing keeps, a baseline's former
    value, a pruned generation's files and a stale temporary file go."""
    import os

    from brain_pipeline.embedding.packs import DDL as PACKS_DDL
    from brain_pipeline.evaluation import judgements
    from brain_pipeline.steps.publications import collect_blobs

    memory = _memory(tmp_path)
    put = memory.blobs.put_bytes
    events = []
    for n in (1, 2, 3):
        event = pub(n, "x")
        event["store_sha256"], event["manifest_sha256"] = put(b"s%d" % n), put(b"m%d" % n)
        events.append(event)
    append_events(memory, events)  # with keep 2: #3 and #2 are kept, #1 is not
    key = StepKey("knowledge_store", "i", "c", "s")
    memory.ledger.record_step(StepResult(key, {"chunks": put(b"current chunks")}))
    assert memory.ledger.set_pointer("record:knowledge_store", "i c", expected=None)
    memory.ledger.record_step(
        StepResult(StepKey("knowledge_store", "j", "c", "s"), {"chunks": put(b"old chunks")})
    )
    outcomes = (("k1", 1, {"old": 1}), ("k2", 2, {"kept": 2}), ("k9", 9, {"new": 9}))
    for name, day, outcome in outcomes:
        at = datetime(2026, 1, day, tzinfo=UTC)
        eval_record.save(memory, name, outcome, now=lambda at=at: at)  # type: ignore[misc]
    judgements.move(memory, judgements.CANDIDATE + "k1", judgements.put_json(memory, ["c1"]))
    judgements.move(memory, judgements.CANDIDATE + "k9", judgements.put_json(memory, ["c9"]))
    judgements.move(memory, judgements.REGRESSION, judgements.put_json(memory, {"b": "old"}))
    judgements.move(memory, judgements.REGRESSION, judgements.put_json(memory, {"b": "new"}))
    memory.ledger.ensure_tables("embedding", PACKS_DDL)
    memory.ledger.execute(
        "INSERT INTO embedding_packs (shape, kind, blob, vectors, created_at) "
        "VALUES ('m@1', 'pack', ?, 1, '')",
        (put(b"a pack"),),
    )
    folder = tmp_path / "blobs" / "sha256" / "ab"
    folder.mkdir(parents=True, exist_ok=True)
    stale, fresh = folder / ".abc.1.tmp", folder / ".abd.2.tmp"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    os.utime(stale, (1_000_000_000, 1_000_000_000))
    listed = set(memory.blobs.list())

    def outcome_blob(key: str) -> str:
        (row,) = memory.ledger.query("SELECT outcome FROM eval_outcomes WHERE key = ?", (key,))
        return str(row[0])

    unreachable = {sha256_hex(b"s1"), sha256_hex(b"m1"), sha256_hex(b"old chunks")}
    unreachable |= {outcome_blob("k1"), sha256_hex(canonical_json(["c1"]))}
    unreachable |= {sha256_hex(canonical_json({"b": "old"}))}
    reached = {sha256_hex(b"s2"), sha256_hex(b"m3"), sha256_hex(b"current chunks")}
    reached |= {outcome_blob("k2"), outcome_blob("k9"), sha256_hex(b"a pack")}
    assert unreachable | reached <= listed

    removed = collect_blobs(memory, 2)

    assert removed == [*sorted(unreachable), str(stale)]
    assert set(memory.blobs.list()) == listed - unreachable
    assert judgements.pointed(memory, judgements.REGRESSION) == {"b": "new"}
    assert judgements.pointed(memory, judgements.CANDIDATE + "k9") == ["c9"]
    assert fresh.exists() and not stale.exists()
    assert collect_blobs(memory, 2) == []
