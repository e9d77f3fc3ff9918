"""The up-to-date check behind `materialize` with nothing to do (issue #26, item 1).

Each test starts from a real successful full run (in-process, the CLI's own path), then
changes one input and asks the pure core whether a run could change anything. Every
input that must trigger a run does; an untouched build is current.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from brain_pipeline.cli import main
from brain_pipeline.config import load_config, memory_of
from brain_pipeline.corpus.store import chunk_id
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.steps import up_to_date
from brain_pipeline.steps.up_to_date import check, recorded_run, source_digest
from brain_pipeline_tests.tiny_corpus import PARAGRAPHS, write_tiny_corpus


@dataclass
class Built:
    root: Path
    corpus: Path
    config: Path
    fixture: Path
    publish_root: Path
    run_id: str

    @property
    def layout(self) -> StateLayout:
        return StateLayout.of(self.root / "build")

    def verdict(self) -> up_to_date.UpToDate:
        return check(load_config())

    def record_text(self) -> str | None:
        """The record's row in the ledger, as stored (None: no record)."""
        rows = memory_of(load_config()).ledger.query(
            "SELECT body FROM up_to_date WHERE name = ?", (up_to_date.RECORD,)
        )
        return str(rows[0][0]) if rows else None


def _write_config(built_root: Path, corpus: Path, fixture: Path, **extra: object) -> Path:
    config = built_root / "corpus_config.yaml"
    sections: dict[str, object] = {
        "corpus": {"path": str(corpus), "candidates": []},
        "build_dir": str(built_root / "build"),
        "embedding": {"provider": "none"},
        "evaluation": {"fixture": str(fixture), "thresholds": {}},
        "publish": {"root": str(built_root / "agent")},
        "schedule": {"enabled": False, "sensor_enabled": False},
        **extra,
    }
    config.write_text(yaml.safe_dump(sections), encoding="utf-8")
    return config


@pytest.fixture
def built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Built]:
    corpus = tmp_path / "corpus"
    write_tiny_corpus(corpus)
    fixture = tmp_path / "fixture.json"
    fixture.write_text(
        json.dumps(
            {
                "queries": [
                    {
                        "query": "stateful firewalls",
                        "area": "networks",
                        "relevant": [chunk_id(PARAGRAPHS["networks"][2])],
                    }
                ]
            }
        ),
        encoding="utf-8",
    )
    config = _write_config(tmp_path, corpus, fixture)
    monkeypatch.setenv("BRAIN_CONFIG", str(config))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.chdir(tmp_path)
    assert main(["materialize"]) == 0
    run_id = recorded_run(memory_of(load_config()).ledger)
    assert run_id is not None
    yield Built(tmp_path, corpus, config, fixture, tmp_path / "agent", run_id)


def test_an_untouched_build_is_current_and_names_its_run(built: Built) -> None:
    verdict = built.verdict()
    assert verdict.current, verdict.reason
    manifest = json.loads((built.publish_root / "src/storage/manifest.json").read_bytes())
    assert verdict.message() == (
        f"up to date: nothing changed since run {built.run_id} "
        f"(published {manifest['published_at']})"
    )


def test_a_touch_alone_is_no_change(built: Built) -> None:
    path = built.corpus / "networks" / "notes.md"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert built.verdict().current


def test_a_corpus_edit_triggers_a_run(built: Built) -> None:
    with (built.corpus / "networks" / "notes.md").open("a", encoding="utf-8") as handle:
        handle.write("\n\nA route table says where packets leave the subnet.")
    verdict = built.verdict()
    assert not verdict.current and verdict.reason == "the corpus changed"


def test_a_new_file_triggers_a_run(built: Built) -> None:
    (built.corpus / "databases" / "more.md").write_text("# More\n\nReplicas copy the log.")
    assert built.verdict().reason == "the corpus changed"


def test_a_new_skipped_file_triggers_a_run(built: Built) -> None:
    (built.corpus / "databases" / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    assert built.verdict().reason == "the corpus changed"


def test_a_fixture_edit_triggers_a_run(built: Built) -> None:
    body = json.loads(built.fixture.read_bytes())
    body["queries"][0]["query"] = "security groups"
    built.fixture.write_text(json.dumps(body), encoding="utf-8")
    assert built.verdict().reason == "the evaluation fixture changed"


def test_a_configuration_edit_triggers_a_run(built: Built) -> None:
    _write_config(built.root, built.corpus, built.fixture, locks={"wait_seconds": 5})
    assert built.verdict().reason == "the configuration changed"


def test_an_embedding_provider_change_triggers_a_run(
    built: Built, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRAIN_EMBEDDING_PROVIDER", "local")
    assert not built.verdict().current


def test_a_key_change_triggers_a_run_and_the_key_is_never_recorded(
    built: Built, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "fake-gemini-key-never-stored")
    assert built.verdict().reason == "the embedding key changed"
    assert main(["materialize"]) == 0
    assert "fake-gemini-key-never-stored" not in (built.record_text() or "")
    assert built.verdict().current
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-another-key")
    assert built.verdict().reason == "the embedding key changed"


def test_a_code_change_triggers_a_run(built: Built, monkeypatch: pytest.MonkeyPatch) -> None:
    # What an edited module or an upgrade does to the package's signatures (the next test).
    monkeypatch.setattr(up_to_date, "source_digest", lambda: "another package")
    assert built.verdict().reason == "the code changed"


def test_an_edited_module_changes_the_source_digest(tmp_path: Path) -> None:
    package = tmp_path / "package"
    shutil.copytree(Path(up_to_date.__file__).parent, package / "steps")
    before = source_digest(package)
    module = package / "steps" / "embed.py"
    module.write_text(module.read_text() + "\n# edited\n")
    assert source_digest(package) != before


def test_a_missing_publication_triggers_a_run(built: Built) -> None:
    (built.publish_root / "src/storage/knowledge-store.json").unlink()
    assert "the live publication changed" in built.verdict().reason


def test_a_rewritten_publication_triggers_a_run(built: Built) -> None:
    live = built.publish_root / "src/storage/knowledge-store.json"
    data = live.read_bytes()
    live.unlink()
    live.write_bytes(data)  # same bytes, another file: not the one that was verified
    assert "the live publication changed" in built.verdict().reason


def test_a_stray_file_in_the_publication_triggers_a_run(built: Built) -> None:
    (built.publish_root / "src/storage/embeddings.bin").write_bytes(b"stray")
    assert "holds other files" in built.verdict().reason


def test_an_interrupted_publication_triggers_a_run(built: Built) -> None:
    from brain_pipeline.publishing.commit import intent_path

    path = intent_path(built.publish_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    assert built.verdict().reason == "a publication commit awaits recovery"


def test_a_changed_build_triggers_a_run(built: Built) -> None:
    store = built.layout.store_file
    data = store.read_bytes()
    store.unlink()
    store.write_bytes(data)
    assert f"{store} changed" in built.verdict().reason


def test_a_failed_last_run_triggers_a_run(built: Built) -> None:
    # A run that fails (its fixture names a chunk the store lacks: the blocking check
    # fails), then the input put back as it was: nothing proves the build current now.
    original = built.fixture.read_bytes()
    body = json.loads(original)
    body["queries"][0]["relevant"] = ["0123456789ab"]
    built.fixture.write_text(json.dumps(body), encoding="utf-8")
    assert main(["materialize"]) == 1
    built.fixture.write_bytes(original)
    verdict = built.verdict()
    assert not verdict.current
    assert verdict.reason == "no successful full run is recorded for this build directory"


def test_a_damaged_record_means_a_run(built: Built) -> None:
    memory_of(load_config()).ledger.execute(
        "UPDATE up_to_date SET body = ? WHERE name = ?", ("{not json", up_to_date.RECORD)
    )
    assert built.record_text() == "{not json"
    assert not built.verdict().current


def test_s3_publishing_always_runs(built: Built, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("S3_BUCKET_NAME", "a-bucket")
    assert "S3" in built.verdict().reason


def test_an_input_edited_during_the_run_leaves_no_record(built: Built) -> None:
    cfg = load_config()
    up_to_date.run_started(cfg, "run-x")  # the inputs taken as the run starts
    body = json.loads(built.fixture.read_bytes())
    body["queries"][0]["query"] = "edited while the run read the old one"
    built.fixture.write_text(json.dumps(body), encoding="utf-8")
    why = up_to_date.confirm(cfg, "run-x", cfg.instance_home())
    assert why == "an input changed during the run"
    assert built.record_text() is None
    assert not built.verdict().current


def test_a_corpus_edited_during_the_run_is_a_change_at_the_next_check(built: Built) -> None:
    # The record holds the corpus the run observed, not the one on disk when it ends.
    cfg = load_config()
    up_to_date.run_started(cfg, "run-x")
    (built.corpus / "networks" / "notes.md").write_text("# Changed\n\nAfter it was read.")
    assert up_to_date.confirm(cfg, "run-x", cfg.instance_home()) is None
    assert built.verdict().reason == "the corpus changed"


def test_a_verified_run_is_recorded_again(built: Built) -> None:
    cfg = load_config()
    up_to_date.run_started(cfg, "run-y")
    assert up_to_date.confirm(cfg, "run-y", cfg.instance_home()) is None
    assert built.verdict().run_id == "run-y"
    assert up_to_date.pending_run(memory_of(cfg).ledger) is None  # settled


def test_a_refused_run_only_settles_its_pending_row(built: Built) -> None:
    """A finished run that proves nothing (it failed, or selected less than a full run)
    leaves no record and no pending row for the sensor to settle again."""
    cfg = load_config()
    up_to_date.run_started(cfg, "run-z")
    why = up_to_date.confirm(cfg, "run-z", cfg.instance_home(), refused="the run ended FAILURE")
    assert why == "the run ended FAILURE"
    assert up_to_date.pending_run(memory_of(cfg).ledger) is None
    assert built.record_text() is None and not built.verdict().current
