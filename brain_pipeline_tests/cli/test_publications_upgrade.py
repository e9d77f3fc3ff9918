"""Nothing lost on upgrade (issue 41): a project folder made by main before the ledger
(`fixtures/build-by-main-5d65fac.tar.gz`, two publications) read by the new code. Its
history and archived files are read into the ledger and blobs once, by the first command
that reads them; `publications` lists both and `rollback --to 1` restores #1's bytes,
on the default (SQLite, a local folder) and on a shared PostgreSQL ledger with S3 blobs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline.utils.digest import file_sha256


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
