"""The blob store, every test on both backends (a local folder, moto's S3 server over HTTP)."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from brain_pipeline.state.blobs import (
    BlobError,
    BlobNotFound,
    BlobStore,
    LocalBlobs,
    S3Blobs,
    blob_store,
    check_blobs_url,
)
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server

SPAWN = multiprocessing.get_context("spawn")


def test_put_bytes_is_named_by_its_sha256_and_read_back(blobs: BlobStore) -> None:
    digest = blobs.put_bytes(b"chunk text")
    assert digest == hashlib.sha256(b"chunk text").hexdigest()
    assert blobs.has(digest) and blobs.get_bytes(digest) == b"chunk text"
    assert blobs.put_bytes(b"chunk text") == digest  # the same bytes: the same blob
    assert list(blobs.list()) == [digest]


def test_put_file_streams_and_get_file_writes_the_same_bytes(
    blobs: BlobStore, tmp_path: Path
) -> None:
    source = tmp_path / "vectors.bin"
    data = os.urandom(3 * (1 << 20) + 17)  # more than one piece
    source.write_bytes(data)
    digest = blobs.put_file(source)
    assert digest == hashlib.sha256(data).hexdigest()
    target = tmp_path / "out" / "copy.bin"
    blobs.get_file(digest, target)
    assert target.read_bytes() == data
    assert blobs.get_bytes(digest) == data


def test_missing_blobs_and_deletion(blobs: BlobStore, tmp_path: Path) -> None:
    absent = "0" * 64
    assert not blobs.has(absent)
    with pytest.raises(BlobNotFound):
        blobs.get_bytes(absent)
    with pytest.raises(BlobNotFound):
        blobs.get_file(absent, tmp_path / "x")
    assert not (tmp_path / "x").exists()
    kept, dropped = blobs.put_bytes(b"kept"), blobs.put_bytes(b"dropped")
    assert sorted(blobs.list()) == sorted([kept, dropped])
    blobs.delete(dropped)
    blobs.delete(dropped)  # deleting what is gone is not an error
    assert list(blobs.list()) == [kept] and not blobs.has(dropped)


def test_a_name_that_is_not_a_digest_is_refused(blobs: BlobStore) -> None:
    for bad in ("../../etc/passwd", "A" * 64, "ab"):
        with pytest.raises(ValueError, match="not a sha256"):
            blobs.has(bad)


def _damage(blobs: BlobStore, digest: str, data: bytes) -> None:
    """Overwrite the stored bytes behind the store's back (a disk or a person did it)."""
    if isinstance(blobs, LocalBlobs):
        path = next(blobs.root.rglob(digest))
        path.write_bytes(data)
    else:
        assert isinstance(blobs, S3Blobs)
        key = f"{blobs.prefix}sha256/{digest}"
        blobs.client.put_object(Bucket=blobs.bucket, Key=key, Body=data)


def test_a_damaged_blob_is_an_error_never_served(blobs: BlobStore, tmp_path: Path) -> None:
    digest = blobs.put_bytes(b"the real bytes")
    _damage(blobs, digest, b"other bytes")
    with pytest.raises(BlobError, match="damaged"):
        blobs.get_bytes(digest)
    (tmp_path / "target").write_bytes(b"before")
    with pytest.raises(BlobError, match="hash to"):
        blobs.get_file(digest, tmp_path / "target")
    assert (tmp_path / "target").read_bytes() == b"before"  # untouched
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "blobs") == ["target"]


def _put_forever(url: str, path: str, started: Any) -> None:
    store = blob_store(url)
    started.set()
    while True:  # killed by the test at some point of one of these
        store.put_file(path)
        store.delete(store.put_file(path))


@pytest.mark.parametrize("after", [0.0, 0.05, 0.2, 0.5])
def test_a_put_killed_midway_leaves_no_partial_blob(
    blobs_url: str, tmp_path: Path, after: float
) -> None:
    """kill -9 the writer at some point of putting and deleting a 6 MB blob, over and
    over: the store holds that blob whole or not at all, and nothing else."""
    data = os.urandom(6 << 20)
    source = tmp_path / "big.bin"
    source.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    started = SPAWN.Event()
    writer = SPAWN.Process(target=_put_forever, args=(blobs_url, str(source), started))
    writer.start()
    try:
        assert started.wait(timeout=60)
        time.sleep(after)
    finally:
        assert writer.pid is not None
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(timeout=30)
    assert writer.exitcode == -signal.SIGKILL
    store = blob_store(blobs_url)
    assert list(store.list()) in ([], [digest])
    if store.has(digest):
        assert store.get_bytes(digest) == data
    if isinstance(store, LocalBlobs):  # what a killed writer leaves is a hidden temporary
        left = [p for p in store.root.rglob("*") if p.is_file()]
        assert all(p.name == digest or p.name.startswith(".") for p in left)


def test_a_file_that_changes_while_stored_is_refused_locally(tmp_path: Path) -> None:
    """The local copy is hashed again as it is written: a file that changed since it was
    hashed is not stored under the old digest (a server does the same for S3: test
    below)."""
    store = LocalBlobs(tmp_path / "blobs")
    source = tmp_path / "grows.txt"
    source.write_bytes(b"first")

    class Growing(os.PathLike[str]):
        """Hashed as `first`, then (before the copy opens it) rewritten."""

        calls = 0

        def __fspath__(self) -> str:
            Growing.calls += 1
            if Growing.calls == 2:
                source.write_bytes(b"first, then more")
            return str(source)

    with pytest.raises(BlobError, match="hash to"):
        store.put_file(Growing())
    assert list(store.list()) == []
    assert not [p for p in (tmp_path / "blobs").rglob("*") if p.is_file()]


def test_s3_keeps_no_body_that_is_not_its_digest(s3: MotoS3Server) -> None:
    """What a file rewritten between its hashing and its upload sends (the local check is
    the test above)."""
    boto3.client("s3").create_bucket(Bucket="checked")
    store = blob_store("s3://checked/p")
    assert isinstance(store, S3Blobs)
    wrong = hashlib.sha256(b"declared").hexdigest()
    with pytest.raises(BlobError, match="do not hash to"):
        store._put(wrong, b"sent", 4, "a body")  # the path put_file takes, with other bytes
    assert list(store.list()) == []


def test_s3_keys_live_under_the_prefix(blobs_url: str) -> None:
    store = blob_store(blobs_url)
    digest = store.put_bytes(b"x")
    if isinstance(store, S3Blobs):
        keys = [
            o["Key"]
            for o in boto3.client("s3").list_objects_v2(Bucket=store.bucket)["Contents"]
        ]
        assert keys == [f"team/state/sha256/{digest}"]
    else:
        assert isinstance(store, LocalBlobs)
        assert (store.root / "sha256" / digest[:2] / digest).is_file()


@pytest.mark.parametrize(
    ("url", "says"),
    [("s3:///prefix", "needs a bucket"), ("gs://bucket/x", "unknown blob store scheme 'gs'")],
)
def test_a_bad_blobs_url_says_what_to_write(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        check_blobs_url(url)


def test_blob_store_reads_folders_file_urls_and_s3(tmp_path: Path) -> None:
    assert isinstance(blob_store(str(tmp_path)), LocalBlobs)
    assert blob_store(f"file://{tmp_path}").root == tmp_path.resolve()  # type: ignore[attr-defined]
    s3 = blob_store("s3://bucket/a/b/", region="eu-west-1", endpoint_url="http://127.0.0.1:9")
    assert isinstance(s3, S3Blobs) and (s3.bucket, s3.prefix) == ("bucket", "a/b/")
    assert s3.client.meta.region_name == "eu-west-1"
    assert s3.client.meta.endpoint_url == "http://127.0.0.1:9"
