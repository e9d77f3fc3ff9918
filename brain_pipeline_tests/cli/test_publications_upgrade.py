"""Nothing lost on upgrade (issue 41): a project folder made by main before the ledger
(`fixtures/build-by-main-5d65fac.tar.gz`, two publications) read by the new code. Its
history and archived files are read into the ledger and blobs once, by the first command
that reads them; `publications` lists both and `rollback --to 1` restores #1's bytes,
on the default (SQLite, a local folder) and on a shared PostgreSQL ledger with S3 blobs."""

from __future__ import annotations

import itertools
import json
import tarfile
from pathlib import Path

import boto3
import pytest

from brain_pipeline.cli import main
from brain_pipeline.utils.digest import file_sha256
from brain_pipeline_tests.state.conftest import postgres_server, postgres_url  # noqa: F401

FIXTURE = Path(__file__).parents[1] / "fixtures" / "build-by-main-5d65fac.tar.gz"
_databases = itertools.count()


@pytest.fixture(params=["default", "postgresql+s3"])
def old_project(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(tmp_path / "project", filter="data")
    monkeypatch.setenv("BRAIN_CONFIG", str(tmp_path / "project" / "brain.yaml"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster-home"))
    (tmp_path / "dagster-home").mkdir()
    if request.param != "default":
        server = request.getfixturevalue("postgres_server")
        database = server.create_database(f"upgrade_{next(_databases)}")
        monkeypatch.setenv("BRAIN_STATE_LEDGER", postgres_url(server, database))
        request.getfixturevalue("s3")
        boto3.client("s3").create_bucket(Bucket="brain-state")
        monkeypatch.setenv("BRAIN_STATE_BLOBS", "s3://brain-state/team/state")
    return tmp_path / "project"


def _listed(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    capsys.readouterr()
    assert main(["publications", "--json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_the_old_history_is_listed_and_rollback_to_1_works(
    old_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = json.loads((old_project / "build" / "state" / "publications.json").read_bytes())
    listed = _listed(capsys)
    pubs = listed["publications"]
    assert isinstance(pubs, list) and [p["id"] for p in pubs] == [2, 1]
    assert [p["store_sha256"] for p in reversed(pubs)] == [
        e["store_sha256"] for e in old["events"]
    ]
    assert listed["live"] == 2
    # Read in once: the old files are no longer what the history is read from, and the
    # old archive's files live on as blobs only.
    (old_project / "build" / "state" / "publications.json").unlink()
    assert not (old_project / "build" / "state" / "published" / "objects").exists()
    assert _listed(capsys) == listed

    capsys.readouterr()
    assert main(["rollback", "--to", "1"]) == 0, capsys.readouterr().err
    live = old_project / "agent" / "src" / "storage"
    first = pubs[1]

    assert file_sha256(live / "knowledge-store.json") == first["store_sha256"]
    assert file_sha256(live / "embeddings.bin") == first["embeddings_sha256"]
    after = _listed(capsys)
    assert (after["live"], after["hold"]) == (3, 2)
    assert not list((old_project / "build" / "state" / "published").iterdir())  # no copies left
