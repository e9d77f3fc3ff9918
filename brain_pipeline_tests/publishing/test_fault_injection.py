"""Fault injection on the Dagster-free publishing core: kill -9, a full disk.

Every test asserts what is on disk afterwards, after `recover_publication` (what the
next pipeline run does first): each storage directory holds exactly the previous set or
exactly the new one (byte for byte, the same in src and dist), no staging folder, no
temporary file, no intent record; and the run after that publishes the new set.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline.publishing.commit import (
    PublicationError,
    find_leftovers,
    intent_path,
    pending_commit,
)
from brain_pipeline.publishing.local import (
    inspect_publication,
    publish_local,
    recover_publication,
)
from brain_pipeline.publishing.manifest import build_manifest
from brain_pipeline_tests.mounts import small_tmpfs
from brain_pipeline_tests.publishing.conftest import AGENT_MODEL, SampleBuild, make_build
from brain_pipeline_tests.publishing.crash import ChildResult, PublishZygote

PUBLISHED_AT = "2026-01-01T00:00:00Z"
Snapshot = dict[str, dict[str, bytes]]


@pytest.fixture(scope="module")
def zygote() -> Iterator[PublishZygote]:
    forker = PublishZygote()
    try:
        yield forker
    finally:
        forker.close()


def publish_in_process(build: SampleBuild, root: Path, *, run_id: str) -> None:
    manifest = build_manifest(
        build.store,
        build.embeddings,
        None,
        None,
        "c0ffee",
        run_id,
        published_at=PUBLISHED_AT,
    )
    recover_publication(root)
    publish_local(
        build.store,
        build.embeddings,
        root,
        agent_query_model=AGENT_MODEL,
        manifest=manifest,
    )


def snapshot(root: Path) -> Snapshot:
    """Every entry of every storage directory (dotfiles and folders included)."""
    found: Snapshot = {}
    for sub in ("src/storage", "dist/storage"):
        directory = root / sub
        if directory.is_dir():
            found[sub] = {
                p.name: (p.read_bytes() if p.is_file() else b"<dir>")
                for p in sorted(directory.iterdir())
            }
    return found


def without_empty(snap: Snapshot) -> Snapshot:
    return {k: v for k, v in snap.items() if v}


@dataclass
class Scenario:
    """A publish root holding `old`, about to receive `new`."""

    name: str
    old: SampleBuild | None
    new: SampleBuild
    with_dist: bool


SCENARIOS = [
    Scenario("all files change, src and dist", make_build(salt="A "), make_build(salt="B "), True),
    Scenario(
        "vectors withheld: embeddings.bin removed",
        make_build(salt="A "),
        make_build(model="all-MiniLM-L6-v2", salt="B "),
        False,
    ),
    Scenario("first publication", None, make_build(salt="B "), True),
]


def prepare(scenario: Scenario, root: Path) -> None:
    root.mkdir(parents=True)
    if scenario.with_dist:
        (root / "dist").mkdir()
    if scenario.old is not None:
        publish_in_process(scenario.old, root, run_id="old")


def child_spec(scenario: Scenario, root: Path, files: Path) -> dict[str, Any]:
    files.mkdir(parents=True, exist_ok=True)
    (files / "store.json").write_bytes(scenario.new.store_bytes)
    (files / "vectors.bin").write_bytes(scenario.new.embeddings_bytes)
    return {
        "root": str(root),
        "store": str(files / "store.json"),
        "embeddings": str(files / "vectors.bin"),
        "agent_model": AGENT_MODEL,
        "published_at": PUBLISHED_AT,
        "run_id": "new",
        "corpus_digest": "c0ffee",
    }


@dataclass
class Expectations:
    old: Snapshot
    new: Snapshot
    trace: list[str]


def expectations(scenario: Scenario, workdir: Path, zygote: PublishZygote) -> Expectations:
    """The previous and the new set as a clean run leaves them, and the traced calls."""
    root = workdir / f"clean-{uuid.uuid4().hex[:6]}"
    prepare(scenario, root)
    old = without_empty(snapshot(root))
    result = zygote.run(child_spec(scenario, root, workdir / "files"), workdir)
    assert result.returncode == 0, result.stderr
    return Expectations(old, without_empty(snapshot(root)), result.trace)


def assert_whole_set(root: Path, expected: Expectations, context: str) -> str:
    """The root holds exactly the old or exactly the new set; returns which."""
    assert not intent_path(root).exists(), context
    assert find_leftovers(root) == [], context
    now = without_empty(snapshot(root))
    if now == expected.new:
        return "new"
    assert now == expected.old, f"{context}: a mixed or damaged set: {summarise(now, expected)}"
    return "old"


def summarise(now: Snapshot, expected: Expectations) -> str:
    lines = []
    for sub, files in now.items():
        for name, data in files.items():
            tag = (
                "new"
                if expected.new.get(sub, {}).get(name) == data
                else "old"
                if expected.old.get(sub, {}).get(name) == data
                else "other"
            )
            lines.append(f"{sub}/{name}={tag}")
    return ", ".join(lines)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_kill_9_at_every_step_leaves_one_whole_set(
    scenario: Scenario, tmp_path: Path, zygote: PublishZygote
) -> None:
    expected = expectations(scenario, tmp_path, zygote)
    assert expected.old != expected.new
    steps = expected.trace
    assert len(steps) >= 8, steps  # the tracer really sees the publication's calls
    kill_points = [(k, False) for k in range(1, len(steps) + 1)]
    kill_points += [(k, True) for k, label in enumerate(steps, 1) if label.startswith("write")]
    outcomes: dict[str, int] = {"old": 0, "new": 0}
    for kill_at, torn in kill_points:
        label = f"kill at step {kill_at} ({steps[kill_at - 1]}){' torn' if torn else ''}"
        root = tmp_path / f"k{kill_at}{'t' if torn else ''}"
        prepare(scenario, root)
        spec = child_spec(scenario, root, tmp_path / "files")
        result: ChildResult = zygote.run(spec, tmp_path, kill_at=kill_at, torn=torn)
        assert result.killed, f"{label}: child was not killed: {result.stderr}"

        report = recover_publication(root)
        outcomes[assert_whole_set(root, expected, label)] += 1
        if report.action == "rolled_forward":
            assert without_empty(snapshot(root)) == expected.new, label
        publication = inspect_publication(root)
        assert publication.pending is None, label
        if publication.manifest is not None:
            assert publication.consistent, f"{label}: {publication.copies}"

        # the next run converges on the new set
        assert zygote.run(spec, tmp_path).returncode == 0
        assert assert_whole_set(root, expected, f"{label}, next run") == "new"
        shutil.rmtree(root)
    # kills before the intent keep the old set, kills after it complete the new one
    assert outcomes["old"] > 0 and outcomes["new"] > 0, outcomes


def test_status_reports_an_interrupted_commit_without_touching_it(
    tmp_path: Path,
    zygote: PublishZygote,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from brain_pipeline.cli import main

    monkeypatch.chdir(tmp_path)  # no configuration, no corpus: staleness is unknown
    scenario = SCENARIOS[0]
    expected = expectations(scenario, tmp_path, zygote)
    first_rename = next(i for i, s in enumerate(expected.trace, 1) if s.startswith("replace"))
    root = tmp_path / "interrupted"
    prepare(scenario, root)
    spec = child_spec(scenario, root, tmp_path / "files")
    assert zygote.run(spec, tmp_path, kill_at=first_rename + 1).killed
    before = snapshot(root)
    pending = pending_commit(root)
    assert pending is not None and pending.readable

    code = main(["status", "--root", str(root)])
    out = capsys.readouterr().out
    assert code == 4
    assert "PENDING RECOVERY" in out and "interrupted" in out
    assert snapshot(root) == before and intent_path(root).exists(), "status must not recover"

    assert recover_publication(root).action == "rolled_forward"
    # Recovered: no longer pending (4). With no corpus to compare against, currency is
    # unknown, which status says with its own code (6), never "live and current".
    assert main(["status", "--root", str(root)]) == 6


# -- a full disk -----------------------------------------------------------------------


def test_a_full_disk_fails_before_anything_live_changes(tmp_path: Path) -> None:
    small = make_build({"a": 3}, salt="small ")
    large = make_build({"a": 4000, "b": 2000}, salt="large ")
    assert len(large.store_bytes) > 600_000
    with small_tmpfs(tmp_path / "disk", "256k") as disk:
        root = disk / "agent"
        root.mkdir()
        (root / "dist").mkdir()
        publish_in_process(small, root, run_id="small")
        before = snapshot(root)

        with pytest.raises(PublicationError) as caught:
            publish_in_process(large, root, run_id="large")

        message = str(caught.value)
        assert "ENOSPC" in message and "No space left on device" in message
        assert "\n" not in message and "nothing live was changed" in message
        assert str(root) in message
        assert snapshot(root) == before  # the live set, byte for byte, and no leftovers
        assert find_leftovers(root) == [] and not intent_path(root).exists()
        assert inspect_publication(root).consistent

        # room again (the store shrinks): the next run publishes normally
        publish_in_process(make_build({"a": 4}, salt="fits "), root, run_id="fits")
        assert inspect_publication(root).consistent


def test_leftover_temp_files_from_an_older_writer_are_swept(tmp_path: Path) -> None:
    root = tmp_path / "agent"
    root.mkdir()
    publish_in_process(make_build(), root, run_id="one")
    storage = root / "src" / "storage"
    junk = [storage / ".embeddings.bin.k2j3h4.tmp", storage / ".manifest.json.x.tmp"]
    for path in junk:
        path.write_bytes(b"x" * 1000)
    (storage / ".brain-staging-deadbeef").mkdir()
    mine = storage / "notes.tmp"  # not ours: never touched
    mine.write_text("keep me")
    report = recover_publication(root)
    assert report.action == "clean" and len(report.swept) == 3
    assert not any(p.exists() for p in junk) and mine.exists()


def test_a_damaged_staging_rolls_back_to_the_previous_set(
    tmp_path: Path, zygote: PublishZygote
) -> None:
    """Roll-forward needs every staged file intact; otherwise the previous set returns."""
    scenario = SCENARIOS[0]
    expected = expectations(scenario, tmp_path, zygote)
    renames = [i for i, s in enumerate(expected.trace, 1) if s.startswith("replace")]
    # kill after two data files went live: src is already half new
    root = tmp_path / "damaged"
    prepare(scenario, root)
    spec = child_spec(scenario, root, tmp_path / "files")
    assert zygote.run(spec, tmp_path, kill_at=renames[3]).killed
    staged = sorted(root.glob("*/storage/.brain-staging-*/manifest.json"))
    assert staged, "the manifests are still staged at this point"
    staged[0].write_bytes(b"{}")  # bit rot, or a person poking around

    report = recover_publication(root)

    assert report.action == "rolled_back" and "damaged" in report.summary()
    assert assert_whole_set(root, expected, "after roll-back") == "old"
    publish_in_process(scenario.new, root, run_id="new")
    assert inspect_publication(root).consistent
