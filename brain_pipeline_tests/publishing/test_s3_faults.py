"""S3 under network faults: a silent endpoint, and a connection cut mid-upload (moto)."""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlparse

import boto3
import pytest

from brain_pipeline.publishing.manifest import build_manifest
from brain_pipeline.publishing.s3 import PublishError, S3Timeouts, publish_s3
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server
from brain_pipeline_tests.publishing.conftest import TEST_REGION, SampleBuild, make_build
from brain_pipeline_tests.publishing.netfaults import CuttingProxy, SilentServer

BUCKET = "brain-artifacts"
PREFIX = "agent/"


def upload(build: SampleBuild, endpoint_url: str | None, **overrides: Any) -> Any:
    options: dict[str, Any] = {
        "bucket": BUCKET,
        "prefix": PREFIX,
        "region": TEST_REGION,
        "endpoint_url": endpoint_url,
        "include_embeddings": True,
        "manifest": build_manifest(build.store, build.embeddings, build.chunks),
    }
    options.update(overrides)
    return publish_s3(build.store, build.embeddings, **options)


def test_the_total_deadline_bounds_a_silent_endpoint(s3: MotoS3Server, build: SampleBuild) -> None:
    """Read timeout far above the deadline: the deadline shrinks it and names itself."""
    with SilentServer() as silent, pytest.raises(PublishError) as caught:
        upload(build, silent.url, timeouts=S3Timeouts(connect=1, read=600, deadline=2))
    message = str(caught.value)
    # The deadline fired (it names itself), not the 600 s read timeout.
    assert "2 s deadline (publish.s3.deadline_seconds)" in message and "\n" not in message
    assert silent.accepted >= 1


def _bucket_state() -> dict[str, Any]:
    """The manifest in the bucket and whether every object it names is there, intact."""
    client = boto3.client("s3")
    manifest = json.loads(
        client.get_object(Bucket=BUCKET, Key=PREFIX + "manifest.json")["Body"].read()
    )
    complete = True
    for entry in manifest["objects"].values():
        try:
            body = client.get_object(Bucket=BUCKET, Key=entry["key"])["Body"].read()
        except client.exceptions.NoSuchKey:
            complete = False
            continue
        complete &= hashlib.sha256(body).hexdigest() == entry["sha256"]
        complete &= len(body) == entry["size"]
    return {"store": manifest["store"]["sha256"], "complete": complete}


def _fixed_store_matches_manifest() -> bool:
    client = boto3.client("s3")
    manifest = json.loads(
        client.get_object(Bucket=BUCKET, Key=PREFIX + "manifest.json")["Body"].read()
    )
    body = client.get_object(Bucket=BUCKET, Key=PREFIX + "knowledge-store.json")["Body"].read()
    return bool(
        hashlib.sha256(body).hexdigest() == manifest["objects"]["knowledge-store.json"]["sha256"]
    )


def test_a_connection_cut_mid_upload_leaves_a_complete_set_in_the_bucket(
    s3: MotoS3Server,
) -> None:
    old = make_build({"a": 300}, salt="old ")
    new = make_build({"a": 900, "b": 300}, salt="new ")
    old_sha = hashlib.sha256(old.store_bytes).hexdigest()
    new_sha = hashlib.sha256(new.store_bytes).hexdigest()
    moto_port = int(urlparse(s3.endpoint_url).port or 0)

    # how many request bytes a whole publication of `new` sends
    s3.reset()
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    upload(old, s3.endpoint_url)
    with CuttingProxy(moto_port, cut_after=10**12) as counter:
        upload(new, counter.url)
        total = counter.forwarded
    assert total > len(new.store_bytes)

    seen = {"old": 0, "new": 0}
    for fraction in (0.02, 0.3, 0.6, 0.9, 0.99):
        s3.reset()
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        upload(old, s3.endpoint_url)
        with CuttingProxy(moto_port, cut_after=int(total * fraction)) as proxy:
            with pytest.raises(PublishError) as caught:
                upload(new, proxy.url, timeouts=S3Timeouts(connect=2, read=5, deadline=30))
            assert proxy.cut.is_set()
        assert "\n" not in str(caught.value)
        # the one line says which: the fixed names are whole (and match the manifest) or
        # TORN (the cut also stopped the undo), never a torn set reported as whole
        if "TORN" not in str(caught.value):
            assert "see the previous publication, whole" in str(caught.value)
            assert _fixed_store_matches_manifest()
        state = _bucket_state()
        assert state["complete"], f"cut at {fraction:.0%}: the manifest names a missing object"
        assert state["store"] in (old_sha, new_sha)
        seen["old" if state["store"] == old_sha else "new"] += 1
        # and the next publication, with the network back, completes the new set
        upload(new, s3.endpoint_url)
        assert _bucket_state() == {"store": new_sha, "complete": True}
    assert seen["old"] > 0, seen  # cuts before the manifest keep the previous set
