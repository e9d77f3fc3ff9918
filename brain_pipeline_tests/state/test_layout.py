"""Where everything lives in a build directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain_pipeline.state.layout import StateLayout


def test_paths_are_resolved_and_state_is_kept_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    layout = StateLayout.of("build")
    assert layout.build_dir == (tmp_path / "build").resolve()
    assert layout == StateLayout.of(tmp_path / "build")
    artifacts = {layout.store_file, layout.embeddings_file}
    assert {p.parent for p in artifacts} == {layout.build_dir}
    state = [
        layout.files_index,
        layout.snapshots_dir,
        layout.chunks_dir,
        layout.store_index_dir,
        layout.bm25_dir,
        layout.history_dir,
        layout.assets_dir,
        layout.locks_dir,
    ]
    assert all(p.parent == layout.state_dir for p in state)
    assert len(set(state)) == len(state)
    assert not layout.build_dir.exists()  # naming paths creates nothing
