"""A set of files committed as one: stage, record the intent, rename, forget; and the
recovery that finishes or undoes a commit a crash interrupted.

The interrupted states are the files a crash leaves: the staging and intent are made by
the module's own staging step and intent record, then the process "dies" (the test stops
there) and `recover_publication` runs as the next process would. Killing real processes
at every step is publishing/test_fault_injection.py's job.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from brain_pipeline.publishing import commit
from brain_pipeline.publishing.commit import (
    BACKUP_PREFIX,
    STAGING_PREFIX,
    FileChange,
    Intent,
    Operation,
    PublicationError,
    RecoveryError,
    commit_changes,
    describe_os_error,
    find_leftovers,
    intent_path,
    pending_commit,
    recover_publication,
    sweep_leftovers,
)
from brain_pipeline.publishing.source import ArtifactSource
from brain_pipeline.utils.atomic import atomic_write_bytes


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` (relative path -> bytes): what a reader could see."""
    files = (p for p in sorted(root.rglob("*")) if p.is_file())
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in files}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A publish root holding a previous set in src/storage and dist/storage."""
    publish = tmp_path / "agent"
    for target in ("src/storage", "dist/storage"):
        (publish / target).mkdir(parents=True)
        (publish / target / "knowledge-store.json").write_bytes(b"old store")
        (publish / target / "manifest.json").write_bytes(b"old manifest")
    (publish / "dist/storage/embeddings.bin").write_bytes(b"old vectors")
    return publish


def _changes(root: Path, tmp_path: Path) -> list[FileChange]:
    """New store (from a file) in both targets, vectors removed from dist, manifests last."""
    artifact = tmp_path / "build-store.json"
    artifact.write_bytes(b"new store")
    source = ArtifactSource.of_file(artifact)
    src, dist = root / "src/storage", root / "dist/storage"
    return [
        FileChange(src, "knowledge-store.json", source),
        FileChange(dist, "knowledge-store.json", source),
        FileChange(dist, "embeddings.bin", None),
        FileChange(src, "manifest.json", b"new manifest"),
        FileChange(dist, "manifest.json", b"new manifest"),
    ]


NEW_SET = {
    "dist/storage/knowledge-store.json": b"new store",
    "dist/storage/manifest.json": b"new manifest",
    "src/storage/knowledge-store.json": b"new store",
    "src/storage/manifest.json": b"new manifest",
}
OLD_SET = {
    "dist/storage/embeddings.bin": b"old vectors",
    "dist/storage/knowledge-store.json": b"old store",
    "dist/storage/manifest.json": b"old manifest",
    "src/storage/knowledge-store.json": b"old store",
    "src/storage/manifest.json": b"old manifest",
}


def test_a_commit_replaces_and_removes_the_whole_set_and_leaves_nothing_behind(
    root: Path, tmp_path: Path
) -> None:
    commit_id = commit_changes(root, _changes(root, tmp_path), {"run": "r1"})
    assert commit_id is not None and len(commit_id) == 12
    assert _tree(root) == NEW_SET  # no intent, no staging, no previous.* links
    assert [p.name for p in (root / ".brain-publish").iterdir()] == []
    assert pending_commit(root) is None


def test_no_changes_is_no_commit(root: Path) -> None:
    assert commit_changes(root, []) is None
    assert _tree(root) == OLD_SET and not (root / ".brain-publish").exists()


def test_a_source_rewritten_before_staging_changes_nothing_live(root: Path, tmp_path: Path) -> None:
    changes = _changes(root, tmp_path)
    (tmp_path / "build-store.json").write_bytes(b"NEW STORE")  # same size, other bytes
    with pytest.raises(PublicationError) as caught:
        commit_changes(root, changes)
    message = str(caught.value)
    assert "\n" not in message and "nothing live was changed" in message
    assert "src/storage/knowledge-store.json" in message and "build-store.json" in message
    assert _tree(root) == OLD_SET
    assert find_leftovers(root) == []


def _interrupted(root: Path, changes: list[FileChange]) -> Intent:
    """What a crash right after step 2 leaves: staged files, backups and the intent."""
    intent = commit._stage(root.absolute(), "c0ffee000001", changes, {})
    atomic_write_bytes(intent_path(root), intent.to_json())
    return intent


def test_an_interrupted_commit_with_its_staging_intact_is_completed(
    root: Path, tmp_path: Path
) -> None:
    _interrupted(root, _changes(root, tmp_path))
    os.replace(  # the crash came after the first rename
        root / "src/storage" / f"{STAGING_PREFIX}c0ffee000001" / "knowledge-store.json",
        root / "src/storage/knowledge-store.json",
    )
    pending = pending_commit(root)
    assert pending is not None and pending.commit_id == "c0ffee000001" and pending.readable
    assert "awaits recovery" in pending.describe()
    report = recover_publication(root)
    assert (report.action, report.commit_id, report.problems) == (
        "rolled_forward", "c0ffee000001", (),
    )  # fmt: skip
    assert report.summary() == "recovered interrupted publication c0ffee000001: completed it"
    assert _tree(root) == NEW_SET
    assert recover_publication(root).action == "clean"  # idempotent


def test_an_interrupted_commit_with_damaged_staging_is_rolled_back(
    root: Path, tmp_path: Path
) -> None:
    _interrupted(root, _changes(root, tmp_path))
    staging = root / "dist/storage" / f"{STAGING_PREFIX}c0ffee000001"
    assert (staging / f"{BACKUP_PREFIX}knowledge-store.json").read_bytes() == b"old store"
    os.replace(  # one file committed, then a staged one damaged (torn disk write)
        root / "src/storage" / f"{STAGING_PREFIX}c0ffee000001" / "knowledge-store.json",
        root / "src/storage/knowledge-store.json",
    )
    (staging / "manifest.json").write_bytes(b"NEW MANIFEST")  # its size, other bytes
    report = recover_publication(root)
    assert report.action == "rolled_back"
    damaged = f"staged dist/storage/{STAGING_PREFIX}c0ffee000001/manifest.json is damaged"
    assert report.problems == (damaged,)
    assert "rolled back to the previous set" in report.summary()
    assert _tree(root) == OLD_SET  # the committed file is put back too


def test_an_unreadable_intent_stops_recovery_and_touches_nothing(root: Path) -> None:
    record = intent_path(root)
    record.parent.mkdir()
    record.write_bytes(b'{"format": 1, "id": ')
    before = _tree(root)
    with pytest.raises(RecoveryError, match="intent.json is unreadable"):
        recover_publication(root)
    pending = pending_commit(root)
    assert pending is not None and not pending.readable and pending.commit_id is None
    assert "unknown id" in pending.describe()
    assert _tree(root) == before


def test_only_the_publications_own_leftovers_are_swept(root: Path) -> None:
    dist = root / "dist/storage"
    ours = [
        dist / ".knowledge-store.json.a1b2c3.tmp",
        root / "src/storage" / f"{STAGING_PREFIX}deadbeef0000",
        root / ".brain-publish" / ".intent.json.x9.tmp",
    ]
    ours[0].write_bytes(b"half")
    ours[1].mkdir()
    (ours[1] / "manifest.json").write_bytes(b"staged")
    ours[2].parent.mkdir()
    ours[2].write_bytes(b"half")
    theirs = [dist / ".notes.md.a1.tmp", dist / "knowledge-store.json.tmp", root / ".x.tmp"]
    for path in theirs:
        path.write_bytes(b"a user's file")
    assert sorted(find_leftovers(root)) == sorted(p.absolute() for p in ours)
    report = recover_publication(root)
    assert report.action == "clean" and len(report.swept) == 3 and report.changed_anything
    assert report.summary().endswith("removed 3 leftover temporary file(s)/folder(s)")
    assert not any(p.exists() for p in ours) and all(p.exists() for p in theirs)
    assert sweep_leftovers(root) == [] and not recover_publication(root).changed_anything


def test_the_intent_record_round_trips_and_refuses_other_formats() -> None:
    intent = Intent(
        "abc",
        (
            Operation("src/storage", "a.json", "replace", 3, "f" * 64, 7, "s/a.json", "b", True),
            Operation("dist/storage", "b.bin", "remove"),
        ),
        {"run": "r1"},
    )
    assert Intent.from_json(intent.to_json()) == intent
    with pytest.raises(ValueError, match="known format"):
        Intent.from_json(intent.to_json().replace(b'"format": 1', b'"format": 2'))
    with pytest.raises(ValueError, match="unknown action"):
        Intent.from_json(intent.to_json().replace(b'"remove"', b'"rename"'))


def test_os_errors_are_described_with_their_symbolic_name() -> None:
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert describe_os_error(full) == "No space left on device (ENOSPC)"
    assert describe_os_error(OSError("plain")) == "plain"
