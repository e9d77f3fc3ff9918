"""`brain-pipeline gc` in-process: a summary line, a clear refusal while a run holds the lock."""

from __future__ import annotations

import pytest

from brain_pipeline.cli import main
from brain_pipeline_tests.cli.conftest import Project
from brain_pipeline_tests.state.test_lock import Holder, ledger_lock_path


def test_gc_says_what_it_removed(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gc"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("removed 0 snapshot(s), 0 chunk-cache row(s); state/ ")


def test_gc_waits_for_no_one_when_told_not_to(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.configure("locks: {wait_seconds: 0}\n")
    holder = Holder(ledger_lock_path(project.build), "a-run")
    try:
        assert main(["gc"]) == 75
    finally:
        holder.release()
    err = capsys.readouterr().err
    assert err.startswith("brain-pipeline gc: ") and len(err.strip().splitlines()) == 1


def test_an_unusable_configuration_exits_2(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.config.write_text("build_dir: [not, a, path\n", encoding="utf-8")
    assert main(["gc"]) == 2
    assert capsys.readouterr().err.startswith("brain-pipeline gc: ")


def test_gc_removes_an_unreachable_blob_and_keeps_all_when_the_history_is_unreadable(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    from brain_pipeline.config import load_config, memory_of
    from brain_pipeline.publishing.publication_log import read_history

    memory = memory_of(load_config())
    read_history(memory)  # the history's table exists
    orphan = memory.blobs.put_bytes(b"an evaluation nothing keeps")
    assert main(["gc"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("; 1 unreachable blob(s) removed")
    assert not memory.blobs.has(orphan)

    orphan = memory.blobs.put_bytes(b"another one")
    memory.ledger.execute(
        "INSERT INTO publication_events (kind, pub_id, event) VALUES ('published', 1, '{')"
    )
    assert main(["gc"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("brain-pipeline gc: blobs not collected: ") and "unreadable" in err
    assert memory.blobs.has(orphan)
