"""Stale-label repair on a copy of the sample corpus: light edits mapped, heavy ones not."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from brain_pipeline.config import load_config
from brain_pipeline.corpus.store import Chunk
from brain_pipeline.evaluation.fixture import Fixture, LabelledQuery, load_fixture
from brain_pipeline.evaluation.repair import (
    AMBIGUOUS,
    APPLY,
    CONFLICT,
    MOVED,
    NO_MATCH,
    SPLIT,
    UNKNOWN,
    propose_for_build,
    propose_repair,
)
from brain_pipeline.evaluation.repair_write import write_repair
from brain_pipeline.evaluation.service import evaluate_store_dir
from brain_pipeline.evaluation.similarity import coverage
from brain_pipeline.evaluation.stale import find_stale
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.evaluation.helpers import make_chunk
from brain_pipeline_tests.evaluation.repair_scenarios import (
    SampleProject,
    edit_paragraph,
    labelled_chunks,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)
T1 = datetime(2026, 3, 2, tzinfo=UTC)


def test_coverage_is_robust_to_light_edits_and_not_to_rewrites() -> None:
    old = (
        "Security groups are stateful: return traffic is allowed automatically, "
        "whatever the inbound rules say. NACLs are stateless and need both directions."
    )
    assert coverage(old, old.replace(" ", "\n", 3)) == 1.0  # re-wrapped
    assert coverage(old, old.replace("automatically", "automaticaly")) > 0.95
    assert coverage(old, old + " An added sentence changes nothing here.") == 1.0
    words = old.split()
    random.Random(3).shuffle(words)
    assert coverage(old, " ".join(words)) < 0.6  # same words, another order
    assert coverage(old, "Lambda functions scale to zero when idle.") < 0.2


def _by_source(fixture: Fixture, chunks: list[Chunk]) -> dict[str, list[Chunk]]:
    """Labelled chunks grouped by file, files in a stable order."""
    grouped: dict[str, list[Chunk]] = {}
    for chunk in labelled_chunks(fixture, chunks):
        grouped.setdefault(chunk.source, []).append(chunk)
    return dict(sorted(grouped.items()))


@pytest.fixture
def sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SampleProject:
    project = SampleProject.create(tmp_path)
    monkeypatch.setenv("BRAIN_CONFIG", str(project.config))
    return project


def test_repair_maps_light_edits_and_leaves_heavy_ones_to_a_person(
    sample: SampleProject,
) -> None:
    before = sample.build_store(T0)
    fixture = load_fixture(sample.fixture)
    files = list(_by_source(fixture, before).items())
    rng = random.Random(7)
    # One labelled paragraph per file, so the edits cannot interfere.
    (typo, _), (wrap, _), (sentence, _), (split, _), (deleted, _) = [
        (chunks[0], src) for src, chunks in files[:5]
    ]
    expected = {
        typo.id: edit_paragraph(sample.corpus, typo, "typo", rng).expected,
        wrap.id: edit_paragraph(sample.corpus, wrap, "rewrap", rng).expected,
        sentence.id: edit_paragraph(sample.corpus, sentence, "sentence", rng).expected,
    }
    edit_paragraph(sample.corpus, split, "split", rng)
    edit_paragraph(sample.corpus, deleted, "delete", rng)
    # A file moved inside its area and edited: its old source has no live chunk left.
    moved_src, moved_chunks = files[5]
    area = moved_src.split("/")[0]
    moved_typo = edit_paragraph(sample.corpus, moved_chunks[0], "typo", rng)
    expected[moved_chunks[0].id] = moved_typo.expected
    sample.move(moved_src, f"{area}/renamed/{Path(moved_src).name}")
    # A file moved to another area: same ids, but out of the query's reach.
    away_src, away_chunks = next(
        (src, chunks) for src, chunks in files[6:] if not src.startswith(area)
    )
    other_area = next(a for a in ("aws-tutor", "cellular-automata") if not away_src.startswith(a))
    sample.move(away_src, f"{other_area}/imported/{Path(away_src).name}")

    after = sample.build_store(T1)
    proposal = propose_for_build(StateLayout.of(sample.build), after, fixture)
    verdict = {r.old_id: r for r in proposal.rows}

    for old_id, new_id in expected.items():
        assert verdict[old_id].verdict == APPLY, verdict[old_id].reason
        assert verdict[old_id].proposed_id == new_id
    assert "no live chunk of its source file" in verdict[moved_chunks[0].id].reason
    assert verdict[split.id].verdict == SPLIT
    assert verdict[split.id].proposed_id is None and len(verdict[split.id].candidates) == 3
    assert verdict[deleted.id].verdict == NO_MATCH
    for chunk in away_chunks:
        row = verdict[chunk.id]
        # The query's own area still exists: moving the query is offered, not applied.
        assert row.verdict == MOVED and f"labels are live in area {other_area}" in row.reason
    assert proposal.remaps == expected

    # --write: ids replaced in place, one comment line, the rest left for a person.
    original = sample.fixture.read_text(encoding="utf-8")
    written = write_repair(sample.fixture, proposal, "2026-03-02")
    text = sample.fixture.read_text(encoding="utf-8")
    assert Path(str(written.backup)).read_text(encoding="utf-8") == original
    assert text.count("\n") == original.count("\n") + 1  # the comment line, nothing else
    comments = json.loads(text)["$comment"]
    assert comments[:-1] == json.loads(original)["$comment"]
    assert comments[-1].startswith("2026-03-02: brain-pipeline fixture repair remapped 4 ")
    left = {s.id for s in find_stale(load_fixture(sample.fixture), after)}
    assert left == {split.id, deleted.id} | {c.id for c in away_chunks}


def test_after_write_the_evaluation_is_no_longer_stale(sample: SampleProject) -> None:
    before = sample.build_store(T0)
    fixture = load_fixture(sample.fixture)
    rng = random.Random(11)
    chosen = [chunks[0] for chunks in _by_source(fixture, before).values()][:6]
    for chunk, kind in zip(chosen, ["typo", "rewrap", "sentence"] * 2, strict=True):
        edit_paragraph(sample.corpus, chunk, kind, rng)
    sample.build_store(T1)
    cfg = load_config()
    stale = evaluate_store_dir(cfg, sample.build)
    assert sorted(stale.stale_ids) == sorted(c.id for c in chosen)
    assert any(f.startswith("stale fixture") for f in stale.failures)

    from brain_pipeline.cli import main

    assert main(["fixture", "repair", "--write"]) == 0
    outcome = evaluate_store_dir(cfg, sample.build)
    assert outcome.stale_ids == [] and outcome.failures == []


def _fixture(*queries: tuple[str, str, list[str]]) -> Fixture:
    return Fixture(tuple(LabelledQuery(q, a, tuple(r)) for q, a, r in queries))


PARAGRAPH = (
    "Amazon S3 versioning keeps every version of an object, so an overwrite or a delete "
    "can be undone by restoring an earlier version of that object."
)


def test_two_near_copies_are_ambiguous_and_unknown_ids_are_said_so() -> None:
    old = make_chunk(PARAGRAPH, source="aws/s3.md")
    copies = [
        make_chunk(PARAGRAPH.replace("Amazon S3", "S3"), source="aws/s3.md"),
        make_chunk(PARAGRAPH.replace("earlier", "older"), source="aws/s3.md"),
    ]
    fixture = _fixture(("versions", "aws", [old.id, "feedfacecafe"]))
    proposal = propose_repair(fixture, copies, {old.id: old})
    rows = {r.old_id: r for r in proposal.rows}
    assert rows[old.id].verdict == AMBIGUOUS and rows[old.id].proposed_id is None
    assert rows["feedfacecafe"].verdict == UNKNOWN
    assert proposal.remaps == {}
    assert "need a person" in proposal.summary()


def test_two_labels_merged_into_one_paragraph_are_a_conflict() -> None:
    first = make_chunk(PARAGRAPH, source="aws/s3.md")
    second = make_chunk(
        "MFA delete requires a second factor before a version can be removed for good.",
        source="aws/s3.md",
    )
    merged = make_chunk(PARAGRAPH + " " + second.content, source="aws/s3.md")
    fixture = _fixture(("versions", "aws", [first.id, second.id]))
    proposal = propose_repair(fixture, [merged], {first.id: first, second.id: second})
    assert {r.verdict for r in proposal.rows} == {CONFLICT}
    assert all("labelled twice" in r.reason for r in proposal.rows)


def test_a_file_moved_to_another_area_is_explained_without_history() -> None:
    moved = make_chunk(PARAGRAPH, area="storage", source="storage/s3.md")
    stay = make_chunk("Lifecycle rules move objects to colder storage classes.", source="aws/s3.md")
    fixture = _fixture(("versions", "aws", [moved.id]))
    (stale,) = find_stale(fixture, [moved, stay])
    assert stale.live_in == ("storage",)
    (row,) = propose_repair(fixture, [moved, stay], {}).rows
    assert row.verdict == MOVED and row.old_source == "storage/s3.md"
    assert "labels are live in area storage" in row.reason and "--follow-moves" in row.reason
