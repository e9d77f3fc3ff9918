"""publish_s3 against moto's standalone server over real HTTP, with real boto3."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from brain_pipeline.publishing.local import embeddings_refusal
from brain_pipeline.publishing.manifest import PublishManifest, build_manifest
from brain_pipeline.publishing.s3 import (
    S3PublishReport,
    content_key,
    publish_s3,
)
from brain_pipeline.utils.digest import sha256_hex
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server
from brain_pipeline_tests.publishing.conftest import (
    AGENT_MODEL,
    TEST_REGION,
    SampleBuild,
    make_build,
)

BUCKET = "brain-artifacts"
PREFIX = "agent/"


def plain_client() -> Any:
    """A client configured only by the environment, as an operator's would be."""
    return boto3.client("s3")


def make_bucket(name: str = BUCKET) -> None:
    plain_client().create_bucket(Bucket=name)


def run(build: SampleBuild, **overrides: Any) -> S3PublishReport:
    options: dict[str, Any] = {
        "bucket": BUCKET,
        "prefix": PREFIX,
        "region": TEST_REGION,
        "endpoint_url": None,
        "include_embeddings": True,
    }
    options.update(overrides)
    return publish_s3(build.store, build.embeddings, **options)


def published_locally(build: SampleBuild) -> PublishManifest:
    """The manifest `publish_local` makes for an agent embedding queries with AGENT_MODEL
    (vectors of another model withheld), which is the one S3 is given."""
    manifest = build_manifest(build.store, build.embeddings)
    refusal = embeddings_refusal(build.embeddings, AGENT_MODEL)
    return manifest if refusal is None else manifest.without_embeddings(refusal)


def puts(server: MotoS3Server) -> list[str]:
    return [r.path for r in server.requests_settled() if r.method == "PUT" and PREFIX in r.path]


def keys(prefix: str = "") -> set[str]:
    listed = plain_client().list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {str(o["Key"]) for o in listed}


def ca(filename: str, data: bytes, prefix: str = PREFIX) -> str:
    """The content-addressed key of `data` published as `filename`."""
    return content_key(prefix, filename, sha256_hex(data))


def remote_manifest() -> dict[str, Any]:
    body = plain_client().get_object(Bucket=BUCKET, Key=PREFIX + "manifest.json")["Body"]
    return dict(json.loads(body.read()))


def test_upload_round_trips_bytes_and_content_types(s3: MotoS3Server, build: SampleBuild) -> None:
    make_bucket()
    report = run(build)
    assert report.status == "published" and report.changed
    client = plain_client()
    expectations = {
        "knowledge-store.json": (build.store_bytes, "application/json"),
        "embeddings.bin": (build.embeddings_bytes, "application/octet-stream"),
    }
    for name, (data, content_type) in expectations.items():
        obj = client.get_object(Bucket=BUCKET, Key=PREFIX + name)
        assert obj["Body"].read() == data
        assert obj["ContentType"] == content_type
    manifest_obj = client.get_object(Bucket=BUCKET, Key=PREFIX + "manifest.json")
    assert manifest_obj["ContentType"] == "application/json"
    remote = PublishManifest.from_json(manifest_obj["Body"].read())
    assert remote.store.sha256 == sha256_hex(build.store_bytes)
    assert remote.embeddings is not None
    assert remote.embeddings.sha256 == sha256_hex(build.embeddings_bytes)
    by_key = {o.key: o for o in report.objects}
    store_key = ca("knowledge-store.json", build.store_bytes)
    vectors_key = ca("embeddings.bin", build.embeddings_bytes)
    assert [(o.key, o.action) for o in report.objects] == [
        (vectors_key, "uploaded"),
        (store_key, "uploaded"),
        (PREFIX + "embeddings.bin", "copied"),
        (PREFIX + "knowledge-store.json", "copied"),
        (PREFIX + "manifest.json", "uploaded"),  # last: the fixed names first
    ]
    assert by_key[store_key].verified_by == "ChecksumSHA256"
    assert by_key[store_key].sha256 == sha256_hex(build.store_bytes)
    assert client.get_object(Bucket=BUCKET, Key=store_key)["Body"].read() == build.store_bytes
    # the manifest names exactly the keys of its set, with their digests and sizes
    assert remote_manifest()["objects"] == {
        "embeddings.bin": {
            "key": vectors_key,
            "sha256": sha256_hex(build.embeddings_bytes),
            "size": len(build.embeddings_bytes),
        },
        "knowledge-store.json": {
            "key": store_key,
            "sha256": sha256_hex(build.store_bytes),
            "size": len(build.store_bytes),
        },
    }


def test_store_only_when_embeddings_are_not_included(s3: MotoS3Server, build: SampleBuild) -> None:
    make_bucket()
    manifest = build_manifest(build.store, build.embeddings, build.chunks)
    report = run(build, include_embeddings=False, manifest=manifest)
    expected = {
        ca("knowledge-store.json", build.store_bytes),
        PREFIX + "knowledge-store.json",
        PREFIX + "manifest.json",
    }
    assert {o.key for o in report.objects} == expected
    assert keys() == expected
    assert report.manifest is not None and report.manifest.embeddings is None
    assert set(remote_manifest()["objects"]) == {"knowledge-store.json"}


def test_republishing_unchanged_data_does_not_put_again(
    s3: MotoS3Server, build: SampleBuild
) -> None:
    make_bucket()
    run(build, manifest=build_manifest(build.store, build.embeddings, run_id="r1"))
    client = plain_client()
    before = {
        key: client.head_object(Bucket=BUCKET, Key=PREFIX + key)["LastModified"]
        for key in ("knowledge-store.json", "embeddings.bin", "manifest.json")
    }
    assert len(puts(s3)) == 5  # two content-addressed objects, the manifest, two copies

    again = run(
        build,
        manifest=build_manifest(
            build.store,
            build.embeddings,
            run_id="r2",
            published_at="2099-01-01T00:00:00Z",
        ),
    )

    assert again.status == "unchanged" and not again.changed
    assert [o.action for o in again.objects] == ["unchanged"] * 5
    assert len(puts(s3)) == 5, "an unchanged re-publish must not PUT"
    after = {
        key: client.head_object(Bucket=BUCKET, Key=PREFIX + key)["LastModified"] for key in before
    }
    assert after == before
    remote = PublishManifest.from_json(
        client.get_object(Bucket=BUCKET, Key=PREFIX + "manifest.json")["Body"].read()
    )
    assert remote.run_id == "r1"


def test_changed_store_uploads_only_what_changed(s3: MotoS3Server, build: SampleBuild) -> None:
    make_bucket()
    run(build, include_embeddings=False)
    changed = make_build(salt="new ")
    report = run(changed, include_embeddings=False)
    assert report.status == "published"
    assert [o.action for o in report.objects] == ["uploaded", "copied", "uploaded"]
    body = plain_client().get_object(Bucket=BUCKET, Key=PREFIX + "knowledge-store.json")["Body"]
    assert body.read() == changed.store_bytes
    # the previous set is kept one generation (a reader may hold the old manifest)
    assert ca("knowledge-store.json", build.store_bytes) in keys()


def test_objects_older_than_the_previous_manifest_are_deleted(
    s3: MotoS3Server, build: SampleBuild
) -> None:
    make_bucket()
    generations = [build, make_build(salt="two "), make_build(salt="three ")]
    for generation in generations:
        run(generation, include_embeddings=False)
    stored = keys(PREFIX + "objects/")
    assert stored == {
        ca("knowledge-store.json", generations[1].store_bytes),
        ca("knowledge-store.json", generations[2].store_bytes),
    }


def test_no_bucket_is_skipped(build: SampleBuild, free_port: int) -> None:
    report = publish_s3(
        build.store,
        None,
        bucket=None,
        prefix="",
        region=None,
        endpoint_url=f"http://127.0.0.1:{free_port}",
        include_embeddings=False,
    )
    assert report.status == "skipped" and report.reason == "no bucket"
    assert report.summary() == "S3: skipped: no bucket"


def test_prefix_without_slash_is_a_folder(s3: MotoS3Server, build: SampleBuild) -> None:
    make_bucket()
    run(build, prefix="brain", include_embeddings=False)
    assert keys() == {
        ca("knowledge-store.json", build.store_bytes, "brain/"),
        "brain/knowledge-store.json",
        "brain/manifest.json",
    }


def test_explicit_endpoint_url_wins(
    s3: MotoS3Server, build: SampleBuild, monkeypatch: pytest.MonkeyPatch, free_port: int
) -> None:
    make_bucket()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{free_port}")
    report = run(build, endpoint_url=s3.endpoint_url)
    assert report.status == "published" and report.endpoint_url == s3.endpoint_url


def test_request_log_sees_the_puts(s3: MotoS3Server, build: SampleBuild) -> None:
    """The PUT counter used above really counts uploads (so its zero means something)."""
    make_bucket()
    run(build, include_embeddings=False)
    assert sorted(puts(s3)) == sorted(
        [
            f"/{BUCKET}/{ca('knowledge-store.json', build.store_bytes)}",
            f"/{BUCKET}/{PREFIX}knowledge-store.json",
            f"/{BUCKET}/{PREFIX}manifest.json",
        ]
    )


def test_vectors_of_another_model_are_withheld_and_the_stale_object_removed(
    s3: MotoS3Server, build: SampleBuild
) -> None:
    make_bucket()
    run(build, manifest=published_locally(build))
    other = make_build(model="all-MiniLM-L6-v2", salt="v2 ")

    report = run(other, manifest=published_locally(other))

    actions = {o.key: o.action for o in report.objects}
    assert actions == {
        ca("knowledge-store.json", other.store_bytes): "uploaded",
        PREFIX + "manifest.json": "uploaded",
        PREFIX + "knowledge-store.json": "copied",
        PREFIX + "embeddings.bin": "removed",
    }
    assert PREFIX + "embeddings.bin" not in keys()
    assert set(remote_manifest()["objects"]) == {"knowledge-store.json"}
    assert report.manifest is not None and report.manifest.embeddings is None
    assert report.manifest.embeddings_note and "all-MiniLM-L6-v2" in report.manifest.embeddings_note
    assert run(other, manifest=published_locally(other)).status == "unchanged"


def test_a_shared_bucket_with_the_default_empty_prefix_loses_nothing(
    s3: MotoS3Server, build: SampleBuild
) -> None:
    """The reported fault: with prefix "" the clean-up deleted another team's
    `objects/other-team/invoice-2024.pdf`. Now it refuses to sweep, and says so."""
    make_bucket()
    client = plain_client()
    client.put_object(Bucket=BUCKET, Key="objects/other-team/invoice-2024.pdf", Body=b"%PDF")
    generations = [build, make_build(salt="two "), make_build(salt="three ")]
    for generation in generations:
        report = run(generation, prefix="", include_embeddings=False)
        assert report.notes == (
            "clean-up refused: publish.s3.prefix is empty, so old objects were kept (a sweep "
            "of the whole bucket could reach other people's objects; set a prefix such as "
            "knowledge-store/)",
        )
        assert report.notes[0] in report.summary().splitlines()[-1]
    assert "objects/other-team/invoice-2024.pdf" in keys()
    assert ca("knowledge-store.json", build.store_bytes, prefix="") in keys()


def test_under_a_prefix_only_our_own_old_objects_are_deleted(
    s3: MotoS3Server, build: SampleBuild
) -> None:
    make_bucket()
    foreign = [PREFIX + "objects/other-team/invoice-2024.pdf", ca("knowledge-store.json", b"x")]
    for key in foreign:  # the second is shaped like ours, but we never wrote it
        plain_client().put_object(Bucket=BUCKET, Key=key, Body=b"theirs")
    for generation in (build, make_build(salt="two "), make_build(salt="three ")):
        assert run(generation, include_embeddings=False).notes == ()
    assert set(foreign) <= keys()
    assert ca("knowledge-store.json", build.store_bytes) not in keys()


def test_an_unmarked_object_of_ours_is_uploaded_again_marked(
    s3: MotoS3Server, build: SampleBuild
) -> None:
    """Objects from versions before the mark: the next publication that uses one writes
    it again with the mark, so a later clean-up can tell it is ours."""
    make_bucket()
    key = ca("knowledge-store.json", build.store_bytes)
    client = plain_client()
    client.put_object(
        Bucket=BUCKET, Key=key, Body=build.store_bytes, ContentType="application/json",
        ChecksumAlgorithm="SHA256",
    )  # fmt: skip
    report = run(build, include_embeddings=False)
    assert (key, "uploaded") in [(o.key, o.action) for o in report.objects]
    assert client.head_object(Bucket=BUCKET, Key=key)["Metadata"] == {
        "written-by": "brain-pipeline"
    }

