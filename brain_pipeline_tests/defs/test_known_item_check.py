"""A corpus nobody labelled publishes, and the known-item check then holds damage back."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from brain_pipeline.cli import main
from brain_pipeline_tests.defs.conftest import SAMPLE_CORPUS, Project, cli_sees, make_project

CHECK = dg.AssetCheckKey(dg.AssetKey("embeddings"), "retrieval_eval")
GONE = ("networking", "storage", "databases")


def _evaluation(project: Project) -> Any:
    record = project.instance.get_latest_asset_check_evaluation_record(CHECK)
    assert record is not None and record.event is not None and record.event.dagster_event
    return record.event.dagster_event.event_specific_data


def _latest_publication(project: Project) -> Any:
    event = project.instance.get_latest_materialization_event(dg.AssetKey("published_local"))
    assert event is not None and event.asset_materialization is not None
    return event.asset_materialization.metadata


@pytest.fixture
def unlabelled(tmp_path: Path) -> Project:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE_CORPUS, corpus)
    return make_project(tmp_path, corpus, {"queries": []})


def test_an_unlabelled_corpus_publishes_and_then_damage_is_held_back_until_accepted(
    unlabelled: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = unlabelled
    assert project.materialize().success
    published = project.published() / "knowledge-store.json"
    first = published.read_bytes()
    evaluation = _evaluation(project)
    assert evaluation.passed
    assert "no labelled queries" in evaluation.metadata["headline"].value
    assert "known-item baseline yet" in evaluation.metadata["known_items.baseline"].value

    # A second, unchanged build is asked the known items the publication recorded.
    assert project.materialize().success
    metadata = _evaluation(project).metadata
    found = metadata["known_items.aws-tutor.found_at_10"]
    assert isinstance(found, dg.FloatMetadataValue) and found.value == 1.0
    assert isinstance(metadata["known_items"], dg.TableMetadataValue)
    # The publication carries the same figures, so the asset's page plots them over
    # publications.
    publication = _latest_publication(project)
    assert publication["known_items.aws-tutor.found_at_10"] == found
    assert isinstance(publication["known_items.found_at_10"], dg.FloatMetadataValue)

    for folder in GONE:
        shutil.rmtree(project.corpus / "aws-tutor" / folder)
    assert not project.materialize().success
    evaluation = _evaluation(project)
    assert evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert "known items: area aws-tutor lost" in evaluation.description
    assert "text gone from aws-tutor/" in evaluation.description
    assert published.read_bytes() == first

    cli_sees(project, monkeypatch)
    assert main(["eval", "--accept", "--note", "moved the AWS notes out"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip().startswith("aws-tutor"))
    assert row.split()[-1] == "block"  # the table still shows what was accepted
    assert project.materialize().success
    assert published.read_bytes() != first
