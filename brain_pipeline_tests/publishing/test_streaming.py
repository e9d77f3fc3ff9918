"""Publishing streams from files: never the whole artifact in memory, never unverified.

The store and its vectors are named by path with a *known* sha256 (issue #17); these
tests pin down what that must not cost: a publication's Python allocations do not grow
with the file, and a file that is not what it was named as (rewritten meanwhile) is
refused before anything live changes, locally and in S3.
"""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path
from typing import Any

import boto3
import pytest

from brain_pipeline.publishing.commit import PublicationError, find_leftovers, intent_path
from brain_pipeline.publishing.local import publish_local
from brain_pipeline.publishing.manifest import build_manifest
from brain_pipeline.publishing.s3 import PublishError, content_key, publish_s3
from brain_pipeline.publishing.source import ArtifactSource, SourceChanged, read_vectors_header
from brain_pipeline.retrieval.vectors import decode_embeddings
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server
from brain_pipeline_tests.publishing.conftest import (
    AGENT_MODEL,
    TEST_REGION,
    SampleBuild,
    make_build,
)

BUCKET = "brain-artifacts"


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` (dotfiles, staging folders, the intent record included)."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def publish(root: Path, store: ArtifactSource, vectors: ArtifactSource | None, **kw: Any) -> Any:
    manifest = build_manifest(store, vectors, published_at="t", **kw)
    return publish_local(store, vectors, root, agent_query_model=AGENT_MODEL, manifest=manifest)


def big_store(directory: Path, size: int) -> ArtifactSource:
    """A file of `size` arbitrary bytes, as publishing sees a store (given its counts)."""
    path = directory / "knowledge-store.json"
    path.write_bytes(os.urandom(size))
    return ArtifactSource.of_file(path)


def test_a_large_publication_allocates_a_few_blocks_not_the_file(
    tmp_path: Path, publish_root: Path
) -> None:
    (publish_root / "dist").mkdir()  # two copies: the file is copied twice
    store = big_store(tmp_path, 24 << 20)
    counts = ({"a": 1}, ["x" * 12])
    tracemalloc.start()
    try:
        publish(publish_root, store, None, counts=counts)
        first = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        report = publish(publish_root, store, None, counts=counts)  # compares, copies nothing
        again = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not report.changed
    for sub in ("src", "dist"):
        assert (publish_root / sub / "storage" / "knowledge-store.json").read_bytes() == (
            store.path.read_bytes()
        )
    # a 1 MiB block (and its copy in the hash) at a time, never the 24 MiB file
    assert first < 6 << 20, first
    assert again < 6 << 20, again


def test_a_file_rewritten_after_it_was_named_is_refused_before_anything_changes(
    tmp_path: Path, publish_root: Path
) -> None:
    old, new = make_build(salt="old "), make_build(salt="new ")
    publish(publish_root, old.store, old.embeddings, chunks=old.chunks)
    before = tree(publish_root)
    # the digest the build recorded, but other bytes of the same size now in the file
    path = tmp_path / "knowledge-store.json"
    path.write_bytes(new.store_bytes)
    named = ArtifactSource(path, new.store.sha256, new.store.size)
    path.write_bytes(bytes(reversed(new.store_bytes)))

    with pytest.raises(PublicationError) as caught:
        publish(publish_root, named, new.embeddings, chunks=new.chunks)

    message = str(caught.value)
    assert "rewritten meanwhile" in message and "nothing live was changed" in message
    assert "\n" not in message
    assert tree(publish_root) == before
    assert find_leftovers(publish_root) == [] and not intent_path(publish_root).exists()


def test_a_file_of_another_size_is_refused_when_opened(tmp_path: Path) -> None:
    source = big_store(tmp_path, 1000)
    shrunk = ArtifactSource(source.path, source.sha256, 999)
    with pytest.raises(SourceChanged, match="has 1000 bytes, not the 999"):
        list(shrunk.blocks())
    with pytest.raises(SourceChanged):
        shrunk.same_bytes_as(source.path)


def test_the_vectors_header_read_from_a_map_equals_the_decoded_file(build: SampleBuild) -> None:
    header = read_vectors_header(build.embeddings)
    decoded = decode_embeddings(build.embeddings_bytes)
    assert (header.model, header.dim, header.ids) == (decoded.model, decoded.dim, decoded.ids)
    assert header.count == decoded.count


def test_s3_refuses_a_file_that_is_not_its_known_digest(s3: MotoS3Server, tmp_path: Path) -> None:
    """The checksum the SDK computes from what it read must be the file's known one."""
    build = make_build(salt="s3 ")
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    path = tmp_path / "store.json"
    path.write_bytes(bytes(reversed(build.store_bytes)))
    named = ArtifactSource(path, build.store.sha256, build.store.size)
    manifest = build_manifest(build.store, None, build.chunks)

    with pytest.raises(PublishError) as caught:
        publish_s3(named, None, bucket=BUCKET, region=TEST_REGION, manifest=manifest)

    assert "checksum differs" in str(caught.value) and "\n" not in str(caught.value)
    listed = boto3.client("s3").list_objects_v2(Bucket=BUCKET).get("Contents", [])
    assert "manifest.json" not in {o["Key"] for o in listed}  # the set was never claimed


def test_s3_uploads_the_file_byte_for_byte(s3: MotoS3Server) -> None:
    build = make_build({"a": 400}, salt="big ")
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    report = publish_s3(
        build.store,
        build.embeddings,
        bucket=BUCKET,
        region=TEST_REGION,
        include_embeddings=True,
        manifest=build_manifest(build.store, build.embeddings, build.chunks),
    )
    client = boto3.client("s3")
    for name, source, data in (
        ("knowledge-store.json", build.store, build.store_bytes),
        ("embeddings.bin", build.embeddings, build.embeddings_bytes),
    ):
        key = content_key("", name, source.sha256)
        assert client.get_object(Bucket=BUCKET, Key=key)["Body"].read() == data
        assert client.get_object(Bucket=BUCKET, Key=name)["Body"].read() == data
    assert {o.verified_by for o in report.objects if o.action == "uploaded"} == {"ChecksumSHA256"}
