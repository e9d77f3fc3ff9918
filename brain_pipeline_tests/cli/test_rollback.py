"""`brain-pipeline rollback` through `main()` on a real pipeline: src, dist and moto S3.

Pins the exit statuses the command documents (0 done, 1 refused with nothing changed,
2 configuration unreadable, 3 failed part-way), what it prints, and that `--release`
ends the hold so the held build is published again.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from brain_pipeline.cli import main
from brain_pipeline.evaluation.baseline import load_baseline
from brain_pipeline_tests.defs.conftest import IMPOSSIBLE, Project, edit_corpus
from brain_pipeline_tests.defs.rollback_project import (
    bucket_object,
    live_everywhere,
    make_rollback_project,
    publications,
    publish_twice,
)
from brain_pipeline_tests.evaluation.helpers import memory_at
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server
from brain_pipeline_tests.peers.notify_peers import free_port


@pytest.fixture
def project(tmp_path: Path, s3: MotoS3Server, monkeypatch: pytest.MonkeyPatch) -> Project:
    return make_rollback_project(tmp_path, monkeypatch)


def test_rollback_restores_the_earlier_bytes_everywhere_and_holds_the_bad_one(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = publish_twice(project)
    assert first != second and set(live_everywhere(project)) == {second}
    listed = publications(capsys)
    assert [p["id"] for p in listed["publications"]] == [2, 1]
    assert all(p["s3"] and p["trigger"] for p in listed["publications"])

    capsys.readouterr()
    assert main(["rollback"]) == 0
    assert "publication #1 is live again as #3" in capsys.readouterr().out
    assert set(live_everywhere(project)) == {first}
    chunks = json.loads((project.published("src") / "knowledge-store.json").read_bytes())
    assert isinstance(chunks, list) and all({"id", "content", "area"} <= set(c) for c in chunks)
    listed = publications(capsys)
    assert listed["live"] == 3 and listed["hold"] == 2
    assert listed["publications"][0]["restores"] == 1
    assert main(["publications"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("* #3") and "rollback to #1 +S3" in lines[0]
    assert lines[-1].startswith("HELD: publication #2 is held since the rollback")

    # The baseline is the restored publication's evaluation again.
    baseline = load_baseline(memory_at(project.build)).baseline
    assert baseline is not None
    assert baseline.key == listed["publications"][-1]["evaluation"]["key"]

    capsys.readouterr()
    assert main(["status", "--s3"]) == 2  # stale: the corpus moved on, held back
    out = capsys.readouterr().out
    assert "HELD: publication #2" in out and "Publication: #3, a rollback to #1" in out

    # The schedule's run finds the same corpus: it publishes nothing, and says so.
    assert project.materialize().success
    assert set(live_everywhere(project)) == {first}
    assert publications(capsys)["live"] == 3
    event = project.instance.get_latest_materialization_event(dg.AssetKey("published_local"))
    assert event is not None and event.asset_materialization is not None
    assert event.asset_materialization.metadata["status"].value == "held"

    # A corpus change ends the hold: the next run publishes it.
    edit_corpus(project, "Internet gateways connect a VPC to the internet at large.")
    assert project.materialize().success
    third = project.store_file.read_bytes()
    assert third not in (first, second) and set(live_everywhere(project)) == {third}
    listed = publications(capsys)
    assert listed["live"] == 4 and listed["hold"] is None


def test_release_lets_the_held_build_go_out_again(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    _, second = publish_twice(project)
    assert main(["rollback", "--to", "1"]) == 0
    assert main(["rollback", "--release"]) == 0
    assert main(["rollback", "--release"]) == 1  # nothing held any more
    assert project.materialize().success
    assert set(live_everywhere(project)) == {second}


def test_a_rollback_whose_files_are_gone_names_them_and_changes_nothing(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert project.materialize().success
    listed = publications(capsys)
    gone = listed["publications"][0]["store_sha256"]
    edit_corpus(project)
    assert project.materialize().success
    history = publications(capsys)
    before = live_everywhere(project)
    kept = project.build / "state" / "blobs" / "sha256" / gone[:2] / gone
    kept.unlink()

    capsys.readouterr()
    assert main(["rollback"]) == 1
    err = capsys.readouterr().err
    assert "nothing was changed" in err and "1 kept file(s) missing" in err
    assert f"no blob {gone}" in err
    assert live_everywhere(project) == before
    assert publications(capsys) == history
    assert main(["rollback", "--to", "9"]) == 1
    assert "publication #9 is not in the history" in capsys.readouterr().err


def test_an_unreachable_bucket_holds_locally_and_a_second_call_finishes_s3(
    project: Project,
    capsys: pytest.CaptureFixture[str],
    s3: MotoS3Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, second = publish_twice(project)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{free_port()}")
    capsys.readouterr()
    assert main(["rollback"]) == 3
    err = capsys.readouterr().err
    assert "S3 still serves the replaced set" in err and "rollback --to 3" in err
    assert (project.published("src") / "knowledge-store.json").read_bytes() == first
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.endpoint_url)
    assert bucket_object("kb/knowledge-store.json") == second
    assert publications(capsys)["hold"] == 2  # the schedule will not republish it

    capsys.readouterr()
    assert main(["rollback", "--to", "3"]) == 0
    assert "S3 now holds it too" in capsys.readouterr().out
    assert set(live_everywhere(project)) == {first}
    listed = publications(capsys)
    assert listed["live"] == 3 and listed["publications"][0]["s3"]
    assert main(["rollback", "--to", "3"]) == 1  # now done everywhere: already live


def test_an_unreadable_configuration_exits_2_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "corpus_config.yaml"
    broken.write_text("build_dir: [unclosed\n", encoding="utf-8")
    monkeypatch.setenv("BRAIN_CONFIG", str(broken))
    assert main(["rollback"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("brain-pipeline rollback: ") and str(broken) in err


def _live_src(project: Project) -> bytes:
    return (project.published("src") / "knowledge-store.json").read_bytes()


def test_a_forced_publication_comes_back_only_forced_again_with_a_reason(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rollback goes through the publish gate: #1 passed and goes back freely; #2 was
    forced over a failed evaluation and comes back only with --force and a reason (not
    where publish.allow_force is false), and the rollback is recorded as forced."""
    assert project.materialize().success
    first = project.store_file.read_bytes()
    edit_corpus(project)
    project.write_config(**IMPOSSIBLE)
    assert main(["materialize", "--force-publish", "--reason", "hotfix for the demo"]) == 0
    second = project.store_file.read_bytes()
    project.write_config()
    assert set(live_everywhere(project)) == {second}
    assert main(["rollback"]) == 0  # to #1, which passed: freely
    assert set(live_everywhere(project)) == {first}

    capsys.readouterr()
    assert main(["rollback", "--to", "2"]) == 1
    err = capsys.readouterr().err
    assert "rollback to publication #2 refused, nothing was changed" in err
    assert "publication #2 failed on this data: it was forced" in err
    assert "hotfix for the demo" in err and "(set force to override)" in err
    assert main(["rollback", "--to", "2", "--force"]) == 2
    assert "force needs a reason" in capsys.readouterr().err
    project.write_config(**{"publish.allow_force": False})
    assert main(["rollback", "--to", "2", "--force", "--reason", "again"]) == 2
    assert "publish.allow_force: false" in capsys.readouterr().err
    assert set(live_everywhere(project)) == {first}

    project.write_config()
    assert main(["rollback", "--to", "2", "--force", "--reason", "the fix is in #2"]) == 0
    assert set(live_everywhere(project)) == {second}
    listed = publications(capsys)
    assert listed["publications"][0]["restores"] == 2
    assert listed["publications"][0]["forced"]["reason"] == "the fix is in #2"
    assert main(["publications"]) == 0
    assert "FORCED (reason: the fix is in #2)" in capsys.readouterr().out.splitlines()[0]


def test_a_publication_over_the_agents_string_limit_never_comes_back(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """The archived store is measured again by fits_agent_string_limit's rule: past the
    limit the agent cannot load it, and force does not override that."""
    _, second = publish_twice(project)
    project.write_config(**{"publish.agent_string_limit": 100})
    capsys.readouterr()
    assert main(["rollback"]) == 1
    err = capsys.readouterr().err
    assert "rollback to publication #1 refused, nothing was changed" in err
    assert "fits_agent_string_limit failed on this data" in err
    assert main(["rollback", "--to", "1", "--force", "--reason", "please"]) == 1
    assert "(force does not override it)" in capsys.readouterr().err
    assert set(live_everywhere(project)) == {second}
    assert publications(capsys)["live"] == 2
