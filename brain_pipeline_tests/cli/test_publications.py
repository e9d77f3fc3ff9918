"""`brain-pipeline publications`: the history, newest first, as text and as JSON.

The history is made by the functions a run uses (`publish_local`,
`steps.publications.record_in_history`, `steps.rollback.rollback`), in plain Python:
two publications, then a rollback to the first (which holds the second).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline.cli import main
from brain_pipeline.config import BrainConfig
from brain_pipeline.publishing.local import publish_local
from brain_pipeline.publishing.manifest import build_manifest
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.steps.publications import record_in_history
from brain_pipeline.steps.rollback import rollback
from brain_pipeline_tests.publishing.conftest import AGENT_MODEL, make_build


class _Quiet:
    def info(self, message: str) -> None: ...

    def warning(self, message: str) -> None: ...


def _config(base: Path) -> BrainConfig:
    return BrainConfig.model_validate(
        {
            "build_dir": str(base / "build"),
            "publish": {"root": str(base / "agent"), "agent_query_model": AGENT_MODEL},
            "evaluation": {"fixture": str(base / "no-fixture.json")},
        }
    )


def _two_publications_and_a_rollback(base: Path) -> BrainConfig:
    cfg = _config(base)
    layout = StateLayout.of(cfg.build_dir)
    for n, salt in enumerate(("good ", "bad "), start=1):
        build = make_build(salt=salt)
        manifest = build_manifest(
            build.store, build.embeddings, None, None, f"corpus{n}", f"run{n}",
            published_at=f"2026-01-0{n}T03:00:00Z",
        )  # fmt: skip
        report = publish_local(
            build.store, build.embeddings, cfg.publish_root(),
            agent_query_model=AGENT_MODEL, manifest=manifest,
        )  # fmt: skip
        record_in_history(cfg, report, None, run_id=f"run{n}", trigger="test", log=_Quiet())
    # Recorded without an evaluation: only a forced rollback brings #1 back (the gate).
    rollback(
        cfg, layout, to=None, run_id="run3", trigger="by a test", log=_Quiet(), upload=None,
        force=True, reason="restore the good one",
    )  # fmt: skip
    return cfg


def _listed(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["publications", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_lists_newest_first_with_the_live_one_and_the_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _two_publications_and_a_rollback(tmp_path)
    code, out, _ = _listed(capsys, "--json", "--build-dir", str(cfg.build_dir))
    assert code == 0
    listed: dict[str, Any] = json.loads(out)
    assert [p["id"] for p in listed["publications"]] == [3, 2, 1]
    assert [p["kind"] for p in listed["publications"]] == ["rollback", "published", "published"]
    assert listed["publications"][0]["restores"] == 1
    assert listed["publications"][0]["trigger"] == "by a test"
    assert listed["publications"][0]["store_sha256"] == listed["publications"][2]["store_sha256"]
    assert listed["live"] == 3 and listed["hold"] == 2


def test_text_marks_the_live_publication_and_names_the_hold_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _two_publications_and_a_rollback(tmp_path)
    code, out, _ = _listed(capsys, "--build-dir", str(cfg.build_dir))
    assert code == 0
    lines = out.splitlines()
    assert [line[:4] for line in lines[:3]] == ["* #3", "  #2", "  #1"]
    assert "rollback to #1" in lines[0] and "(by a test, run run3)" in lines[0]
    assert lines[0].endswith("  FORCED (reason: restore the good one)")
    assert "FORCED" not in lines[1] + lines[2]
    bad = make_build(salt="bad ").store.sha256
    assert f"  published  store {bad[:12]}  no evaluation  (test, run run2)" in lines[1]
    assert lines[3].startswith("HELD: publication #2 is held since the rollback")
    assert len(lines) == 4


def test_the_build_directory_comes_from_the_configuration_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _two_publications_and_a_rollback(tmp_path)
    config = tmp_path / "corpus_config.yaml"
    config.write_text(f"build_dir: {cfg.build_dir}\n", encoding="utf-8")
    monkeypatch.setenv("BRAIN_CONFIG", str(config))
    code, out, _ = _listed(capsys, "--json")
    assert code == 0 and json.loads(out)["live"] == 3


def test_an_empty_history_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _listed(capsys, "--build-dir", str(tmp_path / "build"))
    assert (code, out) == (0, f"no publications recorded in {tmp_path / 'build'}\n")
    code, out, _ = _listed(capsys, "--json", "--build-dir", str(tmp_path / "build"))
    assert json.loads(out) == {"publications": [], "live": None, "hold": None}


def test_a_damaged_history_exits_2_naming_the_file_and_leaves_it_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A history from before the ledger is read in once; a damaged one is never replaced.
    build = tmp_path / "build"
    record = StateLayout.of(build).publications_record
    record.parent.mkdir(parents=True)
    record.write_bytes(b'{"format": 1, "events": [{"kind": "publ')
    damaged = record.read_bytes()
    code, out, err = _listed(capsys, "--build-dir", str(build))
    assert (code, out) == (2, "")
    assert err.startswith("brain-pipeline publications: ") and str(record) in err
    assert "\n" not in err.rstrip("\n")
    assert record.read_bytes() == damaged
