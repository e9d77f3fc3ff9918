"""Server-side encryption and ExpectedBucketOwner, on moto's real S3 server.

moto stores the encryption asked of each PutObject/CopyObject and reports it on HEAD, so
those tests read it back. moto does not enforce ExpectedBucketOwner (checked: a
mismatched owner is accepted), so that test watches what the real boto3 client sends,
through botocore's own `before-send` event on the client publishing uses, request by
request: nothing of boto3 is replaced.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from pydantic import ValidationError

from brain_pipeline.config import S3Settings
from brain_pipeline.publishing.manifest import build_manifest
from brain_pipeline.publishing.s3 import PublishError, S3PublishReport, inspect_s3
from brain_pipeline.publishing.s3_client import S3Protection, make_s3_client
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server
from brain_pipeline_tests.publishing.conftest import (
    TEST_REGION,
    SampleBuild,
    make_build,
    publish_build,
)

BUCKET = "brain-artifacts"
PREFIX = "kb/"
OWNER = "123456789012"


def publish(build: SampleBuild, **overrides: Any) -> S3PublishReport:
    return publish_build(build, bucket=BUCKET, prefix=PREFIX, **overrides)


def encryption_of_every_object() -> dict[str, tuple[str | None, str | None]]:
    client = boto3.client("s3")
    listed = client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    result = {}
    for obj in listed:
        head = client.head_object(Bucket=BUCKET, Key=obj["Key"])
        result[str(obj["Key"])] = (head.get("ServerSideEncryption"), head.get("SSEKMSKeyId"))
    return result


@pytest.fixture
def bucket(s3: MotoS3Server) -> MotoS3Server:
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    return s3


def test_sse_s3_is_asked_for_every_object_written(bucket: MotoS3Server, build: SampleBuild) -> None:
    publish(build, protection=S3Protection(server_side_encryption="AES256"))
    stored = encryption_of_every_object()
    assert len(stored) == 5  # two content-addressed objects, two fixed names, the manifest
    assert set(stored.values()) == {("AES256", None)}


def test_sse_kms_with_a_key_id(bucket: MotoS3Server, build: SampleBuild) -> None:
    key = "arn:aws:kms:us-east-1:123456789012:key/brain-test"
    publish(build, protection=S3Protection(server_side_encryption="aws:kms", kms_key_id=key))
    assert set(encryption_of_every_object().values()) == {("aws:kms", key)}


def test_turning_encryption_on_rewrites_what_was_stored_without_it(
    bucket: MotoS3Server, build: SampleBuild
) -> None:
    publish(build)
    assert {sse for sse, _ in encryption_of_every_object().values()} == {None}
    report = publish(build, protection=S3Protection(server_side_encryption="AES256"))
    assert report.status == "published"
    assert set(encryption_of_every_object().values()) == {("AES256", None)}
    again = publish(build, protection=S3Protection(server_side_encryption="AES256"))
    assert again.status == "unchanged"


class SentHeaders:
    """Every request a client sends: (operation, headers), via botocore's before-send."""

    def __init__(self, client: Any) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        client.meta.events.register("before-send.s3", self._record)

    def _record(self, request: Any, event_name: str, **_: Any) -> None:
        headers = {
            str(name).lower(): value.decode() if isinstance(value, bytes) else str(value)
            for name, value in request.headers.items()
        }
        self.requests.append((event_name.rsplit(".", 1)[-1], headers))

    def operations(self) -> set[str]:
        return {operation for operation, _ in self.requests}

    def without(self, header: str) -> list[str]:
        return [op for op, headers in self.requests if headers.get(header) != OWNER]


def test_expected_bucket_owner_goes_with_every_request(
    bucket: MotoS3Server, build: SampleBuild
) -> None:
    owner = S3Protection(expected_bucket_owner=OWNER)
    publish(build, include_embeddings=False)  # generation 1, then 2 and 3 below
    publish(make_build(salt="two "), include_embeddings=False)
    client = make_s3_client(TEST_REGION)
    sent = SentHeaders(client)

    publish(make_build(salt="three "), client=client, protection=owner)  # sweeps gen 1
    check = inspect_s3(
        build_manifest(make_build(salt="three ").store, None),
        bucket=BUCKET, prefix=PREFIX, region=TEST_REGION, client=client, protection=owner,
    )  # fmt: skip

    assert check.matches
    assert {"HeadObject", "GetObject", "PutObject", "CopyObject", "ListObjectsV2"} <= (
        sent.operations()
    )
    assert "DeleteObject" in sent.operations()
    assert sent.without("x-amz-expected-bucket-owner") == []
    copies = [headers for op, headers in sent.requests if op == "CopyObject"]
    assert copies and all(h.get("x-amz-source-expected-bucket-owner") == OWNER for h in copies)


def test_without_an_owner_none_is_sent(bucket: MotoS3Server, build: SampleBuild) -> None:
    """The header above comes from the setting, not from the client or the server."""
    client = make_s3_client(TEST_REGION)
    sent = SentHeaders(client)
    publish(build, client=client)
    assert sent.requests and len(sent.without("x-amz-expected-bucket-owner")) == len(sent.requests)


def test_the_settings_are_checked_when_the_configuration_loads() -> None:
    settings = S3Settings(
        server_side_encryption="aws:kms", kms_key_id="alias/brain", expected_bucket_owner=OWNER
    )
    assert S3Protection.from_settings(settings) == S3Protection("aws:kms", "alias/brain", OWNER)
    assert S3Protection.from_settings(S3Settings()) == S3Protection()
    with pytest.raises(ValidationError, match="kms_key_id needs server_side_encryption"):
        S3Settings(server_side_encryption="AES256", kms_key_id="alias/brain")
    with pytest.raises(ValidationError):
        S3Settings(expected_bucket_owner="not-an-account")
    with pytest.raises(ValidationError):
        S3Settings(server_side_encryption="aws:kms:dsse")


def test_access_denied_with_an_owner_set_names_the_owner_as_a_possible_cause(
    bucket: MotoS3Server, build: SampleBuild, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AWS answers a wrong owner with a plain AccessDenied: the line says it may be that."""
    bucket.enable_auth(3)  # the three IAM calls below are free
    iam = boto3.client("iam", endpoint_url=bucket.endpoint_url, region_name=TEST_REGION)
    iam.create_user(UserName="reader")
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "*"}],
    }
    iam.put_user_policy(UserName="reader", PolicyName="p", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    with pytest.raises(PublishError) as caught:
        publish(build, protection=S3Protection(expected_bucket_owner=OWNER))
    message = str(caught.value)
    assert "AccessDenied" in message and "\n" not in message
    assert f"or the bucket is not owned by publish.s3.expected_bucket_owner {OWNER}" in message
