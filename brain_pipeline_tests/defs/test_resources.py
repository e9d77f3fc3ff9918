"""One source per setting: a run reads the configuration once, at its start, and its
steps, checks and resources (the S3 upload included) all use that one snapshot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import dagster as dg
import pytest

from brain_pipeline.config import BrainConfig
from brain_pipeline.definitions import build_definitions
from brain_pipeline.defs import resources
from brain_pipeline.lib.runner import MaterializeOutcome, materialize_selection
from brain_pipeline_tests.defs.conftest import Project


def _run(project: Project, definitions: dg.Definitions) -> MaterializeOutcome:
    outcome = materialize_selection(
        "*", definitions=definitions, instance=project.instance, build_dir=project.build
    )
    assert outcome.success, outcome.lines
    return outcome


def _s3_metadata(project: Project, run: MaterializeOutcome) -> dict[str, Any]:
    """What the run's published_s3 materialisation says, as plain values."""
    event = project.instance.get_latest_materialization_event(dg.AssetKey("published_s3"))
    assert event is not None and event.run_id == run.run_id
    materialization = event.asset_materialization
    assert materialization is not None
    return {key: value.value for key, value in materialization.metadata.items()}


def _keys(bucket: str) -> set[str]:
    listed = boto3.client("s3").list_objects_v2(Bucket=bucket)
    return {item["Key"] for item in listed.get("Contents", [])}


def test_an_edit_between_two_runs_of_one_loaded_location_moves_upload_and_metadata(
    tiny_project: Project, s3: object
) -> None:
    client = boto3.client("s3")
    for bucket in ("first-bucket", "second-bucket"):
        client.create_bucket(Bucket=bucket)
    tiny_project.write_config(**{"publish.s3": {"bucket": "first-bucket", "prefix": "one/"}})
    definitions = build_definitions(str(tiny_project.config_path))  # loaded once

    first = _run(tiny_project, definitions)
    said_first = _s3_metadata(tiny_project, first)
    tiny_project.write_config(**{"publish.s3": {"bucket": "second-bucket", "prefix": "two/"}})
    second = _run(tiny_project, definitions)
    said_second = _s3_metadata(tiny_project, second)

    assert (said_first["bucket"], said_first["prefix"]) == ("first-bucket", "one/")
    assert (said_second["bucket"], said_second["prefix"]) == ("second-bucket", "two/")
    first_keys, second_keys = _keys("first-bucket"), _keys("second-bucket")
    assert "one/manifest.json" in first_keys and "two/manifest.json" in second_keys
    # Each run wrote only where its own metadata says.
    assert not any(key.startswith("two/") for key in first_keys)
    assert not any(key.startswith("one/") for key in second_keys)


def test_a_run_reads_the_configuration_once(
    tiny_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every step, check and resource of a run shares the snapshot read when it started."""
    definitions = build_definitions(str(tiny_project.config_path))
    reads: list[str | None] = []
    real = resources.load_config

    def counting(path: str | Path | None = None, *args: Any, **kwargs: Any) -> BrainConfig:
        reads.append(None if path is None else str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(resources, "load_config", counting)
    _run(tiny_project, definitions)
    assert reads == [str(tiny_project.config_path)]
