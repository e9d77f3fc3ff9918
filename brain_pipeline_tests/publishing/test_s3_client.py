"""publishing.s3_client against moto's standalone server, with real boto3.

Pins one destination's object operations (a verified PUT, HEAD/GET that answer None
for an absent key, "already there" only for the same bytes and type), the timeouts and
the total deadline (clock injected), and the translation of every SDK failure into one
`PublishError` line naming the bucket, the endpoint and the cause, never a secret.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest

from brain_pipeline.config import S3Settings
from brain_pipeline.publishing.s3_client import (
    BINARY_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    Deadline,
    PublishError,
    S3Destination,
    S3Timeouts,
    already_there,
    content_key,
    make_s3_client,
    normalize_prefix,
)
from brain_pipeline.publishing.source import ArtifactSource
from brain_pipeline.utils.digest import sha256_hex
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server
from brain_pipeline_tests.publishing.conftest import (
    TEST_REGION,
    TEST_SECRET,
    SampleBuild,
)
from brain_pipeline_tests.publishing.netfaults import SilentServer

BUCKET = "brain-artifacts"
PREFIX = "agent/"


def destination(
    endpoint_url: str | None = None,
    *,
    bucket: str = BUCKET,
    timeouts: S3Timeouts | None = None,
    clock: Callable[[], float] | None = None,
    made: list[S3Timeouts] | None = None,
) -> S3Destination:
    """A destination as publishing builds one; `made` records every client the factory
    makes (with its timeouts)."""
    timeouts = timeouts or S3Timeouts()

    def factory(t: S3Timeouts) -> Any:
        if made is not None:
            made.append(t)
        return make_s3_client(TEST_REGION, endpoint_url, t)

    deadline = Deadline(timeouts.deadline, clock) if clock is not None else None
    return S3Destination(
        make_s3_client(TEST_REGION, endpoint_url, timeouts), bucket, PREFIX,
        timeouts=timeouts, factory=factory, deadline=deadline,
    )  # fmt: skip


def make_bucket() -> None:
    boto3.client("s3").create_bucket(Bucket=BUCKET)


def assert_no_secret(exc: BaseException, secret: str = TEST_SECRET) -> None:
    text = "".join(traceback.format_exception(exc))
    assert secret not in text and secret not in repr(exc.args)
    assert "\n" not in str(exc)


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- plain values --------------------------------------------------------------------------


def test_prefixes_become_folders_and_content_keys_are_named_by_digest() -> None:
    assert normalize_prefix(None) == normalize_prefix("") == ""
    assert normalize_prefix("brain") == normalize_prefix("/brain/") == "brain/"
    assert normalize_prefix("a/b") == "a/b/"
    assert content_key("kb/", "knowledge-store.json", "ab" * 32) == (
        f"kb/objects/{'ab' * 32}/knowledge-store.json"
    )


def test_timeouts_come_from_the_configuration() -> None:
    defaults = S3Timeouts.from_settings(S3Settings())
    assert defaults == S3Timeouts(connect=5.0, read=20.0, deadline=60.0)
    custom = S3Settings(connect_timeout_seconds=1, read_timeout_seconds=2.5, deadline_seconds=9)
    assert S3Timeouts.from_settings(custom) == S3Timeouts(1.0, 2.5, 9.0)


def test_the_deadline_counts_down_on_the_injected_clock_and_then_refuses(
    s3: MotoS3Server,
) -> None:
    clock = Clock()
    dest = destination(timeouts=S3Timeouts(connect=1, read=5, deadline=30), clock=clock)
    assert dest.deadline.remaining() == 30
    clock.now += 29.5
    assert dest.deadline.remaining() == 0.5
    dest.check_deadline("uploading x")  # still inside it
    clock.now += 0.5
    with pytest.raises(PublishError) as caught:
        dest.check_deadline("uploading x")
    assert str(caught.value) == (
        f"S3 publish to s3://{BUCKET}/{PREFIX} (endpoint {s3.endpoint_url}) failed while "
        "uploading x: gave up: the publication took longer than its 30 s deadline "
        "(publish.s3.deadline_seconds)"
    )
    with pytest.raises(PublishError, match="deadline"):
        dest.put_verified(PREFIX + "late", b"never sent", JSON_CONTENT_TYPE)


def test_near_the_deadline_requests_get_a_client_whose_read_timeout_fits_it(
    s3: MotoS3Server,
) -> None:
    clock, made = Clock(), list[S3Timeouts]()
    dest = destination(timeouts=S3Timeouts(connect=4, read=10, deadline=60), clock=clock, made=made)
    assert dest.client is dest.client and made == []  # plenty left: the one client
    clock.now += 50  # 10 s left for two attempts: 5 s each
    assert dest.client.meta.config.read_timeout == 5.0
    assert made == [S3Timeouts(connect=4, read=5.0, deadline=60)]
    clock.now += 9.5  # 0.5 s left: never below half a second per attempt
    assert dest.client.meta.config.connect_timeout == 0.5
    assert made[-1] == S3Timeouts(connect=0.5, read=0.5, deadline=60)


# -- object operations on the real peer ------------------------------------------------


def test_a_put_is_verified_by_the_checksum_the_server_echoes(
    s3: MotoS3Server, build: SampleBuild
) -> None:
    make_bucket()
    dest = destination()
    key = content_key(PREFIX, "knowledge-store.json", build.store.sha256)
    assert dest.put_verified(key, build.store, JSON_CONTENT_TYPE) == "ChecksumSHA256"
    assert dest.put_verified(PREFIX + "note", b"made in memory", BINARY_CONTENT_TYPE) == (
        "ChecksumSHA256"
    )
    stored = boto3.client("s3").get_object(Bucket=BUCKET, Key=key)
    assert stored["Body"].read() == build.store_bytes
    assert stored["ContentType"] == JSON_CONTENT_TYPE
    assert dest.read_small(PREFIX + "note") == b"made in memory"


def test_a_file_rewritten_after_it_was_named_fails_verification(
    s3: MotoS3Server, tmp_path: Path
) -> None:
    make_bucket()
    path = tmp_path / "knowledge-store.json"
    path.write_bytes(b"[1, 2, 3]")
    source = ArtifactSource.of_file(path)
    path.write_bytes(b"[4, 5, 6]")  # same size, other bytes
    with pytest.raises(PublishError) as caught:
        destination().put_verified(PREFIX + "store", source, JSON_CONTENT_TYPE)
    message = str(caught.value)
    assert "verifying agent/store" in message and "checksum differs" in message
    assert source.b64_sha256 in message
    path.write_bytes(b"[4, 5, 6, 7]")  # another size: refused before sending
    with pytest.raises(PublishError, match=f"cannot read {path}"):
        destination().put_verified(PREFIX + "other", source, JSON_CONTENT_TYPE)
    assert destination().probe(PREFIX + "other") is None


def test_probe_and_read_small_answer_none_for_an_absent_key(s3: MotoS3Server) -> None:
    make_bucket()
    dest = destination()
    assert dest.probe(PREFIX + "absent") is None
    assert dest.read_small(PREFIX + "absent") is None
    dest.put_verified(PREFIX + "present", b"12345", JSON_CONTENT_TYPE)
    head = dest.probe(PREFIX + "present")
    assert head is not None and head["ContentLength"] == 5


def test_already_there_only_for_the_same_bytes_and_content_type(s3: MotoS3Server) -> None:
    make_bucket()
    dest = destination()
    dest.put_verified(PREFIX + "x", b"x" * 64, JSON_CONTENT_TYPE)
    head = dest.probe(PREFIX + "x")
    assert already_there(head, b"x" * 64, JSON_CONTENT_TYPE) == "ChecksumSHA256"
    assert already_there(head, b"y" * 64, JSON_CONTENT_TYPE) is None  # same size
    assert already_there(head, b"x" * 65, JSON_CONTENT_TYPE) is None
    assert already_there(head, b"x" * 64, BINARY_CONTENT_TYPE) is None
    assert already_there(None, b"x" * 64, JSON_CONTENT_TYPE) is None
    # a server that echoes no checksum is checked by its ETag (MD5, single part)
    etag_only = {k: v for k, v in (head or {}).items() if k != "ChecksumSHA256"}
    assert already_there(etag_only, b"x" * 64, JSON_CONTENT_TYPE) == "ETag"
    assert already_there(etag_only, b"y" * 64, JSON_CONTENT_TYPE) is None
    assert sha256_hex(b"x" * 64) != sha256_hex(b"y" * 64)


# -- failures: one line, the destination and the cause, no secret ----------------------


def test_missing_bucket_fails_clearly(s3: MotoS3Server) -> None:
    with pytest.raises(PublishError) as caught:
        destination(bucket="no-such-bucket").put_verified(PREFIX + "x", b"x", JSON_CONTENT_TYPE)
    message = str(caught.value)
    assert "NoSuchBucket (HTTP 404): the bucket does not exist" in message
    assert "s3://no-such-bucket/agent/" in message and s3.endpoint_url in message
    assert_no_secret(caught.value)


def test_unknown_access_key_fails_clearly(s3: MotoS3Server) -> None:
    make_bucket()
    s3.enable_auth(0)
    with pytest.raises(PublishError) as caught:
        destination().put_verified(PREFIX + "x", b"x", JSON_CONTENT_TYPE)
    assert "InvalidAccessKeyId" in str(caught.value) and BUCKET in str(caught.value)
    assert_no_secret(caught.value)


def _user_with_policy(name: str, actions: list[str]) -> tuple[str, str]:
    """An IAM user of the moto server allowed `actions`: (access key id, secret)."""
    iam = boto3.client("iam", endpoint_url=make_s3_client().meta.endpoint_url)
    iam.create_user(UserName=name)
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}],
    }
    iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return str(key["AccessKeyId"]), str(key["SecretAccessKey"])


def test_wrong_secret_fails_with_signature_mismatch(
    s3: MotoS3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_bucket()
    s3.enable_auth(3)  # the three IAM calls below are free
    key_id, _ = _user_with_policy("writer", ["s3:*"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
    with pytest.raises(PublishError) as caught:
        destination().put_verified(PREFIX + "x", b"x", JSON_CONTENT_TYPE)
    assert "SignatureDoesNotMatch" in str(caught.value)
    assert_no_secret(caught.value)


def test_access_denied_for_a_user_without_put(
    s3: MotoS3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_bucket()
    s3.enable_auth(6)
    writer = _user_with_policy("writer", ["s3:*"])
    reader = _user_with_policy("reader", ["s3:GetObject", "s3:ListBucket"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", writer[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", writer[1])
    # auth is on, and a permitted user succeeds
    assert destination().put_verified(PREFIX + "x", b"x", JSON_CONTENT_TYPE) == "ChecksumSHA256"

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", reader[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", reader[1])
    with pytest.raises(PublishError) as caught:
        destination().put_verified(PREFIX + "y", b"y", JSON_CONTENT_TYPE)
    message = str(caught.value)
    assert "AccessDenied (HTTP 403): access denied" in message and BUCKET in message
    assert_no_secret(caught.value, reader[1])


def test_server_down_fails_fast_and_clearly(s3: MotoS3Server, free_port: int) -> None:
    dead = f"http://127.0.0.1:{free_port}"
    with pytest.raises(PublishError) as caught:
        destination(dead).put_verified(PREFIX + "x", b"x", JSON_CONTENT_TYPE)
    message = str(caught.value)
    assert dead in message and "cannot connect to the endpoint" in message and BUCKET in message
    assert_no_secret(caught.value)


def test_missing_credentials_fail_clearly(
    s3: MotoS3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in (
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(PublishError) as caught:
        destination().put_verified(PREFIX + "x", b"x", JSON_CONTENT_TYPE)
    assert "no usable AWS credentials (NoCredentialsError)" in str(caught.value)
    assert BUCKET in str(caught.value)


def test_a_silent_endpoint_fails_on_the_read_timeout_in_one_line(s3: MotoS3Server) -> None:
    with SilentServer() as silent, pytest.raises(PublishError) as caught:
        destination(silent.url, timeouts=S3Timeouts(connect=1, read=1, deadline=30)).probe(
            PREFIX + "x"
        )
    message = str(caught.value)
    assert "\n" not in message
    assert silent.url in message and BUCKET in message
    # The read timeout fired (named in the message), not the SDK's 60 s default and its
    # retries: the cost is bounded by attempts, which a clock-free test can count.
    assert "did not answer within 1 s (read timeout, 2 attempts)" in message
    assert 1 <= silent.accepted <= 5

