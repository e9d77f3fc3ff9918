"""The reported S3 fault end to end: `published_s3` under a bucket policy that denies
writing the fixed `knowledge-store.json`, on the real moto server.

What the user sees: the step fails with one line naming the object and saying the
previous set is whole; a reader of the bucket's fixed names gets the previous store and
manifest; `status --s3` says the bucket differs (exit 5), never "the same set".
"""

from __future__ import annotations

import hashlib
import json

import boto3
import pytest

from brain_pipeline.cli import main
from brain_pipeline_tests.defs.conftest import Project, cli_sees, edit_corpus
from brain_pipeline_tests.peers.moto_s3 import deny_writes

BUCKET = "agent-store"
FIXED_STORE = "knowledge-store/knowledge-store.json"


def deny_writes_to(*keys: str) -> None:
    deny_writes(BUCKET, *keys)


def fixed(key: str) -> bytes:
    return bytes(boto3.client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read())


def test_a_denied_fixed_store_fails_the_step_and_leaves_the_previous_set(
    tiny_project: Project,
    s3: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    tiny_project.write_config(**{"publish.s3": {"bucket": BUCKET, "prefix": "knowledge-store"}})
    first = tiny_project.materialize()
    assert first.success, first.lines
    old_store = fixed(FIXED_STORE)

    edit_corpus(tiny_project)
    deny_writes_to(FIXED_STORE)
    second = tiny_project.materialize()

    assert not second.success
    (failed,) = [line for line in second.lines if "FAILED   published_s3" in line]
    assert f"to {FIXED_STORE}:" in failed
    assert "see the previous publication, whole" in failed
    # the local publication moved on; the bucket's fixed names did not, and agree
    local_store = (tiny_project.published() / "knowledge-store.json").read_bytes()
    assert local_store != old_store and fixed(FIXED_STORE) == old_store
    manifest = json.loads(fixed("knowledge-store/manifest.json"))
    assert manifest["store"]["sha256"] == hashlib.sha256(old_store).hexdigest()

    cli_sees(tiny_project, monkeypatch)
    code = main(["status", "--s3"])
    out = capsys.readouterr().out
    assert code == 5 and "the same set" not in out
    assert "S3: DIFFERS: the bucket's store differs from the local publication's" in out
