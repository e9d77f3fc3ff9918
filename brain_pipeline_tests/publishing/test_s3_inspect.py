"""publishing.s3_inspect (`status --s3`) against moto's standalone server, real boto3.

Pins when the bucket "matches" the local publication (its manifest names the same
store, and with `include_embeddings` the same vectors, and every object it names is
there with its size), each problem it names otherwise, that an unreachable bucket is
reported as such rather than raised, and that inspecting only reads.
"""

from __future__ import annotations

import json

import boto3

from brain_pipeline.publishing.manifest import PublishManifest, build_manifest
from brain_pipeline.publishing.s3 import publish_s3
from brain_pipeline.publishing.s3_client import S3Timeouts
from brain_pipeline.publishing.s3_inspect import S3Check, inspect_s3
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
