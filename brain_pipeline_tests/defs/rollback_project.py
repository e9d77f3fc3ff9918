"""A real pipeline publishing to src, dist and a moto bucket: the ground the rollback
tests (steps, CLI, Dagster job) stand on, and how they read what is live."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from brain_pipeline.cli import main
from brain_pipeline_tests.defs.conftest import Project, edit_corpus, make_tiny_project

BUCKET = "brain-rollback"


def make_rollback_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    """A tiny project publishing to src, dist and `BUCKET` under `kb/` (needs the `s3`
    fixture active), selected by BRAIN_CONFIG so `main()` finds it."""
    proj = make_tiny_project(tmp_path)
    (proj.publish_root / "dist").mkdir(parents=True)
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    proj.settings["publish"]["s3"] = {"bucket": BUCKET, "prefix": "kb"}
    proj.write_config()
    monkeypatch.setenv("BRAIN_CONFIG", str(proj.config_path))
    return proj


def publish_twice(project: Project) -> tuple[bytes, bytes]:
    """Publications #1 and, after an edit of the corpus, #2: each one's store bytes."""
    assert project.materialize().success
    first = project.store_file.read_bytes()
    edit_corpus(project)
    assert project.materialize().success
    return first, project.store_file.read_bytes()


def bucket_object(key: str) -> bytes:
    return bytes(boto3.client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read())


def publications(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """`brain-pipeline publications --json`, parsed."""
    capsys.readouterr()
    assert main(["publications", "--json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def live_everywhere(project: Project) -> list[bytes]:
    """The live store in src, dist, the bucket's plain key and the key its manifest names."""
    manifest = json.loads(bucket_object("kb/manifest.json"))
    return [
        (project.published("src") / "knowledge-store.json").read_bytes(),
        (project.published("dist") / "knowledge-store.json").read_bytes(),
        bucket_object("kb/knowledge-store.json"),
        bucket_object(manifest["objects"]["knowledge-store.json"]["key"]),
    ]
