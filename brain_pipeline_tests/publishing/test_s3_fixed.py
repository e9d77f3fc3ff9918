"""The fixed names on S3 are one set: whole and new, or the previous one put back.

Faults are injected on the real moto server by a bucket policy that denies s3:PutObject
(which CopyObject needs on its target) on one key, as an operator's policy would; moto
enforces bucket policies. What is asserted is what a reader of the fixed names would
fetch afterwards: `knowledge-store.json`, `embeddings.bin` and `manifest.json` from one
publication (the chunk ids in the vectors are the store's, the manifest's digests are
the objects').
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import boto3
import pytest

from brain_pipeline.corpus.store import parse_store
from brain_pipeline.publishing.s3 import (
    FixedName,
    PreviousSet,
    PublishError,
    S3PublishReport,
    write_fixed_names,
)
from brain_pipeline.publishing.s3_client import (
    BINARY_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    Deadline,
    S3Destination,
    S3Timeouts,
    content_key,
    make_s3_client,
)
from brain_pipeline.retrieval.vectors import decode_embeddings
from brain_pipeline.utils.digest import sha256_hex
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server, deny_writes
from brain_pipeline_tests.publishing.conftest import (
    TEST_REGION,
    SampleBuild,
    make_build,
    publish_build,
)

BUCKET = "brain-artifacts"
PREFIX = "knowledge-store/"


def publish(build: SampleBuild, **overrides: Any) -> S3PublishReport:
    return publish_build(build, bucket=BUCKET, prefix=PREFIX, **overrides)


def deny_writes_to(*keys: str) -> None:
    deny_writes(BUCKET, *keys)


def fixed(filename: str) -> bytes | None:
    client = boto3.client("s3")
    try:
        return bytes(client.get_object(Bucket=BUCKET, Key=PREFIX + filename)["Body"].read())
    except client.exceptions.NoSuchKey:
        return None


def fixed_set() -> dict[str, Any]:
    """What a reader of the fixed names gets: the store's, vectors' and manifest's view."""
    store, vectors, manifest = (
        fixed("knowledge-store.json"),
        fixed("embeddings.bin"),
        fixed("manifest.json"),
    )
    return {
        "store": store,
        "vectors": vectors,
        "manifest_store_sha256": json.loads(manifest)["store"]["sha256"] if manifest else None,
    }


def assert_one_publication(state: dict[str, Any], build: SampleBuild) -> None:
    """The fixed names hold exactly `build`'s set, vectors matching the store's chunks."""
    assert state["store"] == build.store_bytes
    assert state["vectors"] == build.embeddings_bytes
    assert state["manifest_store_sha256"] == hashlib.sha256(build.store_bytes).hexdigest()
    ids = [chunk.id for chunk in parse_store(state["store"])]
    assert decode_embeddings(state["vectors"]).ids == ids


@pytest.fixture
def old_and_new(s3: MotoS3Server) -> tuple[SampleBuild, SampleBuild]:
    """The bucket holds `old`'s set; `new` has other chunks (and so other vector ids)."""
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    old = make_build({"aws-tutor": 3, "python-tutor": 2}, salt="old ")
    new = make_build({"aws-tutor": 5, "go-tutor": 4}, salt="new ")
    publish(old)
    assert_one_publication(fixed_set(), old)
    return old, new


def test_a_denied_store_copy_puts_the_previous_vectors_back(
    old_and_new: tuple[SampleBuild, SampleBuild],
) -> None:
    """The reported fault: CopyObject denied on knowledge-store.json after embeddings.bin
    was already replaced. The reader must get the old set whole, and the step one line."""
    old, new = old_and_new
    deny_writes_to(PREFIX + "knowledge-store.json")

    with pytest.raises(PublishError) as caught:
        publish(new)

    assert_one_publication(fixed_set(), old)
    message = str(caught.value)
    assert "\n" not in message
    assert f"to {PREFIX}knowledge-store.json" in message
    assert "put back to the previous set (embeddings.bin)" in message
    assert "see the previous publication, whole" in message


def test_a_denied_manifest_puts_both_data_names_back(
    old_and_new: tuple[SampleBuild, SampleBuild],
) -> None:
    old, new = old_and_new
    deny_writes_to(PREFIX + "manifest.json")

    with pytest.raises(PublishError) as caught:
        publish(new)

    message = str(caught.value)
    assert f"uploading {PREFIX}manifest.json" in message
    assert "(knowledge-store.json, embeddings.bin)" in message
    assert_one_publication(fixed_set(), old)


def test_the_first_publication_leaves_no_half_set_behind(s3: MotoS3Server) -> None:
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    deny_writes_to(PREFIX + "knowledge-store.json")

    with pytest.raises(PublishError) as caught:
        publish(make_build())

    assert "put back to the previous set (embeddings.bin)" in str(caught.value)
    assert fixed_set() == {"store": None, "vectors": None, "manifest_store_sha256": None}


def test_when_the_undo_fails_too_the_torn_name_is_named(
    old_and_new: tuple[SampleBuild, SampleBuild],
) -> None:
    """The previous vectors' content-addressed copy is gone (deleted by hand): the fixed
    embeddings.bin cannot be put back, and the error says the fixed names are torn."""
    _, new = old_and_new
    client = boto3.client("s3")
    manifest = json.loads(fixed("manifest.json") or b"{}")
    client.delete_object(Bucket=BUCKET, Key=manifest["objects"]["embeddings.bin"]["key"])
    deny_writes_to(PREFIX + "knowledge-store.json")

    with pytest.raises(PublishError) as caught:
        publish(new)

    message = str(caught.value)
    assert "\n" not in message
    assert "the fixed names are TORN: embeddings.bin (copying" in message
    assert "NoSuchKey" in message


def test_vectors_left_from_an_earlier_set_are_removed_when_none_go_out(
    old_and_new: tuple[SampleBuild, SampleBuild],
) -> None:
    """include_embeddings turned off: the old embeddings.bin must not stay beside the new
    store (a reader would pair them)."""
    _, new = old_and_new
    report = publish(new, include_embeddings=False)
    assert (PREFIX + "embeddings.bin", "removed") in [(o.key, o.action) for o in report.objects]
    state = fixed_set()
    assert state["store"] == new.store_bytes and state["vectors"] is None


def test_a_successful_publish_replaces_the_whole_set(
    old_and_new: tuple[SampleBuild, SampleBuild],
) -> None:
    _, new = old_and_new
    publish(new)
    assert_one_publication(fixed_set(), new)


def test_a_set_without_vectors_gets_none_from_the_undo(
    old_and_new: tuple[SampleBuild, SampleBuild],
) -> None:
    """Store-only sets: the undo must not invent an embeddings.bin (nor touch the store
    the denied copy never changed)."""
    old, new = old_and_new
    publish(old, include_embeddings=False)
    deny_writes_to(PREFIX + "knowledge-store.json")

    with pytest.raises(PublishError) as caught:
        publish(new, include_embeddings=False)

    assert "no fixed name was changed" in str(caught.value)
    state = fixed_set()
    assert state["store"] == old.store_bytes and state["vectors"] is None
    assert state["manifest_store_sha256"] == hashlib.sha256(old.store_bytes).hexdigest()


def test_the_undo_copies_only_from_our_own_content_addressed_keys(
    old_and_new: tuple[SampleBuild, SampleBuild],
) -> None:
    """A manifest edited to point the vectors at someone else's object (with that
    object's true digest) must not get it copied into the fixed names by the undo."""
    _, new = old_and_new
    client = boto3.client("s3")
    elsewhere = b"another team's file"
    client.put_object(Bucket=BUCKET, Key="other-team/file.bin", Body=elsewhere)
    manifest = json.loads(fixed("manifest.json") or b"{}")
    manifest["objects"]["embeddings.bin"] = {
        "key": "other-team/file.bin",
        "sha256": hashlib.sha256(elsewhere).hexdigest(),
        "size": len(elsewhere),
    }
    client.put_object(Bucket=BUCKET, Key=PREFIX + "manifest.json", Body=json.dumps(manifest))
    deny_writes_to(PREFIX + "knowledge-store.json")

    with pytest.raises(PublishError):
        publish(new)

    assert fixed("embeddings.bin") != elsewhere


def test_a_failed_clean_up_says_the_new_set_is_live(s3: MotoS3Server) -> None:
    """Deleting an old object is refused (a policy denying s3:DeleteObject): the step
    fails, but its line says the new set is whole, which is what the bucket shows."""
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    generations = [make_build(salt=f"{n} ") for n in ("one", "two", "three")]
    publish(generations[0])
    publish(generations[1])
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:DeleteObject",
                "Resource": f"arn:aws:s3:::{BUCKET}/{PREFIX}objects/*",
            }
        ],
    }
    boto3.client("s3").put_bucket_policy(Bucket=BUCKET, Policy=json.dumps(policy))

    with pytest.raises(PublishError) as caught:
        publish(generations[2])

    assert "the new set is live and whole" in str(caught.value)
    assert_one_publication(fixed_set(), generations[2])


def test_the_undo_gets_its_own_deadline(old_and_new: tuple[SampleBuild, SampleBuild]) -> None:
    """The deadline runs out right after the fixed embeddings.bin was replaced (the clock
    is moved by botocore's after-call event of that copy): the store's copy is refused
    by the deadline, and the undo, with a budget of its own, still puts the vectors back."""
    old, new = old_and_new
    clock = Clock()
    client = make_s3_client(TEST_REGION)

    def run_out(**_: Any) -> None:
        if clock.now == 1000.0:  # once: the first copy
            clock.now += 120

    client.meta.events.register("after-call.s3.CopyObject", run_out)
    timeouts = S3Timeouts(deadline=60)
    dest = S3Destination(client, BUCKET, PREFIX, timeouts=timeouts, deadline=Deadline(60, clock))
    store_key = content_key(PREFIX, "knowledge-store.json", sha256_hex(new.store_bytes))
    vectors_key = content_key(PREFIX, "embeddings.bin", sha256_hex(new.embeddings_bytes))
    dest.put_verified(store_key, new.store_bytes, JSON_CONTENT_TYPE, mark=True)
    dest.put_verified(vectors_key, new.embeddings_bytes, BINARY_CONTENT_TYPE, mark=True)
    previous = PreviousSet.read(fixed("manifest.json"), PREFIX)
    names = [
        FixedName("embeddings.bin", new.embeddings, BINARY_CONTENT_TYPE, vectors_key),
        FixedName("knowledge-store.json", new.store, JSON_CONTENT_TYPE, store_key),
    ]

    with pytest.raises(PublishError) as caught:
        write_fixed_names(dest, names, previous)

    message = str(caught.value)
    assert "60 s deadline (publish.s3.deadline_seconds)" in message
    assert "put back to the previous set (embeddings.bin)" in message
    assert_one_publication(fixed_set(), old)


class Clock:
    """A monotonic clock the test moves (here: from botocore's after-call event)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
