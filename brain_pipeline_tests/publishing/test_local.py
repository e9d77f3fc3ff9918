from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from brain_pipeline.publishing.local import (
    LocalPublishReport,
    inspect_publication,
    publish_local,
)
from brain_pipeline.publishing.manifest import PublishManifest, build_manifest
from brain_pipeline.utils.digest import sha256_hex
from brain_pipeline_tests.publishing.conftest import (
    AGENT_MODEL,
    SampleBuild,
    make_build,
    source_of,
)

STORE = "knowledge-store.json"
VECTORS = "embeddings.bin"
MANIFEST = "manifest.json"


def publish(
    build: SampleBuild,
    root: Path,
    *,
    with_vectors: bool = True,
    evaluation: dict[str, float] | None = None,
    run_id: str | None = None,
    published_at: str | None = None,
) -> LocalPublishReport:
    vectors = build.embeddings if with_vectors else None
    manifest = build_manifest(
        build.store,
        vectors,
        build.chunks,
        evaluation,
        "c0ffee",
        run_id,
        published_at=published_at,
    )
    return publish_local(
        build.store, vectors, root, agent_query_model=AGENT_MODEL, manifest=manifest
    )


def actions(report: LocalPublishReport) -> list[dict[str, str]]:
    return [{f.filename: f.action for f in t.files} for t in report.targets]


def test_publishes_to_src_only_when_dist_is_absent(build: SampleBuild, publish_root: Path) -> None:
    report = publish(build, publish_root)
    src = publish_root / "src" / "storage"
    assert [t.directory for t in report.targets] == [src]
    assert (src / STORE).read_bytes() == build.store_bytes
    assert (src / VECTORS).read_bytes() == build.embeddings_bytes
    assert not (publish_root / "dist").exists()
    assert actions(report) == [{VECTORS: "written", STORE: "written", MANIFEST: "written"}]
    store_outcome = next(f for f in report.targets[0].files if f.filename == STORE)
    assert store_outcome.size == len(build.store_bytes)
    assert store_outcome.sha256 == sha256_hex(build.store_bytes)
    assert report.changed and report.embeddings_published


def test_publishes_to_dist_too_when_it_exists(build: SampleBuild, publish_root: Path) -> None:
    (publish_root / "dist").mkdir()
    report = publish(build, publish_root)
    assert len(report.targets) == 2
    for sub in ("src", "dist"):
        storage = publish_root / sub / "storage"
        assert (storage / STORE).read_bytes() == build.store_bytes
        assert (storage / VECTORS).read_bytes() == build.embeddings_bytes
    src_manifest = (publish_root / "src" / "storage" / MANIFEST).read_bytes()
    assert (publish_root / "dist" / "storage" / MANIFEST).read_bytes() == src_manifest


def test_republishing_the_same_bytes_is_unchanged_everywhere(
    build: SampleBuild, publish_root: Path
) -> None:
    (publish_root / "dist").mkdir()
    first = publish(build, publish_root, run_id="run-1", published_at="2020-01-01T00:00:00Z")
    manifest_path = publish_root / "src" / "storage" / MANIFEST
    mtimes = {p: p.stat().st_mtime_ns for p in publish_root.rglob("*") if p.is_file()}

    again = publish(build, publish_root, run_id="run-2", published_at="2030-01-01T00:00:00Z")

    assert not again.changed
    assert [t.status for t in again.targets] == ["unchanged", "unchanged"]
    assert all(set(a.values()) == {"unchanged"} for a in actions(again))
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes
    kept = PublishManifest.from_json(manifest_path.read_bytes())
    assert kept.published_at == "2020-01-01T00:00:00Z" and kept.run_id == "run-1"
    assert again.manifest == first.manifest


def test_new_evaluation_figures_rewrite_only_the_manifest(
    build: SampleBuild, publish_root: Path
) -> None:
    publish(build, publish_root, evaluation={"ndcg": 0.5})
    report = publish(build, publish_root, evaluation={"ndcg": 0.6})
    assert actions(report) == [{VECTORS: "unchanged", STORE: "unchanged", MANIFEST: "written"}]
    live = PublishManifest.from_json((publish_root / "src/storage" / MANIFEST).read_bytes())
    assert live.evaluation == {"ndcg": 0.6}


def test_vectors_from_another_model_are_withheld_and_old_ones_removed(
    publish_root: Path,
) -> None:
    (publish_root / "dist").mkdir()
    publish(make_build(), publish_root)  # agent-model vectors now live in src and dist
    other = make_build(model="all-MiniLM-L6-v2", salt="v2 ")

    report = publish(other, publish_root)

    assert not report.embeddings_published
    assert report.embeddings_note is not None
    assert "all-MiniLM-L6-v2" in report.embeddings_note and AGENT_MODEL in report.embeddings_note
    assert actions(report) == [{VECTORS: "removed", STORE: "written", MANIFEST: "written"}] * 2
    for sub in ("src", "dist"):
        storage = publish_root / sub / "storage"
        assert not (storage / VECTORS).exists()
        assert (storage / STORE).read_bytes() == other.store_bytes
        live = PublishManifest.from_json((storage / MANIFEST).read_bytes())
        assert live.embeddings is None and live.embeddings_note == report.embeddings_note
        assert live.vector_coverage == 0.0

    again = publish(other, publish_root)
    assert actions(again) == [{STORE: "unchanged", MANIFEST: "unchanged"}] * 2


def test_store_without_vectors_removes_a_stale_embeddings_file(
    build: SampleBuild, publish_root: Path
) -> None:
    publish(build, publish_root)
    report = publish(build, publish_root, with_vectors=False)
    assert actions(report) == [{VECTORS: "removed", STORE: "unchanged", MANIFEST: "written"}]
    assert not (publish_root / "src/storage" / VECTORS).exists()


def test_unreadable_embeddings_are_not_published(build: SampleBuild, publish_root: Path) -> None:
    garbage = source_of(b"GARBAGE!" + bytes(32))
    manifest = build_manifest(build.store, garbage, build.chunks)
    report = publish_local(
        build.store, garbage, publish_root, agent_query_model=AGENT_MODEL, manifest=manifest
    )
    assert not report.embeddings_published
    assert not (publish_root / "src/storage" / VECTORS).exists()


def test_a_manifest_for_other_bytes_is_refused(build: SampleBuild, publish_root: Path) -> None:
    other = make_build(salt="other ")
    manifest = build_manifest(other.store, other.embeddings, other.chunks)
    with pytest.raises(ValueError, match="store"):
        publish_local(
            build.store,
            build.embeddings,
            publish_root,
            agent_query_model=AGENT_MODEL,
            manifest=manifest,
        )
    fixed = replace(manifest, store=build_manifest(build.store, None, build.chunks).store)
    with pytest.raises(ValueError, match="embeddings"):
        publish_local(
            build.store,
            build.embeddings,
            publish_root,
            agent_query_model=AGENT_MODEL,
            manifest=fixed,
        )
    assert not (publish_root / "src").exists()


def test_a_reader_never_sees_half_a_store(tmp_path: Path) -> None:
    """Poll the published file while two large stores replace each other repeatedly."""
    big_a = make_build({"a": 6000}, salt="A ")
    big_b = make_build({"b": 9000}, salt="B ")
    assert len(big_a.store_bytes) > 500_000 and len(big_b.store_bytes) > 500_000
    root = tmp_path / "agent"
    target = root / "src" / "storage" / STORE
    publish(big_a, root, with_vectors=False)
    expected = {big_a.store_bytes: "a", big_b.store_bytes: "b"}
    seen: dict[str, int] = {"a": 0, "b": 0}
    bad: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            data = target.read_bytes()
            try:
                json.loads(data)
            except ValueError as exc:
                bad.append(f"torn read of {len(data)} bytes: {exc}")
                continue
            if data in expected:
                seen[expected[data]] += 1
            else:
                bad.append(f"{len(data)} bytes matching neither store")

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(30):
            publish(big_b if i % 2 == 0 else big_a, root, with_vectors=False)
    finally:
        stop.set()
        thread.join()
    assert bad == []
    assert seen["a"] > 0 and seen["b"] > 0


def test_inspect_reports_matching_copies(build: SampleBuild, publish_root: Path) -> None:
    (publish_root / "dist").mkdir()
    report = publish(build, publish_root)
    found = inspect_publication(publish_root)
    assert found.manifest == report.manifest
    assert found.consistent and [c.matches for c in found.copies] == [True, True]


def test_inspect_detects_a_tampered_or_stale_copy(build: SampleBuild, publish_root: Path) -> None:
    (publish_root / "dist").mkdir()
    publish(build, publish_root, with_vectors=False)
    dist = publish_root / "dist" / "storage"
    (dist / STORE).write_bytes(build.store_bytes + b" ")
    (dist / VECTORS).write_bytes(build.embeddings_bytes)
    found = inspect_publication(publish_root)
    src_check, dist_check = found.copies
    assert src_check.matches and not dist_check.matches and not found.consistent
    assert any(STORE in p for p in dist_check.problems)
    assert any(VECTORS in p for p in dist_check.problems)


def test_inspect_with_nothing_published(publish_root: Path) -> None:
    found = inspect_publication(publish_root)
    assert found.manifest is None and found.error is None and not found.consistent


def test_inspect_with_an_unreadable_manifest(publish_root: Path) -> None:
    storage = publish_root / "src" / "storage"
    storage.mkdir(parents=True)
    (storage / MANIFEST).write_text("{half")
    found = inspect_publication(publish_root)
    assert found.manifest is None and found.error is not None and "unreadable" in found.error


def test_a_hand_edited_file_of_the_same_size_is_rewritten(
    build: SampleBuild, publish_root: Path
) -> None:
    """The recorded signature saves reading a big file only while the file is unchanged."""
    import os

    publish(build, publish_root)
    store = publish_root / "src" / "storage" / STORE
    edited = bytearray(build.store_bytes)
    edited[10] = ord("X") if edited[10] != ord("X") else ord("Y")
    store.write_bytes(bytes(edited))
    manifest_mtime = (publish_root / "src" / "storage" / MANIFEST).stat().st_mtime_ns
    os.utime(store, ns=(manifest_mtime + 10**9, manifest_mtime + 10**9))

    report = publish(build, publish_root)

    assert actions(report) == [{VECTORS: "unchanged", STORE: "written", MANIFEST: "unchanged"}]
    assert store.read_bytes() == build.store_bytes


def test_a_same_size_replacement_with_its_mtime_put_back_is_rewritten(
    build: SampleBuild, publish_root: Path
) -> None:
    """The one "unchanged" rule (`utils.file_signature`): a live file swapped for other
    bytes of the same size, its mtime restored, is a new inode and is not trusted (size
    and an mtime no newer than the manifest's would have trusted it)."""
    import os

    publish(build, publish_root)
    store = publish_root / "src" / "storage" / STORE
    before = store.stat()
    edited = bytearray(build.store_bytes)
    edited[10] = ord("X") if edited[10] != ord("X") else ord("Y")
    swap = publish_root / "swap.json"
    swap.write_bytes(bytes(edited))
    os.utime(swap, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(swap, store)

    report = publish(build, publish_root)

    assert actions(report) == [{VECTORS: "unchanged", STORE: "written", MANIFEST: "unchanged"}]
    assert store.read_bytes() == build.store_bytes


def test_without_the_signature_record_unchanged_files_are_compared_not_rewritten(
    build: SampleBuild, publish_root: Path
) -> None:
    publish(build, publish_root)
    record = publish_root / ".brain-publish" / "signatures.json"
    assert record.is_file()
    record.unlink()
    store = publish_root / "src" / "storage" / STORE
    mtime = store.stat().st_mtime_ns

    report = publish(build, publish_root)

    assert actions(report) == [{VECTORS: "unchanged", STORE: "unchanged", MANIFEST: "unchanged"}]
    assert store.stat().st_mtime_ns == mtime


def test_an_unchanged_publish_stages_nothing(build: SampleBuild, publish_root: Path) -> None:
    (publish_root / "dist").mkdir()
    publish(build, publish_root)
    before = sorted(p.relative_to(publish_root) for p in publish_root.rglob("*"))
    publish(build, publish_root)
    assert sorted(p.relative_to(publish_root) for p in publish_root.rglob("*")) == before
    assert not any(".brain-staging-" in str(p) for p in before)
