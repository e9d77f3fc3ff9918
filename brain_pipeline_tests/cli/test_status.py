"""`brain-pipeline status` through the real command dispatcher."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline.cli import main
from brain_pipeline.cli.status import (
    EXIT_BUCKET_DIFFERS,
    EXIT_CONFIG,
    EXIT_COPY_MISMATCH,
    EXIT_CURRENT,
    EXIT_NOTHING_PUBLISHED,
    EXIT_PENDING_RECOVERY,
    EXIT_STALE,
)
from brain_pipeline.corpus.observation import corpus_digest
from brain_pipeline.publishing.local import publish_local
from brain_pipeline.publishing.manifest import PublishManifest, build_manifest
from brain_pipeline.publishing.s3 import publish_s3
from brain_pipeline.utils.digest import sha256_hex
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server
from brain_pipeline_tests.publishing import conftest as publishing
from brain_pipeline_tests.publishing.conftest import AGENT_MODEL, SampleBuild, make_build

# The publishing tests' fixtures: a sample build, an empty publish root, a closed port.
build = publishing.build
publish_root = publishing.publish_root
free_port = publishing.free_port


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    (root / "aws-tutor").mkdir(parents=True)
    (root / "aws-tutor" / "vpc.md").write_text("# VPC\n\nA virtual private cloud is a network.\n")
    (root / "python-tutor").mkdir()
    (root / "python-tutor" / "lists.md").write_text("Lists are mutable sequences in Python.\n")
    return root


def publish_from(build: SampleBuild, root: Path, corpus: Path) -> None:
    manifest = build_manifest(
        build.store,
        build.embeddings,
        build.chunks,
        {"bm25": {"ndcg@10": 0.75}},
        corpus_digest(corpus),
        "run-42",
    )
    publish_local(
        build.store,
        build.embeddings,
        root,
        agent_query_model=AGENT_MODEL,
        manifest=manifest,
    )


def status(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["status", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_nothing_published(publish_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = status(capsys, "--root", str(publish_root))
    assert code == 1
    assert "nothing published" in err and str(publish_root) in err


def test_shows_what_is_live(
    build: SampleBuild, publish_root: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (publish_root / "dist").mkdir()
    publish_from(build, publish_root, corpus)
    code, out, _ = status(capsys, "--root", str(publish_root), "--corpus", str(corpus))
    assert code == 0
    assert "run-42" in out
    assert re.search(r"^\s+aws-tutor\s+3$", out, re.MULTILINE)
    assert re.search(r"^\s+python-tutor\s+2$", out, re.MULTILINE)
    assert f"Chunks: {len(build.chunks)}" in out
    assert AGENT_MODEL in out and "coverage 100.0%" in out
    assert "bm25.ndcg@10: 0.75" in out
    assert sha256_hex(build.store_bytes) in out and sha256_hex(build.embeddings_bytes) in out
    assert out.count("matches manifest") == 2
    assert "Corpus: unchanged" in out


def test_json_output(
    build: SampleBuild, publish_root: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish_from(build, publish_root, corpus)
    code, out, _ = status(capsys, "--root", str(publish_root), "--corpus", str(corpus), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["published"] is True
    assert report["manifest"]["chunks_per_area"] == {"aws-tutor": 3, "python-tutor": 2}
    assert report["manifest"]["store"]["sha256"] == sha256_hex(build.store_bytes)
    assert report["corpus"]["state"] == "unchanged"
    assert all(copy["matches"] for copy in report["copies"].values())


def test_json_output_when_nothing_is_published(
    publish_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = status(capsys, "--root", str(publish_root), "--json")
    assert code == 1
    assert json.loads(out)["published"] is False


def test_mtime_only_change_is_not_a_corpus_change(
    build: SampleBuild, publish_root: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish_from(build, publish_root, corpus)
    page = corpus / "aws-tutor" / "vpc.md"
    stat = page.stat()
    os.utime(page, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**10))
    _, out, _ = status(capsys, "--root", str(publish_root), "--corpus", str(corpus), "--json")
    assert json.loads(out)["corpus"]["state"] == "unchanged"


def test_content_change_is_reported(
    build: SampleBuild, publish_root: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish_from(build, publish_root, corpus)
    (corpus / "python-tutor" / "lists.md").write_text("Lists are mutable; tuples are not.\n")
    code, out, _ = status(capsys, "--root", str(publish_root), "--corpus", str(corpus))
    assert code == 2  # stale: a script can tell it from "live and current"
    assert "Corpus: CHANGED" in out


def test_a_copy_that_no_longer_matches_exits_3(
    build: SampleBuild, publish_root: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (publish_root / "dist").mkdir()
    publish_from(build, publish_root, corpus)
    (publish_root / "dist" / "storage" / "knowledge-store.json").write_bytes(b"[]")
    code, out, _ = status(capsys, "--root", str(publish_root), "--corpus", str(corpus))
    assert code == 3
    assert "MISMATCH" in out and "knowledge-store.json" in out


def test_defaults_come_from_the_configuration(
    build: SampleBuild,
    publish_root: Path,
    corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    publish_from(build, publish_root, corpus)
    monkeypatch.chdir(tmp_path)  # no corpus_config.yaml here: built-in defaults + env
    monkeypatch.setenv("BRAIN_PUBLISH_ROOT", str(publish_root))
    monkeypatch.setenv("CURATED_CONTENT_PATH", str(corpus))
    code, out, _ = status(capsys, "--json")
    assert code == 0
    report = json.loads(out)
    assert Path(report["root"]) == publish_root
    assert report["corpus"]["state"] == "unchanged"


def test_the_exit_code_table_is_the_documented_one() -> None:
    from brain_pipeline.cli import status as module

    table = (
        EXIT_CURRENT,
        EXIT_NOTHING_PUBLISHED,
        EXIT_STALE,
        EXIT_COPY_MISMATCH,
        EXIT_PENDING_RECOVERY,
        EXIT_BUCKET_DIFFERS,
    )
    assert table == (0, 1, 2, 3, 4, 5) and EXIT_CONFIG == 64
    for code in table:
        assert f"| {code}    |" in (module.__doc__ or "")
        assert f"  {code}  " in module.DESCRIPTION


def test_an_unreadable_manifest_is_a_mismatch_not_nothing(
    publish_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = publish_root / "src" / "storage"
    storage.mkdir(parents=True)
    (storage / "manifest.json").write_text("{half")
    code, out, err = status(capsys, "--root", str(publish_root))
    assert code == 3 and "unreadable" in out


def test_stale_loses_to_a_mismatch(
    build: SampleBuild, publish_root: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish_from(build, publish_root, corpus)
    (corpus / "python-tutor" / "lists.md").write_text("changed\n")
    (publish_root / "src" / "storage" / "embeddings.bin").write_bytes(b"PATBEMB1")
    code, _, _ = status(capsys, "--root", str(publish_root), "--corpus", str(corpus))
    assert code == 3


@pytest.fixture
def s3_config(s3: MotoS3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> MotoS3Server:
    """The bucket as the configuration names it (environment), with short timeouts."""
    import boto3

    boto3.client("s3").create_bucket(Bucket="brain-status")
    config = tmp_path / "brain.yaml"
    config.write_text(
        "publish:\n  s3:\n    prefix: kb\n    connect_timeout_seconds: 1\n"
        "    read_timeout_seconds: 2\n    deadline_seconds: 5\n"
    )
    monkeypatch.setenv("BRAIN_CONFIG", str(config))
    monkeypatch.setenv("S3_BUCKET_NAME", "brain-status")
    return s3


def _to_bucket(build: SampleBuild, root: Path) -> None:
    live = PublishManifest.from_json((root / "src" / "storage" / "manifest.json").read_bytes())
    publish_s3(build.store, build.embeddings, bucket="brain-status", prefix="kb", manifest=live)


def test_s3_matching_differing_and_unreachable(
    s3_config: MotoS3Server,
    build: SampleBuild,
    publish_root: Path,
    corpus: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    free_port: int,
) -> None:
    publish_from(build, publish_root, corpus)
    args = ("--root", str(publish_root), "--corpus", str(corpus), "--s3")

    code, out, _ = status(capsys, *args)
    assert code == 5 and "no manifest.json in the bucket" in out

    _to_bucket(build, publish_root)
    code, out, _ = status(capsys, *args)
    assert code == 0 and "holds the same set" in out
    assert status(capsys, "--root", str(publish_root), "--corpus", str(corpus))[0] == 0

    other = make_build(salt="elsewhere ")
    publish_s3(other.store, None, bucket="brain-status", prefix="kb")
    code, out, _ = status(capsys, *args, "--json")
    report = json.loads(out)
    assert code == 5 and report["s3"]["reachable"] is True
    assert any("store differs" in p for p in report["s3"]["problems"])

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{free_port}")
    code, out, _ = status(capsys, *args)
    assert code == 5 and "UNREACHABLE" in out and "cannot connect" in out


def test_s3_without_a_bucket_is_reported(
    build: SampleBuild,
    publish_root: Path,
    corpus: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    publish_from(build, publish_root, corpus)
    monkeypatch.chdir(tmp_path)
    code, out, _ = status(capsys, "--root", str(publish_root), "--corpus", str(corpus), "--s3")
    assert code == 5 and "no bucket configured" in out


def test_an_unreadable_configuration_exits_64(
    publish_root: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("publish: [not, a, mapping]\n")
    monkeypatch.setenv("BRAIN_CONFIG", str(bad))
    code, _, err = status(capsys)
    assert code == 64 and "brain-pipeline status" in err


def test_s3_a_malformed_or_torn_bucket_is_one_line_and_exit_5(
    s3_config: MotoS3Server,
    build: SampleBuild,
    publish_root: Path,
    corpus: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The reported faults: `"objects": {"knowledge-store.json": "oops"}` crashed status
    with a TypeError; a fixed name from another publication was "the same set"."""
    import boto3

    publish_from(build, publish_root, corpus)
    live = PublishManifest.from_json((publish_root / "src/storage/manifest.json").read_bytes())
    publish_s3(
        build.store, build.embeddings, bucket="brain-status", prefix="kb", manifest=live,
        include_embeddings=True,
    )  # fmt: skip
    args = ("--root", str(publish_root), "--corpus", str(corpus), "--s3")
    assert status(capsys, *args)[0] == 0
    client = boto3.client("s3")
    other = make_build({"aws-tutor": 9}, salt="other ")
    client.put_object(Bucket="brain-status", Key="kb/embeddings.bin", Body=other.embeddings_bytes)

    code, out, err = status(capsys, *args)
    (line,) = [row for row in out.splitlines() if row.startswith("S3:")]
    assert code == EXIT_BUCKET_DIFFERS and "the same set" not in out
    assert line.startswith("S3: DIFFERS: the fixed name kb/embeddings.bin holds other bytes")

    body = client.get_object(Bucket="brain-status", Key="kb/manifest.json")["Body"]
    manifest = json.loads(body.read())
    manifest["objects"] = {"knowledge-store.json": "oops"}
    client.put_object(Bucket="brain-status", Key="kb/manifest.json", Body=json.dumps(manifest))
    code, out, err = status(capsys, *args)
    (line,) = [row for row in out.splitlines() if row.startswith("S3:")]
    assert code == EXIT_BUCKET_DIFFERS and "Traceback" not in out + err
    assert line == (
        "S3: DIFFERS: the bucket's manifest.json is unreadable: "
        'objects."knowledge-store.json" is not an object'
    )


def test_s3_sends_the_configured_bucket_owner_with_every_request(
    s3_config: MotoS3Server,
    build: SampleBuild,
    publish_root: Path,
    corpus: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """moto accepts any owner, so the requests the real client sends are watched (botocore's
    before-send on the client status makes; the factory itself is the real one)."""
    from brain_pipeline.publishing import s3_client
    from brain_pipeline.publishing.s3_client import make_s3_client

    sent: list[tuple[str, object]] = []

    def watched(*args: Any, **kwargs: Any) -> Any:
        client = make_s3_client(*args, **kwargs)

        def record(request: Any, event_name: str, **_: Any) -> None:
            sent.append((event_name, request.headers.get("x-amz-expected-bucket-owner")))

        client.meta.events.register("before-send.s3", record)
        return client

    config = Path(os.environ["BRAIN_CONFIG"])
    config.write_text(config.read_text() + "    expected_bucket_owner: '123456789012'\n")
    publish_from(build, publish_root, corpus)
    _to_bucket(build, publish_root)
    monkeypatch.setattr(s3_client, "make_s3_client", watched)  # the clients status makes

    code, _, _ = status(capsys, "--root", str(publish_root), "--corpus", str(corpus), "--s3")

    assert code == 0 and len(sent) >= 3
    assert {owner for _, owner in sent} == {b"123456789012"}
