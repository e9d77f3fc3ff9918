"""publishing.s3.inspect_s3 (`status --s3`) against moto's standalone server, real boto3.

Pins when the bucket "matches" the local publication (its manifest names the same
store, and with `include_embeddings` the same vectors, and every object it names is
there with its size), each problem it names otherwise, that an unreachable bucket is
reported as such rather than raised, and that inspecting only reads.
"""

from __future__ import annotations

import json

import boto3
import pytest

from brain_pipeline.publishing.manifest import PublishManifest, build_manifest
from brain_pipeline.publishing.s3 import S3Check, inspect_s3, publish_s3
from brain_pipeline.publishing.s3_client import S3Timeouts
from brain_pipeline.utils.digest import sha256_hex
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server
from brain_pipeline_tests.publishing.conftest import (
    AGENT_MODEL,
    TEST_REGION,
    SampleBuild,
    make_build,
)

BUCKET = "brain-artifacts"
PREFIX = "kb"


def published(build: SampleBuild) -> PublishManifest:
    """Publish `build` (store and vectors) to the bucket; the manifest it uploaded."""
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    report = publish_s3(
        build.store, build.embeddings, bucket=BUCKET, prefix=PREFIX, region=TEST_REGION,
        include_embeddings=True, manifest=build_manifest(build.store, build.embeddings),
    )  # fmt: skip
    assert report.manifest is not None
    return report.manifest


def inspect(
    expected: PublishManifest,
    *,
    include_embeddings: bool = False,
    endpoint_url: str | None = None,
    timeouts: S3Timeouts | None = None,
) -> S3Check:
    return inspect_s3(
        expected, bucket=BUCKET, prefix=PREFIX, region=TEST_REGION,
        include_embeddings=include_embeddings, endpoint_url=endpoint_url, timeouts=timeouts,
    )  # fmt: skip


def remote_manifest() -> dict[str, object]:
    body = boto3.client("s3").get_object(Bucket=BUCKET, Key="kb/manifest.json")["Body"]
    return dict(json.loads(body.read()))


def put_manifest(raw: bytes) -> None:
    boto3.client("s3").put_object(Bucket=BUCKET, Key="kb/manifest.json", Body=raw)


def test_the_set_just_published_matches_and_inspecting_only_reads(
    s3: MotoS3Server, build: SampleBuild
) -> None:
    expected = published(build)
    s3.requests_settled()
    s3.clear_requests()
    check = inspect(expected, include_embeddings=True)
    assert check == S3Check(f"s3://{BUCKET}/kb/ (endpoint {s3.endpoint_url})", True, ())
    assert check.matches
    methods = {r.method for r in s3.requests_settled() if "/moto-api/" not in r.path}
    assert methods <= {"GET", "HEAD"} and "GET" in methods


def test_an_empty_bucket_is_reachable_but_holds_no_manifest(s3: MotoS3Server) -> None:
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    check = inspect(build_manifest(make_build().store, None))
    assert check.reachable and not check.matches
    assert check.problems == ("no manifest.json in the bucket",)


def test_another_store_in_the_bucket_is_named(s3: MotoS3Server, build: SampleBuild) -> None:
    published(build)
    local = make_build(salt="local ")
    check = inspect(build_manifest(local.store, local.embeddings))
    assert check.problems == ("the bucket's store differs from the local publication's",)


def test_embeddings_are_compared_only_when_included(s3: MotoS3Server, build: SampleBuild) -> None:
    published(build)
    other_vectors = make_build(model=AGENT_MODEL, salt="vectors ").embeddings
    local = build_manifest(build.store, other_vectors)
    assert inspect(local).matches
    check = inspect(local, include_embeddings=True)
    assert check.problems == ("the bucket's embeddings differ from the local publication's",)


def test_an_object_the_manifest_names_but_the_bucket_lacks_is_named(
    s3: MotoS3Server, build: SampleBuild
) -> None:
    expected = published(build)
    store_key = remote_manifest()["objects"]["knowledge-store.json"]["key"]  # type: ignore[index]
    boto3.client("s3").delete_object(Bucket=BUCKET, Key=store_key)
    check = inspect(expected, include_embeddings=True)
    assert check.reachable and not check.matches
    assert check.problems == (
        f"knowledge-store.json ({store_key}) named by the manifest is missing",
    )


def test_an_unreadable_or_old_manifest_is_named(s3: MotoS3Server, build: SampleBuild) -> None:
    expected = published(build)
    put_manifest(b"{not json")
    (problem,) = inspect(expected).problems
    assert problem.startswith("the bucket's manifest.json is unreadable: ")
    old = {k: v for k, v in json.loads(expected.to_json()).items() if k != "objects"}
    put_manifest(json.dumps(old).encode())
    assert inspect(expected).problems == (
        "the bucket's manifest.json names no objects (older format)",
    )


def test_an_unreachable_bucket_is_reported_not_raised(
    s3: MotoS3Server, build: SampleBuild, free_port: int
) -> None:
    dead = f"http://127.0.0.1:{free_port}"
    check = inspect(
        build_manifest(build.store, None),
        endpoint_url=dead,
        timeouts=S3Timeouts(connect=1, read=1, deadline=5),
    )
    assert not check.reachable and not check.matches
    (problem,) = check.problems
    assert dead in problem and "cannot connect to the endpoint" in problem
    assert check.location == f"s3://{BUCKET}/kb/ (endpoint {dead})"


def _same_size_other_bytes(data: bytes) -> bytes:
    """`data` with its last byte changed: what a size comparison cannot see."""
    return data[:-1] + bytes([data[-1] ^ 0x01])


def test_same_size_tampering_of_a_named_object_is_found_by_checksum(
    s3: MotoS3Server, build: SampleBuild
) -> None:
    """Both the checksum S3 stores and (for an object stored without one) the body."""
    expected = published(build)
    store_key = str(remote_manifest()["objects"]["knowledge-store.json"]["key"])  # type: ignore[index]
    forged = _same_size_other_bytes(build.store_bytes)
    client = boto3.client("s3")
    for how in ({"ChecksumAlgorithm": "SHA256"}, {"ChecksumAlgorithm": "CRC32"}):
        client.put_object(Bucket=BUCKET, Key=store_key, Body=forged, **how)
        (problem,) = inspect(expected, include_embeddings=True).problems
        assert problem.startswith(f"knowledge-store.json ({store_key}) named by the manifest holds")
        assert sha256_hex(forged) in problem


def test_the_fixed_names_are_checked_and_a_torn_pair_is_named(
    s3: MotoS3Server, build: SampleBuild
) -> None:
    """The reported fault: fixed embeddings.bin from another publication, manifest and
    content-addressed objects intact. `status --s3` must not say "the same set"."""
    expected = published(build)
    other = make_build({"aws-tutor": 9}, salt="other ")
    client = boto3.client("s3")
    client.put_object(Bucket=BUCKET, Key="kb/embeddings.bin", Body=other.embeddings_bytes)
    (problem,) = inspect(expected, include_embeddings=True).problems
    assert problem.startswith("the fixed name kb/embeddings.bin holds other bytes")
    forged = _same_size_other_bytes(build.store_bytes)
    client.put_object(Bucket=BUCKET, Key="kb/knowledge-store.json", Body=forged)
    client.delete_object(Bucket=BUCKET, Key="kb/embeddings.bin")
    assert inspect(expected, include_embeddings=True).problems == (
        "the fixed name kb/embeddings.bin is missing",
        f"the fixed name kb/knowledge-store.json holds other bytes than the manifest's "
        f"knowledge-store.json (sha256 {sha256_hex(forged)}, manifest says "
        f"{sha256_hex(build.store_bytes)}): readers of the fixed names get another set",
    )


def test_vectors_at_the_fixed_name_of_a_set_without_vectors_are_named(
    s3: MotoS3Server, build: SampleBuild
) -> None:
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    expected = build_manifest(build.store, None)
    publish_s3(build.store, None, bucket=BUCKET, prefix=PREFIX, manifest=expected)
    assert inspect(expected).matches
    boto3.client("s3").put_object(Bucket=BUCKET, Key="kb/embeddings.bin", Body=b"stale")
    (problem,) = inspect(expected).problems
    assert problem.startswith("the fixed name kb/embeddings.bin is present but the manifest")


@pytest.mark.parametrize(
    ("objects", "why"),
    [
        ({"knowledge-store.json": "oops"}, 'objects."knowledge-store.json" is not an object'),
        ("oops", "objects is not an object"),
        ({"knowledge-store.json": {"key": "k", "sha256": "x", "size": 1}}, "is not a hex SHA"),
        ({"knowledge-store.json": {"key": 7}}, "key is not a key"),
        ({"\x1b]0;pwned\x07": []}, r'objects."\u001b]0;pwned\u0007" is not an object'),
        (
            {"\x1b[2K": {"key": "k", "sha256": "a" * 64, "size": 1}},
            r'objects."\u001b[2K" has control characters in its name',
        ),
        (
            {"knowledge-store.json": {"key": "k\x1b]0;x\x07", "sha256": "a" * 64, "size": 1}},
            "key is not a key (text without control characters)",
        ),
    ],
    ids=[
        "string-entry",
        "string-section",
        "bad-digest",
        "bad-key",
        "escape-in-name",
        "escape-in-valid-name",
        "escape-in-key",
    ],
)
def test_a_malformed_objects_section_is_one_problem_line(
    s3: MotoS3Server, build: SampleBuild, objects: object, why: str
) -> None:
    expected = published(build)
    put_manifest(json.dumps({**remote_manifest(), "objects": objects}).encode())
    (problem,) = inspect(expected).problems
    assert problem.startswith("the bucket's manifest.json is unreadable: ")
    assert why in problem and "\n" not in problem and "\x1b" not in problem


def test_an_objects_section_that_vouches_for_another_store_is_named(
    s3: MotoS3Server, build: SampleBuild
) -> None:
    """A manifest whose header names our store but whose objects section points at other
    bytes (each consistent with its own digest) is not our set."""
    expected = published(build)
    other = make_build(salt="other ")
    publish_s3(other.store, None, bucket=BUCKET, prefix="elsewhere")
    manifest = remote_manifest()
    manifest["objects"] = {
        "knowledge-store.json": {
            "key": f"elsewhere/objects/{sha256_hex(other.store_bytes)}/knowledge-store.json",
            "sha256": sha256_hex(other.store_bytes),
            "size": len(other.store_bytes),
        }
    }
    put_manifest(json.dumps(manifest).encode())
    problems = inspect(expected).problems
    assert any("in objects and in its header with different digests" in p for p in problems)
