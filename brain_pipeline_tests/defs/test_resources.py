"""One source per setting: a run reads the configuration once, at its start, and its
steps, checks and resources (the S3 upload included) all use that one snapshot; the
resources' fields show what the location loaded, and a run that disagrees refuses."""

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


def _run(
    project: Project, definitions: dg.Definitions, *, succeeds: bool = True
) -> MaterializeOutcome:
    outcome = materialize_selection(
        "*", definitions=definitions, instance=project.instance, build_dir=project.build
    )
    assert outcome.success is succeeds, outcome.lines
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


def test_an_edit_the_loaded_location_has_not_seen_refuses_the_upload_until_reloaded(
    tiny_project: Project, s3: object
) -> None:
    client = boto3.client("s3")
    for bucket in ("first-bucket", "second-bucket"):
        client.create_bucket(Bucket=bucket)
    tiny_project.write_config(**{"publish.s3": {"bucket": "first-bucket", "prefix": "one/"}})
    definitions = build_definitions(str(tiny_project.config_path))  # loaded once
    publisher = (definitions.resources or {})["s3_publisher"]
    assert (publisher.bucket, publisher.prefix) == ("first-bucket", "one/")  # type: ignore[attr-defined]

    first = _run(tiny_project, definitions)
    said_first = _s3_metadata(tiny_project, first)
    assert (said_first["bucket"], said_first["prefix"]) == ("first-bucket", "one/")
    assert "one/manifest.json" in _keys("first-bucket")

    tiny_project.write_config(**{"publish.s3": {"bucket": "second-bucket", "prefix": "two/"}})
    refused = _run(tiny_project, definitions, succeeds=False)  # the same loaded location
    (line,) = [line for line in refused.lines if "FAILED   published_s3" in line]
    assert "s3_publisher.bucket: 'first-bucket' -> 'second-bucket'" in line
    assert "reload the code location" in line
    assert not _keys("second-bucket")
    assert not any(key.startswith("two/") for key in _keys("first-bucket"))

    reloaded = _run(tiny_project, build_definitions(str(tiny_project.config_path)))
    said_second = _s3_metadata(tiny_project, reloaded)
    assert (said_second["bucket"], said_second["prefix"]) == ("second-bucket", "two/")
    assert "two/manifest.json" in _keys("second-bucket")


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
