"""Build records: what an asset last wrote, and whether re-running would reproduce it.

Records are rows of the ledger; their outputs are blobs a worker without the file fetches."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from brain_pipeline.state import code_digest as code_digest_module
from brain_pipeline.state.blobs import BlobStore
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Ledger
from brain_pipeline.state.memory import Memory
from brain_pipeline.state.records import (
    AssetRecord,
    FileStamp,
    code_version,
    digest_of,
    read_record,
    write_record,
)
from brain_pipeline.utils.digest import file_sha256, sha256_hex, value_digest

FIXTURE = Path(__file__).parents[1] / "fixtures" / "build-by-main-5d65fac.tar.gz"


def _record(layout: StateLayout, sha: str = "s" * 64) -> AssetRecord:
    layout.build_dir.mkdir(parents=True, exist_ok=True)
    layout.store_file.write_bytes(b"[]")
    return AssetRecord(
        asset="knowledge_store",
        data_version=sha,
        code_version="store-1",
        inputs={"knowledge_chunks": "v1"},
        outputs={layout.store_file.name: FileStamp.of(layout.store_file, sha)},
        facts={"chunks": 0},
        run_id="run-1",
    )


def test_a_record_reads_back_as_written_with_a_time(layout: StateLayout) -> None:
    record = _record(layout, sha256_hex(b"[]"))
    write_record(layout, record)
    back = read_record(layout, "knowledge_store")
    assert back is not None and back.written_at
    assert back.inputs == record.inputs and back.outputs == record.outputs
    assert back.facts == {"chunks": 0} and back.run_id == "run-1"


def test_no_record_or_an_unreadable_old_one_reads_as_none(layout: StateLayout) -> None:
    assert read_record(layout, "embeddings") is None
    old = layout.state_dir / "assets" / "knowledge_store.json"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"{half")
    fresh = StateLayout.of(layout.build_dir)
    from brain_pipeline.state import records

    records._imported.clear()
    assert read_record(fresh, "knowledge_store") is None
    assert not old.parent.exists()  # read in once (nothing usable), then removed


def test_current_only_for_the_same_code_inputs_and_untouched_outputs(
    layout: StateLayout,
) -> None:
    record = _record(layout, sha256_hex(b"[]"))
    inputs = {"knowledge_chunks": "v1"}
    assert record.is_current_for(layout, "store-1", inputs)
    assert not record.is_current_for(layout, "store-2", inputs)
    assert not record.is_current_for(layout, "store-1", {"knowledge_chunks": "v2"})
    replacement = layout.build_dir / "new.json"
    replacement.write_bytes(b"[]")
    os.replace(replacement, layout.store_file)  # the same bytes, another file
    assert not record.is_current_for(layout, "store-1", inputs)


def test_digest_of_is_a_prefix_of_the_value_digest() -> None:
    value = {"b": [1, 2], "a": "x"}
    assert digest_of(value) == value_digest(value)[:16]


def test_a_worker_without_the_output_fetches_it_from_the_blobs(
    tmp_path: Path, ledger_url: str, blobs: BlobStore
) -> None:
    """Worker A records the store; worker B (an empty build directory sharing the ledger
    and the blobs) finds the record current and gets byte-identical bytes from the blobs."""
    body = b'[{"id": "a", "content": "x"}]'
    a = Memory(Ledger(ledger_url), blobs, StateLayout.of(tmp_path / "a"))
    a.layout.build_dir.mkdir()
    a.layout.store_file.write_bytes(body)
    sha = file_sha256(a.layout.store_file)
    write_record(
        a,
        AssetRecord(
            "knowledge_store", sha, "c", {"x": 1},
            outputs={a.layout.store_file.name: FileStamp.of(a.layout.store_file, sha)},
        ),
    )  # fmt: skip
    b = Memory(Ledger(ledger_url), blobs, StateLayout.of(tmp_path / "b"))
    record = read_record(b, "knowledge_store")
    assert record is not None and not b.layout.store_file.exists()
    assert record.is_current_for(b, "c", {"x": 1})
    assert b.layout.store_file.read_bytes() == body
    # Stamped anew on B's disk: the next look is a stat, and a changed file is not current.
    again = read_record(b, "knowledge_store")
    assert again is not None and again.outputs["knowledge-store.json"].still_matches(
        b.layout.store_file
    )
    b.layout.store_file.write_bytes(b"[]")
    assert not again.is_current_for(b, "c", {"x": 1})


def test_a_missing_output_without_its_blob_is_not_current(
    tmp_path: Path, layout: StateLayout
) -> None:
    record = _record(layout, "f" * 64)  # a digest no blob has
    write_record(layout, record)  # the store's bytes go in under their own digest
    layout.store_file.unlink()
    assert not record.is_current_for(layout, "store-1", {"knowledge_chunks": "v1"})


def test_the_code_version_follows_the_code_not_its_comments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change to the code that shapes the store changes its code version; a comment
    does not (`state.code_digest` reads the syntax tree)."""
    package = tmp_path / "brain_pipeline"
    shutil.copytree(Path(code_digest_module.__file__).parents[1], package)
    original = code_digest_module.code_digest

    def from_copy(*modules: str) -> str:
        return original(*modules, root=package)

    monkeypatch.setattr("brain_pipeline.state.records.code_digest", from_copy)
    code_digest_module.clear_cache()
    before = code_version("knowledge_store")
    assembly = package / "corpus" / "assembly.py"
    assembly.write_text(assembly.read_text() + "\n# a comment only\n")
    code_digest_module.clear_cache()
    assert code_version("knowledge_store") == before
    assembly.write_text(assembly.read_text() + "\nCHANGED = 1\n")
    code_digest_module.clear_cache()
    assert code_version("knowledge_store") != before
    assert code_version("published_local") == code_version("published_local")


def test_old_records_are_imported_once_with_their_outputs_as_blobs(tmp_path: Path) -> None:
    """A build directory made by main before the ledger: its `state/assets/*.json` become
    ledger rows (the store's hand-bumped 'store-1' read as today's code version, so the
    build stays current), the files they stamp become blobs, the old folder goes."""
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(tmp_path, filter="data")
    build = next(tmp_path.rglob("build/state")).parent
    layout = StateLayout.of(build)
    old = {p.stem: json.loads(p.read_bytes()) for p in (layout.state_dir / "assets").glob("*.json")}
    assert {"knowledge_chunks", "knowledge_store", "embeddings", "published_local"} <= set(old)
    memory = Memory(Ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}"), _blobs(tmp_path), layout)
    store = read_record(memory, "knowledge_store")
    assert store is not None and store.data_version == old["knowledge_store"]["data_version"]
    assert store.code_version == code_version("knowledge_store")
    assert store.facts == old["knowledge_store"]["facts"]
    assert read_record(memory, "published_local") is not None
    chunks = read_record(memory, "knowledge_chunks")  # "chunks-3-<settings>": today's code
    settings = old["knowledge_chunks"]["code_version"].removeprefix("chunks-3-")
    assert chunks is not None
    assert chunks.code_version == f"{code_version('knowledge_chunks')}-{settings}"
    assert chunks.data_version == old["knowledge_chunks"]["data_version"]
    assert not (layout.state_dir / "assets").exists()
    assert memory.blobs.has(store.data_version)
    assert memory.blobs.has(old["embeddings"]["data_version"])
    # Unpacked elsewhere, the stamps' stat differed: checked once by the bytes, restamped.
    assert store.is_current_for(
        memory, code_version("knowledge_store"), old["knowledge_store"]["inputs"]
    )


def _blobs(tmp_path: Path) -> BlobStore:
    from brain_pipeline.state.blobs import LocalBlobs

    return LocalBlobs(tmp_path / "blobs")
