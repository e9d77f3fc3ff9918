"""Every state file of a good build directory, damaged three ways, then an edit and a run.

The good directory is built once per module and copied per case. A run after damage must
succeed and publish exactly what a fresh build of the edited corpus publishes; a file
found damaged is set aside once as `<name>.damaged` (holding the damaged bytes) and named
in one WARN line. Files written as one directory (a cache unit: BM25 postings, an area
index, the store's sidecar) are set aside as that directory, and a member missing from
one is damage too. The files a one-edit run reads (`READ_BY_AN_EDIT`) must be found
damaged by it: nothing may use or silently discard them.
"""

from __future__ import annotations

import logging
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from brain_pipeline.config import load_config
from brain_pipeline.corpus.observation import load_snapshot
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.memory import Memory
from brain_pipeline.steps.ingest import stored_snapshot
from brain_pipeline.utils.damage import DAMAGED_SUFFIX
from brain_pipeline_tests.defs.conftest import (
    Project,
    edit_corpus,
    make_project,
    tiny_fixture,
    write_tiny_corpus,
)

# Glob patterns (relative to the build directory) naming every kind of state file.
STATE_FILES = [
    "knowledge-store.json",
    "state/chunks/cache.sqlite",
    "state/store/*/meta.json",
    "state/store/*/ids.npy",
    "state/history/live-ids.npz",
    "state/index/area-*/meta.json",
    "state/index/postings-*/meta.json",
    "state/index/postings-*/ids.npy",
    "state/index/legacy-*/*.npz",
]
MODES = ["truncate", "garbage", "delete"]

DIRECTORY_UNITS = {
    "state/store/*/meta.json",
    "state/store/*/ids.npy",
    "state/index/area-*/meta.json",
    "state/index/postings-*/meta.json",
    "state/index/postings-*/ids.npy",
}
"""Patterns whose file belongs to a directory written (and set aside) as one unit."""

READ_BY_AN_EDIT = {
    "state/index/area-*/meta.json",
    "state/index/postings-*/meta.json",
    "state/index/postings-*/ids.npy",
    "state/index/legacy-*/*.npz",
}
"""Caches routed through the damage helper that the run after a one-file edit reads: the
area indexes and their postings (the edited area's previous version is reused; the
counts of the new chunks are looked up in every set), the legacy matches (looked up for
the new chunks), the baseline (compared with). Damage to them must be set aside and
named, never silently dropped."""


@dataclass
class Good:
    root: Path
    expected_store: bytes


def _copy_project(source: Path, target: Path) -> Project:
    for name in ("corpus", "build", "agent", "fixture.json"):
        src = source / name
        if src.is_dir():
            shutil.copytree(src, target / name)
        else:
            shutil.copy2(src, target / name)
    return make_project(target, target / "corpus", target / "fixture.json")


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Good:
    root = tmp_path_factory.mktemp("good")
    ids = write_tiny_corpus(root / "corpus")
    project = make_project(root, root / "corpus", tiny_fixture(ids))
    assert project.materialize().success
    fresh_root = tmp_path_factory.mktemp("fresh")
    fresh = _copy_project(root, fresh_root)
    shutil.rmtree(fresh.build)
    shutil.rmtree(fresh.publish_root)
    edit_corpus(fresh)
    assert fresh.materialize().success
    return Good(root, (fresh.published() / "knowledge-store.json").read_bytes())


def _damage(path: Path, mode: str) -> bytes | None:
    """Damage `path`; the bytes it now holds (None when deleted)."""
    if mode == "delete":
        path.unlink()
        return None
    data = path.read_bytes()
    if mode == "truncate":
        damaged = data[: len(data) // 2]
    else:
        damaged = random.Random(path.name).randbytes(max(len(data), 64))
    path.write_bytes(damaged)
    return damaged


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pattern", STATE_FILES)
def test_a_damaged_state_file_heals(
    good: Good, tmp_path: Path, pattern: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    project = _copy_project(good.root, tmp_path)
    targets = sorted(project.build.glob(pattern))
    assert targets, f"the good build has no {pattern}"  # the case must damage something
    target = targets[0]
    damaged = _damage(target, mode)
    edit_corpus(project)

    with caplog.at_level(logging.WARNING, logger="brain_pipeline.damage"):
        outcome = project.materialize()

    assert outcome.success, outcome.lines
    assert (project.published() / "knowledge-store.json").read_bytes() == good.expected_store
    warnings = [r.getMessage() for r in caplog.records if r.name == "brain_pipeline.damage"]
    unit = target.parent if pattern in DIRECTORY_UNITS else target
    aside = unit.with_name(unit.name + DAMAGED_SUFFIX)
    if damaged is None and unit == target:
        assert not warnings and not aside.exists()  # a missing file is an ordinary miss
        return
    named = [w for w in warnings if str(unit) in w]
    if pattern in READ_BY_AN_EDIT:
        assert aside.exists(), f"{unit} was read damaged but not set aside; {warnings}"
    if aside.exists():
        # Set aside once, with the damaged bytes for inspection, and said in one line.
        kept = aside / target.name if unit != target else aside
        if damaged is None:
            assert not kept.exists()
        else:
            assert kept.read_bytes() == damaged
        assert len(named) == 1 and len(warnings) == 1, warnings
    else:
        # Not read by this run, or replaced by the run before it was read: never trusted.
        assert not named
        assert not target.exists() or target.read_bytes() != damaged or _unused(pattern)


def _unused(pattern: str) -> bool:
    """State files a one-file edit run may not read at all (the sidecars of the store
    the edit superseded, indexes of areas the check skips)."""
    return pattern.startswith(
        ("state/index/", "state/history/live", "state/store/")
    )


RECORDED_ASSETS = ["knowledge_chunks", "knowledge_store", "embeddings", "published_local"]


@pytest.mark.parametrize("asset", RECORDED_ASSETS)
def test_a_lost_record_is_made_again(good: Good, tmp_path: Path, asset: str) -> None:
    """An asset's record (a ledger row since the records left `state/assets/`) lost: the
    run after an edit succeeds, publishes what a fresh build does and records it anew."""
    from brain_pipeline.state.ledger import Ledger, sqlite_url
    from brain_pipeline.state.records import POINTER, read_record

    project = _copy_project(good.root, tmp_path)
    layout = StateLayout.of(project.build)
    with Ledger(sqlite_url(layout.ledger)) as ledger:
        assert ledger.execute("DELETE FROM pointers WHERE name = ?", (POINTER + asset,)) == 1
    edit_corpus(project)

    outcome = project.materialize()

    assert outcome.success, outcome.lines
    assert (project.published() / "knowledge-store.json").read_bytes() == good.expected_store
    assert read_record(load_memory(project), asset) is not None


def load_memory(project: Project) -> Memory:
    from brain_pipeline.config import memory_of

    return memory_of(load_config(project.config_path))


def test_the_damage_warning_reaches_the_run_log(good: Good, tmp_path: Path) -> None:
    """The WARN is in the run's own event log (what the UI shows), logged by the step
    that found the damage, not only on the process's stderr. (A set of postings is set
    aside, and named, as the directory it was written as.)"""
    project = _copy_project(good.root, tmp_path)
    target = sorted(project.build.glob("state/index/postings-*"))[0]
    _damage(target / "ids.npy", "garbage")
    edit_corpus(project)

    outcome = project.materialize()

    assert outcome.success, outcome.lines
    warned = [
        record
        for record in project.instance.all_logs(outcome.run_id)
        if record.level == logging.WARNING and f"{target} " in record.user_message
    ]
    assert len(warned) == 1, [r.user_message for r in warned]
    assert warned[0].step_key, "logged outside any step"
    assert "damaged BM25 postings" in warned[0].user_message


def test_a_damaged_snapshot_of_the_current_corpus_is_observed_again(
    good: Good, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Assembly reads the snapshot its chunks were made from: its blob damaged, it is
    dropped (named in one WARN line) and the unchanged corpus observed (and the snapshot
    stored) again."""
    project = _copy_project(good.root, tmp_path)
    cfg = load_config(project.config_path)
    memory = load_memory(project)
    [(digest, blob)] = memory.ledger.query("SELECT digest, blob FROM corpus_snapshots")
    [path] = project.build.glob(f"state/blobs/sha256/*/{blob}")
    _damage(path, "truncate")

    with caplog.at_level(logging.WARNING, logger="brain_pipeline.damage"):
        again = stored_snapshot(cfg, digest)

    assert again.digest == digest
    assert load_snapshot(memory, digest) == again  # stored anew
    [(stored,)] = memory.ledger.query("SELECT blob FROM corpus_snapshots")
    assert memory.blobs.get_bytes(stored) == again.to_json()
    warnings = [r.getMessage() for r in caplog.records if r.name == "brain_pipeline.damage"]
    assert len(warnings) == 1 and digest in warnings[0], warnings
