"""The run journal on disk: metadata shapes survive, names sort by finish, old ones go,
a damaged one is set aside and reading goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from brain_pipeline.state.layout import StateLayout
from brain_pipeline.steps import run_journal
from brain_pipeline.steps.report import Markdown, RunLink, Table
from brain_pipeline.steps.run_journal import (
    RunJournal,
    StepEntry,
    journal_paths,
    journals_after,
    latest_journal,
    read_journal,
    write_journal,
)


def _run_id(n: int) -> str:
    return f"0000000{n % 10}-0000-4000-8000-{n:012d}"


def journal(n: int, finished: str, metadata: dict[str, Any] | None = None) -> RunJournal:
    steps = [
        StepEntry("corpus", "observation", "ok", data_version=f"digest-{n}"),
        StepEntry(
            "knowledge_store", "asset", "ok", data_version=f"store-{n}", code_version="v3",
            metadata=metadata or {},
        ),
        StepEntry(
            "retrieval_eval", "check", "ok", asset="embeddings", passed=False,
            severity="ERROR", blocking=True, description="nDCG fell",
        ),
        StepEntry("published_local", "asset", "blocked"),
    ]  # fmt: skip
    return RunJournal(
        run_id=_run_id(n), started_at=finished, finished_at=finished,
        launched_by="brain-pipeline materialize", trigger="a person", succeeded=False,
        steps=steps,
    )  # fmt: skip


@pytest.fixture
def layout(tmp_path: Path) -> StateLayout:
    return StateLayout.of(tmp_path / "build")


def test_tables_markdown_and_run_links_survive_writing_and_reading(layout: StateLayout) -> None:
    metadata = {
        "areas": Table([("area", "string"), ("chunks", "int")], [["alpha", 2], ["beta", 5]]),
        "summary": Markdown("**two** areas"),
        "evaluated_in_run": RunLink("run-0001"),
        "nested": {"inner": [RunLink("run-0002"), 3, None]},
        "chunks": 7,
        "share": 0.25,
        "reused": False,
        "path": "/tmp/x",
    }
    written = journal(1, "2026-12-02T09:00:00.250000+00:00", metadata)
    path = write_journal(layout, written)
    read = read_journal(path)
    assert read is not None
    assert read.step("knowledge_store").metadata == metadata  # type: ignore[union-attr]
    assert read == written


def test_a_dataframe_comes_back_as_a_table_with_its_dtypes(layout: StateLayout) -> None:
    frame = pd.DataFrame({"area": ["alpha", "beta"], "chunks": [2, 5], "share": [0.5, 0.5]})
    path = write_journal(layout, journal(1, "2026-12-02T09:00:00+00:00", {"areas": frame}))
    read = read_journal(path)
    assert read is not None
    assert read.step("knowledge_store").metadata["areas"] == Table(  # type: ignore[union-attr]
        [("area", "string"), ("chunks", "int"), ("share", "float")],
        [["alpha", 2, 0.5], ["beta", 5, 0.5]],
    )


def test_file_names_sort_in_the_order_runs_finished(layout: StateLayout) -> None:
    # Written out of order; the run ids sort against the finish times.
    finishes = {
        9: "2026-12-02T09:00:00+00:00",
        1: "2026-12-02T09:00:00.000001+00:00",
        5: "2026-12-02T09:00:00.5+00:00",
        3: "2026-12-02T10:00:00+00:00",
        2: "2026-12-03T08:59:59.999999+00:00",
    }
    for n, finished in finishes.items():
        write_journal(layout, journal(n, finished))
    names = [path.name for path in journal_paths(layout)]
    assert names == sorted(names)
    assert [read_journal(layout.run_journal_dir / name).run_id for name in names] == [  # type: ignore[union-attr]
        _run_id(n) for n in (9, 1, 5, 3, 2)
    ]
    assert latest_journal(layout).run_id == _run_id(2)  # type: ignore[union-attr]


def test_only_the_newest_journals_are_kept(
    layout: StateLayout, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_journal, "KEEP_JOURNALS", 3)
    stranger = layout.run_journal_dir / "notes.txt"
    stranger.parent.mkdir(parents=True)
    stranger.write_text("kept", encoding="utf-8")
    for n in range(5):
        write_journal(layout, journal(n, f"2026-12-02T09:0{n}:00+00:00"))
    kept = [read_journal(p).run_id for p in journal_paths(layout)]  # type: ignore[union-attr]
    assert kept == [_run_id(2), _run_id(3), _run_id(4)]
    assert stranger.read_text(encoding="utf-8") == "kept"


def test_the_default_keeps_a_few_hundred_runs() -> None:
    # The sensor reports at most 20 journals a tick; 200 is ten ticks of backlog.
    assert run_journal.KEEP_JOURNALS >= 100


@pytest.mark.parametrize(
    "damage", [b'{"run_id": "0000', b"\x00\xff garbage", b'{"steps": []}', b"[1, 2]"]
)
def test_a_damaged_journal_is_set_aside_and_reading_goes_on(
    layout: StateLayout, damage: bytes
) -> None:
    first = write_journal(layout, journal(1, "2026-12-02T09:00:00+00:00"))
    last = write_journal(layout, journal(3, "2026-12-02T09:02:00+00:00"))
    torn = layout.run_journal_dir / f"20261202T090100000000Z-{_run_id(2)}.json"
    torn.write_bytes(damage)
    temporary = layout.run_journal_dir / f".{last.name}.abc.tmp"
    temporary.write_bytes(b"half a journal")

    read = list(journals_after(layout, None))
    assert [name for name, _ in read] == [first.name, last.name]
    assert not torn.exists()
    assert torn.with_name(torn.name + ".damaged").read_bytes() == damage
    assert temporary.read_bytes() == b"half a journal"  # not ours to judge: left alone
    assert [name for name, _ in journals_after(layout, first.name)] == [last.name]


def test_a_damaged_newest_journal_leaves_the_one_before_as_the_latest(
    layout: StateLayout,
) -> None:
    write_journal(layout, journal(1, "2026-12-02T09:00:00+00:00"))
    newest = write_journal(layout, journal(2, "2026-12-02T09:01:00+00:00"))
    newest.write_bytes(newest.read_bytes()[:40])
    assert latest_journal(layout).run_id == _run_id(1)  # type: ignore[union-attr]
    assert not newest.exists()


def test_no_directory_means_no_journals(layout: StateLayout) -> None:
    assert journal_paths(layout) == []
    assert list(journals_after(layout, None)) == []
    assert latest_journal(layout) is None
