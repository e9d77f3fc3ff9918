"""publishing.archive: kept by hard link (no second copy), named when gone, pruned."""

from __future__ import annotations

from pathlib import Path

from brain_pipeline.publishing import archive
from brain_pipeline.utils.digest import sha256_hex


def test_a_published_file_is_kept_by_link_and_survives_its_replacement(tmp_path: Path) -> None:
    live = tmp_path / "src" / "knowledge-store.json"
    live.parent.mkdir()
    live.write_bytes(b"first store")
    sha = sha256_hex(b"first store")
    kept = archive.keep_copy(tmp_path / "archive", live, sha, len(b"first store"))
    assert kept.stat().st_ino == live.stat().st_ino  # same filesystem: no second copy
    replacement = live.with_name("new")
    replacement.write_bytes(b"second store")
    replacement.replace(live)  # how a commit replaces a live file
    assert kept.read_bytes() == b"first store"


def test_missing_files_names_each_one_and_prune_keeps_what_is_named(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    keep = archive.keep_bytes(root, b"manifest", "a" * 64, "manifest.json")
    archive.keep_bytes(root, b"old", "b" * 64, "knowledge-store.json")
    wanted = {"manifest.json": ("a" * 64, 8), "knowledge-store.json": ("c" * 64, 5)}
    (problem,) = archive.missing_files(root, wanted)
    assert problem.filename == "knowledge-store.json" and "c" * 16 in problem.describe()
    assert str(archive.object_path(root, "c" * 64, "knowledge-store.json")) in problem.describe()
    removed = archive.prune(root, {"a" * 64})
    assert [p.name for p in removed] == ["b" * 64]
    assert keep.read_bytes() == b"manifest"
