"""publishing.s3's clean-up against moto's standalone server, with real boto3.

Pins which keys a manifest names (none for an unreadable, old or malformed one), that
the clean-up deletes exactly our own unkept content-addressed objects (our layout, our
mark) and nothing else under the prefix (another team's `objects/...`, an unmarked
object shaped like ours), that it refuses an empty prefix, and that a listing denied by
policy is skipped (old objects stay, no error). (Removing a stale fixed embeddings.bin
is `publishing.s3.write_fixed_names`'s, pinned in test_s3_fixed.py and test_s3.py.)
"""

from __future__ import annotations

import json

import boto3
import pytest

from brain_pipeline.publishing.s3 import (
    collect_garbage,
    named_keys,
    sweep_refusal,
)
from brain_pipeline.publishing.s3_client import (
    JSON_CONTENT_TYPE,
    S3Destination,
    S3ObjectOutcome,
    make_s3_client,
)
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server
from brain_pipeline_tests.publishing.conftest import TEST_REGION

BUCKET = "brain-artifacts"
PREFIX = "kb/"


def destination() -> S3Destination:
    return S3Destination(make_s3_client(TEST_REGION), BUCKET, PREFIX)


def stored() -> set[str]:
    listed = boto3.client("s3").list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return {str(o["Key"]) for o in listed}


def fill(keys: list[str]) -> None:
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    for key in keys:
        client.put_object(Bucket=BUCKET, Key=key, Body=key.encode())


def test_named_keys_reads_the_objects_a_manifest_names() -> None:
    manifest = {
        "objects": {
            "knowledge-store.json": {
                "key": "kb/objects/aa/knowledge-store.json",
                "sha256": "a" * 64,
                "size": 1,
            },
            "embeddings.bin": {
                "key": "kb/objects/bb/embeddings.bin",
                "sha256": "b" * 64,
                "size": 2,
            },
        }
    }
    assert named_keys(json.dumps(manifest).encode()) == {
        "kb/objects/aa/knowledge-store.json",
        "kb/objects/bb/embeddings.bin",
    }


@pytest.mark.parametrize(
    "raw",
    [
        None,
        b"",
        b"not json",
        b"[]",
        b'{"store": {}}',
        b'{"objects": {"a": {"size": 1}}}',
        b'{"objects": {"knowledge-store.json": "oops"}}',
    ],
    ids=["absent", "empty", "not-json", "a-list", "older-format", "entry-without-key", "a-string"],
)
def test_named_keys_is_empty_for_a_manifest_it_cannot_read(raw: bytes | None) -> None:
    assert named_keys(raw) == set()


def ca(digit: str, filename: str = "knowledge-store.json", prefix: str = PREFIX) -> str:
    return f"{prefix}objects/{digit * 64}/{filename}"


def test_collect_garbage_deletes_only_our_own_unkept_content_objects(s3: MotoS3Server) -> None:
    keep = {ca("a")}
    untouchable = [
        "kb/manifest.json",
        "kb/knowledge-store.json",
        "kb/objects/other-team/invoice-2024.pdf",  # someone else's, under our objects/
        ca("e", "invoice.pdf"),  # our digest shape, not our file name
        ca("c", prefix="other/"),  # another prefix's objects
        "kb/objectsish/dd/x",  # not under objects/
    ]
    unmarked = ca("d")  # shaped exactly like ours, but not written by us
    stale = [ca("b"), ca("b", "embeddings.bin")]
    fill([*untouchable, unmarked])
    dest = destination()
    for key in [*keep, *stale]:
        dest.put_verified(key, key.encode(), JSON_CONTENT_TYPE, mark=True)

    removed = collect_garbage(destination(), keep)

    assert sorted(removed, key=lambda o: o.key) == [
        S3ObjectOutcome(ca("b", "embeddings.bin"), "removed", None, None, ""),
        S3ObjectOutcome(ca("b"), "removed", None, None, ""),
    ]
    assert stored() == keep | set(untouchable) | {unmarked}
    assert collect_garbage(destination(), keep) == []  # nothing left to collect


def test_an_empty_prefix_is_never_swept(s3: MotoS3Server) -> None:
    assert sweep_refusal("kb/") is None
    refusal = sweep_refusal("")
    assert refusal is not None and "publish.s3.prefix is empty" in refusal
    assert "\n" not in refusal
    fill([])
    bucket_wide = S3Destination(make_s3_client(TEST_REGION), BUCKET, "")
    bucket_wide.put_verified(ca("b", prefix=""), b"x", JSON_CONTENT_TYPE, mark=True)
    with pytest.raises(ValueError, match="empty prefix"):
        collect_garbage(bucket_wide, set())
    assert stored() == {ca("b", prefix="")}


def test_a_listing_denied_by_policy_leaves_the_old_objects_and_is_no_error(
    s3: MotoS3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill([])
    destination().put_verified(ca("f"), b"old", JSON_CONTENT_TYPE, mark=True)
    s3.enable_auth(3)  # the three IAM calls below are free
    iam = boto3.client("iam", endpoint_url=s3.endpoint_url, region_name=TEST_REGION)
    iam.create_user(UserName="no-list")
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["s3:GetObject", "s3:DeleteObject"], "Resource": "*"}
        ],
    }
    iam.put_user_policy(UserName="no-list", PolicyName="p", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName="no-list")["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])

    assert collect_garbage(destination(), keep=set()) == []

    s3.disable_auth()
    assert stored() == {ca("f")}
