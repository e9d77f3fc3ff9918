"""The snapshot an observation stored is handed back without parsing it again, only
while the ledger names the blob written (issue #26: the chunk step re-read it every run)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from brain_pipeline.corpus import observation
from brain_pipeline.corpus.observation import (
    CorpusSnapshot,
    load_snapshot,
    observe_corpus,
)
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.memory import memory_for_layout
from brain_pipeline.utils.digest import sha256_hex


def _corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    (root / "area").mkdir(parents=True)
    (root / "area" / "a.md").write_text("# A\n\nFirst paragraph here.\n", encoding="utf-8")
    return root


def _no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(cls: type, data: bytes) -> CorpusSnapshot:
        raise AssertionError("the stored snapshot was parsed again")

    monkeypatch.setattr(CorpusSnapshot, "from_json", classmethod(refuse))


def test_the_snapshot_just_stored_is_not_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = StateLayout.of(tmp_path / "build")
    observed = observe_corpus(_corpus(tmp_path), layout)
    _no_parsing(monkeypatch)
    loaded = load_snapshot(layout, observed.digest)
    assert loaded == observed and loaded.rehashed == ()


def test_a_snapshot_stored_anew_elsewhere_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another worker sharing the ledger stored the same digest with other bytes (another
    root spelling): the ledger names another blob, so it is read, not the one remembered."""
    layout = StateLayout.of(tmp_path / "build")
    observed = observe_corpus(_corpus(tmp_path), layout)
    elsewhere = replace(observed, root="/mnt/elsewhere/corpus")
    memory = memory_for_layout(layout)
    data = elsewhere.to_json()
    memory.ledger.execute(
        "UPDATE corpus_snapshots SET blob = ? WHERE digest = ?",
        (memory.blobs.put_bytes(data), observed.digest),
    )
    calls: list[bytes] = []
    original = CorpusSnapshot.from_json.__func__  # type: ignore[attr-defined]

    def counting(cls: type, raw: bytes) -> CorpusSnapshot:
        calls.append(raw)
        return original(cls, raw)

    monkeypatch.setattr(CorpusSnapshot, "from_json", classmethod(counting))
    assert load_snapshot(layout, observed.digest).root == "/mnt/elsewhere/corpus"
    assert calls == [data]


def test_only_the_last_snapshot_is_remembered(tmp_path: Path) -> None:
    layout = StateLayout.of(tmp_path / "build")
    root = _corpus(tmp_path)
    observe_corpus(root, layout)
    (root / "area" / "b.md").write_text("# B\n\nAnother paragraph.\n", encoding="utf-8")
    second = observe_corpus(root, layout)
    assert list(observation._last_stored) == [sha256_hex(second.to_json())]
