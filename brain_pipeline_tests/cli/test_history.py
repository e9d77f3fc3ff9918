"""`brain-pipeline history ID`: the chunk history explained, and its three exit codes."""

from __future__ import annotations

import json
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline.corpus.chunk_history import record_store
from brain_pipeline.corpus.jscompat import json_stringify, parse_json
from brain_pipeline.corpus.store import Chunk, chunk_id
from brain_pipeline.state.layout import StateLayout

T0 = datetime(2026, 3, 1, tzinfo=UTC)
T1 = datetime(2026, 3, 2, 12, tzinfo=UTC)

GONE = "NAT gateways let private subnets reach the internet."
KEPT = "Route tables decide where traffic goes."


def _chunk(text: str, heading: object) -> Chunk:
    return Chunk(chunk_id(text), text, "aws-tutor", "aws/vpc.md", heading)


@pytest.fixture
def build(tmp_path: Path) -> Path:
    """Two recorded stores: GONE lived only in the first, KEPT in both."""
    layout = StateLayout.of(tmp_path)
    record_store(layout, [_chunk(GONE, "NAT"), _chunk(KEPT, 3)], T0)
    record_store(layout, [_chunk(KEPT, 3)], T1)
    return tmp_path


def test_a_chunk_no_longer_live_is_explained(
    build: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = chunk_id(GONE)
    assert main(["history", f" {gone.upper()} ", "--build-dir", str(build)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{gone}  aws-tutor: aws/vpc.md § NAT"
    assert lines[1] == "first seen 2026-03-01T00:00:00Z, last live 2026-03-01T00:00:00Z " + (
        "(no longer live)"
    )
    assert lines[3] == GONE


def test_a_live_chunk_with_a_number_heading(
    build: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["history", chunk_id(KEPT), "--build-dir", str(build)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("aws/vpc.md § 3")
    assert lines[1] == (
        "first seen 2026-03-01T00:00:00Z, last live 2026-03-02T12:00:00Z "
        "(live in the latest recorded store)"
    )


def test_json_output_is_the_whole_entry(build: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", chunk_id(GONE), "--build-dir", str(build), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "id": chunk_id(GONE),
        "area": "aws-tutor",
        "source": "aws/vpc.md",
        "heading": "NAT",
        "first_seen": "2026-03-01T00:00:00Z",
        "last_seen": "2026-03-01T00:00:00Z",
        "live_in_latest": False,
        "text": GONE,
    }


def test_an_unknown_id_exits_1_and_says_what_the_history_holds(
    build: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["history", "feedfacecafe", "--build-dir", str(build)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (
        f"brain-pipeline history: feedfacecafe is not in the chunk history of {build} "
        "(2 ids from 2 recorded store(s))"
    )


def test_the_build_dir_defaults_to_the_configuration(
    build: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "corpus_config.yaml"
    config.write_text(f"build_dir: {build}\nembedding:\n  provider: none\n")
    monkeypatch.setenv("BRAIN_CONFIG", str(config))
    assert main(["history", chunk_id(KEPT)]) == 0
    assert KEPT in capsys.readouterr().out


def test_an_unusable_configuration_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BRAIN_CONFIG", str(tmp_path / "missing.yaml"))
    assert main(["history", chunk_id(KEPT)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("brain-pipeline history: ") and "missing.yaml" in err


def test_a_damaged_history_is_set_aside_not_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = StateLayout.of(tmp_path)
    layout.history_dir.mkdir(parents=True)
    damaged = b"not a database" * 100
    (layout.history_dir / "chunks.sqlite").write_bytes(damaged)
    assert main(["history", chunk_id(KEPT), "--build-dir", str(tmp_path)]) == 1
    assert "(0 ids from 0 recorded store(s))" in capsys.readouterr().err
    assert (layout.history_dir / "chunks.sqlite.damaged").read_bytes() == damaged


def test_a_heading_nested_thousands_deep_is_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A roadmap title nested 3,000 arrays deep is a heading the ingest now keeps (the
    original did); Python's json recurses, so the entry must still print."""
    deep: object = "t"
    for _ in range(3_000):
        deep = [deep]
    record_store(StateLayout.of(tmp_path), [_chunk(KEPT, deep)], T0)
    assert main(["history", chunk_id(KEPT), "--build-dir", str(tmp_path), "--json"]) == 0
    heading = parse_json(capsys.readouterr().out)["heading"]
    assert json_stringify(heading) == json_stringify(deep)  # `==` on lists recurses too
    assert main(["history", chunk_id(KEPT), "--build-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("[" * 3_000 + '"t"' + "]" * 3_000)


def test_the_history_of_a_build_directory_made_before_the_ledger_is_kept(
    old_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing lost on upgrade: every id the old history file knew is explained as it
    was, read into the ledger once (the file is gone after the first command)."""
    import sqlite3
    import zlib

    old_file = old_project / "build" / "state" / "history" / "chunks.sqlite"
    with closing(sqlite3.connect(old_file)) as conn:
        rows = conn.execute(
            "SELECT s.id, t.text, s.area, s.source, s.first_seen, s.live FROM seen s "
            "JOIN texts t ON t.id = s.id ORDER BY s.id"
        ).fetchall()
    assert rows
    for key, text, area, source, first_seen, live in rows:
        assert main(["history", key, "--json"]) == 0, capsys.readouterr().err
        entry = json.loads(capsys.readouterr().out)
        assert entry["text"] == zlib.decompress(text).decode("utf-8")
        assert (entry["area"], entry["source"]) == (area, source)
        assert (entry["first_seen"], entry["live_in_latest"]) == (first_seen, bool(live))
        assert not old_file.exists()
