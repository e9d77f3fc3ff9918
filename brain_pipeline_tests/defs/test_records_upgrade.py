"""Upgrade: a build directory made by main before the ledger (the fixture) is read into
the ledger on the first run, which finds the store current: nothing re-embedded, the
store's record is the imported one (not rebuilt)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import dagster as dg
import pytest

from brain_pipeline.definitions import build_definitions
from brain_pipeline.lib.runner import materialize_selection
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.records import read_record
from brain_pipeline_tests.peers.fake_gemini import FakeGemini

FIXTURE = Path(__file__).parents[1] / "fixtures" / "build-by-main-5d65fac.tar.gz"
KEY = "test-key"


def test_the_first_run_after_the_upgrade_finds_the_store_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(tmp_path, filter="data")
    config = next(tmp_path.rglob("brain.yaml"))
    layout = StateLayout.of(config.parent / "build")
    old_store = (layout.state_dir / "assets" / "knowledge_store.json").read_bytes()
    with FakeGemini(api_key=KEY) as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        monkeypatch.setenv("GEMINI_API_KEY", KEY)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
        outcome = materialize_selection(
            "*",
            definitions=build_definitions(str(config)),
            instance=dg.DagsterInstance.ephemeral(),
        )
        assert outcome.success, outcome.lines
        assert server.stats().texts == 0  # no text embedded again
    assert not (layout.state_dir / "assets").exists()
    store = read_record(layout, "knowledge_store")
    import json

    assert store is not None
    assert store.run_id == json.loads(old_store)["run_id"]  # imported, not rebuilt
