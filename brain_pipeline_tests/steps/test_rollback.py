"""What the publishing run keeps for `steps.rollback`: the last keep_generations blobs.

The rollback itself is exercised through its two front doors, cli/test_rollback.py and
defs/test_rollback.py, and under kill -9 in steps/test_rollback_crash.py.
"""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from brain_pipeline_tests.defs.conftest import Project, edit_corpus
from brain_pipeline_tests.defs.rollback_project import (
    BUCKET,
    make_rollback_project,
    publications,
)
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server


@pytest.fixture
def project(tmp_path: Path, s3: MotoS3Server, monkeypatch: pytest.MonkeyPatch) -> Project:
    return make_rollback_project(tmp_path, monkeypatch)


def test_only_the_configured_generations_are_kept(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.settings["publish"]["keep_generations"] = 2
    project.write_config()
    shas = []
    for i in range(3):
        edit_corpus(project, f"Paragraph number {i} about subnets and their route tables.")
        assert project.materialize().success
        shas.append(publications(capsys)["publications"][0]["store_sha256"])
    blobs = project.build / "state" / "blobs" / "sha256"
    assert not (blobs / shas[0][:2] / shas[0]).exists()
    assert all((blobs / sha[:2] / sha).is_file() for sha in shas[1:])
    keys = {
        o["Key"]
        for o in boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="kb/objects/")["Contents"]
    }
    assert not any(shas[0] in k for k in keys)
    assert any(shas[1] in k for k in keys) and any(shas[2] in k for k in keys)
