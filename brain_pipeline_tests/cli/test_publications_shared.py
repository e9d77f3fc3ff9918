"""Publications shared by fresh workers (issue 41): two workers, each with its own empty
build directory and Dagster home, sharing only a PostgreSQL ledger and an S3 bucket
(moto), driven through `main()`: the history, `status` and `rollback --to` answer the
same from either, and one worker's S3 clean-up keeps the other's generations."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from brain_pipeline.cli import main
from brain_pipeline_tests.defs.conftest import Project, edit_corpus, make_project, make_tiny_project
from brain_pipeline_tests.defs.rollback_project import BUCKET, live_everywhere, publications
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server
from brain_pipeline_tests.peers.postgres import PostgresServer
from brain_pipeline_tests.state.conftest import postgres_server, postgres_url  # noqa: F401

_databases = itertools.count()


def _worker(project: Project, monkeypatch: pytest.MonkeyPatch) -> Project:
    """Point the command line at this worker: its config and its own Dagster home."""
    monkeypatch.setenv("BRAIN_CONFIG", str(project.config_path))
    monkeypatch.setenv("DAGSTER_HOME", str(project.root / "dagster-home"))
    return project


@pytest.fixture
def workers(
    tmp_path: Path,
    s3: MotoS3Server,
    postgres_server: PostgresServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Project, Project]:
    database = postgres_server.create_database(f"shared_pubs_{next(_databases)}")
    monkeypatch.setenv("BRAIN_STATE_LEDGER", postgres_url(postgres_server, database))
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    client.create_bucket(Bucket="brain-state")
    monkeypatch.setenv("BRAIN_STATE_BLOBS", "s3://brain-state/team/state")
    a = make_tiny_project(tmp_path / "a")
    (tmp_path / "b").mkdir()
    b = make_project(tmp_path / "b", a.corpus, Path(a.settings["evaluation"]["fixture"]))
    for project in (a, b):
        (project.publish_root / "dist").mkdir(parents=True)
        project.settings["publish"]["s3"] = {"bucket": BUCKET, "prefix": "kb"}
        project.settings["publish"]["keep_generations"] = 3
        project.write_config()
        (project.root / "dagster-home").mkdir()
    return a, b


def _status(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    main(["status", "--json"])
    return dict(json.loads(capsys.readouterr().out)["history"])


def _keys() -> set[str]:
    listed = boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="kb/objects/")
    return {str(o["Key"]) for o in listed.get("Contents", [])}


def test_fresh_workers_share_history_clean_up_and_rollback(
    workers: tuple[Project, Project],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = workers
    _worker(a, monkeypatch)
    assert a.materialize().success
    first = a.store_file.read_bytes()
    edit_corpus(a)
    assert a.materialize().success
    listed = publications(capsys)
    first_key = listed["publications"][1]["s3"]["objects"]["knowledge-store.json"]
    assert [p["id"] for p in listed["publications"]] == [2, 1] and first_key in _keys()

    _worker(b, monkeypatch)
    assert publications(capsys) == listed  # the same history on a worker that made none
    edit_corpus(b, "Internet gateways connect a VPC to the internet at large.")
    assert b.materialize().success
    after_b = publications(capsys)
    assert [p["id"] for p in after_b["publications"]] == [3, 2, 1]
    # B's clean-up kept A's generations (the shared history keeps them).
    kept = {p["s3"]["objects"]["knowledge-store.json"] for p in after_b["publications"]}
    assert first_key in kept and kept <= _keys()

    # A rollback on B to a publication A made: the files come from the shared blobs.
    assert main(["rollback", "--to", "1"]) == 0
    assert set(live_everywhere(b)) == {first}
    after_rollback = publications(capsys)
    assert after_rollback["live"] == 4 and after_rollback["hold"] == 3
    on_b = _status(capsys)

    _worker(a, monkeypatch)  # A sees the same history, live publication and hold
    assert publications(capsys) == after_rollback
    assert _status(capsys) == on_b and on_b["live"]["id"] == 4
