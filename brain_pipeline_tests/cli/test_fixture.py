"""`brain-pipeline fixture check|repair|label` and `brain-pipeline history`, in-process."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline.corpus.store import Chunk
from brain_pipeline.evaluation.fixture.model import load_fixture
from brain_pipeline_tests.evaluation.fixture.repair_scenarios import (
    SampleProject,
    edit_paragraph,
    labelled_chunks,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)
T1 = datetime(2026, 3, 2, tzinfo=UTC)


@pytest.fixture
def sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SampleProject:
    project = SampleProject.create(tmp_path)
    monkeypatch.setenv("BRAIN_CONFIG", str(project.config))
    monkeypatch.chdir(tmp_path)
    return project


def _edit_one(sample: SampleProject, kind: str) -> tuple[Chunk, str | None]:
    """Build, edit the first labelled paragraph with `kind`, rebuild; (old chunk, new id)."""
    before = sample.build_store(T0)
    chunk = labelled_chunks(load_fixture(sample.fixture), before)[0]
    edit = edit_paragraph(sample.corpus, chunk, kind, random.Random(1))
    sample.build_store(T1)
    return chunk, edit.expected


def test_check_is_clean_then_names_the_old_text_and_source(
    sample: SampleProject, capsys: pytest.CaptureFixture[str]
) -> None:
    sample.build_store(T0)
    assert main(["fixture", "check"]) == 0
    assert "no stale labels" in capsys.readouterr().out
    chunk, _ = _edit_one(sample, "typo")
    assert main(["fixture", "check"]) == 1
    out = capsys.readouterr().out
    assert f"{chunk.id}  query " in out and f"was in {chunk.source}" in out
    assert "  | " + chunk.content.splitlines()[0] in out
    assert main(["fixture", "check", "--json"]) == 1
    (row,) = json.loads(capsys.readouterr().out)["stale"]
    assert (row["id"], row["old_text"], row["last_seen"]) == (
        chunk.id,
        chunk.content,
        "2026-03-01T00:00:00Z",
    )


def test_check_falls_back_to_the_published_store(
    sample: SampleProject, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sample.build_store(T0, record=False)
    published = sample.root / "agent" / "src" / "storage"
    published.mkdir(parents=True)
    (published / "knowledge-store.json").write_bytes(
        (sample.build / "knowledge-store.json").read_bytes()
    )
    chunk = labelled_chunks(load_fixture(sample.fixture), before)[0]
    edit_paragraph(sample.corpus, chunk, "rewrap", random.Random(1))
    sample.build_store(T1, record=False)
    assert main(["fixture", "check"]) == 1
    assert f"was in {chunk.source}" in capsys.readouterr().out


def test_repair_proposes_then_writes(
    sample: SampleProject, capsys: pytest.CaptureFixture[str]
) -> None:
    chunk, new_id = _edit_one(sample, "sentence")
    original = sample.fixture.read_bytes()
    assert main(["fixture", "repair"]) == 1
    out = capsys.readouterr().out
    assert "[apply]" in out and f"new {new_id}" in out
    assert "apply the automatic repairs: brain-pipeline fixture repair --write" in out
    assert sample.fixture.read_bytes() == original
    assert main(["fixture", "repair", "--min-similarity", "1.5"]) == 2
    capsys.readouterr()
    assert main(["fixture", "repair", "--write"]) == 0
    err = capsys.readouterr().err
    assert "remapped 1 id(s)" in err
    assert (sample.fixture.parent / "retrieval-eval.json.bak").read_bytes() == original
    assert f'"{new_id}"' in sample.fixture.read_text() and chunk.id not in json.dumps(
        json.loads(sample.fixture.read_text())["queries"]
    )
    assert main(["fixture", "check"]) == 0


def test_repair_never_applies_a_deletion(
    sample: SampleProject, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit_one(sample, "delete")
    original = sample.fixture.read_bytes()
    assert main(["fixture", "repair", "--write", "--json"]) == 1
    proposal = json.loads(capsys.readouterr().out)
    assert proposal["remaps"] == {} and proposal["rows"][0]["verdict"] == "no match"
    assert len(proposal["rows"][0]["candidates"]) == 3
    assert sample.fixture.read_bytes() == original


def test_history_explains_an_id(sample: SampleProject, capsys: pytest.CaptureFixture[str]) -> None:
    chunk, _ = _edit_one(sample, "typo")
    assert main(["history", chunk.id]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{chunk.id}  {chunk.area}: {chunk.source}")
    assert "last live 2026-03-01T00:00:00Z (no longer live)" in out and chunk.content in out
    assert main(["history", "feedfacecafe"]) == 1
    assert "not in the chunk history" in capsys.readouterr().err
    assert main(["history", chunk.id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == chunk.content


def test_label_shows_both_lists_and_adds_labels(
    sample: SampleProject, capsys: pytest.CaptureFixture[str]
) -> None:
    sample.build_store(T0)
    query = "what does a NAT gateway do for a private subnet"
    assert main(["fixture", "label", query, "--area", "aws-tutor", "--json", "--limit", "5"]) == 0
    found = json.loads(capsys.readouterr().out)
    ids = [c["id"] for c in found["candidates"]]
    assert 5 <= len(ids) <= 10 and found["candidates"][0]["bm25_rank"] == 1
    assert found["hybrid_mode"] == "lexical"  # provider none: hybrid is BM25, and says so
    assert main(["fixture", "label", query, "--area", "aws-tutor", "--limit", "5"]) == 0
    text = capsys.readouterr().out
    assert f"   1      1  {ids[0]}  " in text and "--add ID" in text

    original = sample.fixture.read_text()
    assert main(["fixture", "label", query, "--area", "aws-tutor", "--add", ids[0]]) == 0
    assert "appended a new query" in capsys.readouterr().out
    assert main(["fixture", "label", query, "--area", "aws-tutor", "--add", ids[1]]) == 0
    assert "extended the existing query with 1 id(s)" in capsys.readouterr().out
    added = load_fixture(sample.fixture).queries[-1]
    assert (added.query, added.area, added.relevant) == (query, "aws-tutor", (ids[0], ids[1]))
    last_query_end = original.rindex("}\n  ]") + 1  # everything up to it is untouched
    assert sample.fixture.read_text().startswith(original[:last_query_end] + ",\n    {\n")

    assert main(["fixture", "label", query, "--area", "aws-tutor", "--add", "feedfacecafe"]) == 2
    assert "not live chunk ids of area 'aws-tutor': feedfacecafe" in capsys.readouterr().err
    assert main(["fixture", "label", query, "--area", "nowhere"]) == 2
    assert "no area 'nowhere'" in capsys.readouterr().err


def test_fixture_and_history_commands_do_not_import_dagster(sample: SampleProject) -> None:
    import os
    import subprocess
    import sys

    chunk, _ = _edit_one(sample, "typo")
    probe = (
        "import sys; from brain_pipeline.cli import main; "
        f"codes = [main(['fixture', 'repair']), main(['history', {chunk.id!r}])]; "
        "assert not [m for m in sys.modules if m.split('.')[0] == 'dagster'], 'dagster'; "
        "sys.exit(10 * codes[0] + codes[1])"
    )
    env = {**os.environ, "BRAIN_CONFIG": str(sample.config)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 10, done.stderr  # repair: 1 (proposal not written), history: 0
