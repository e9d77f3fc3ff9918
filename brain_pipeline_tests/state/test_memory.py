"""`config.memory_of`: one ledger connection and blob store per process and thread."""

from __future__ import annotations

import threading
from pathlib import Path

from brain_pipeline.config import load_config, memory_of
from brain_pipeline.state.memory import Memory


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "brain.yaml"
    path.write_text(f"build_dir: {tmp_path / 'build'}\n", encoding="utf-8")
    return path


def test_a_thread_reuses_its_memory_and_another_thread_opens_its_own(tmp_path: Path) -> None:
    cfg = load_config(_config(tmp_path))
    first = memory_of(cfg)
    assert memory_of(cfg) is first
    assert first.ledger.set_pointer("live", "a" * 64, expected=None)
    seen: list[tuple[Memory, str | None]] = []

    def in_another_thread() -> None:
        memory = memory_of(cfg)
        seen.append((memory, memory.ledger.pointer("live")))

    worker = threading.Thread(target=in_another_thread)
    worker.start()
    worker.join()
    assert seen and seen[0][0] is not first
    # Each thread's own connection reaches the same ledger: what one recorded the other reads.
    assert seen[0][1] == "a" * 64


def test_the_memory_lives_in_the_configured_build_directory(tmp_path: Path) -> None:
    cfg = load_config(_config(tmp_path))
    memory = memory_of(cfg)
    assert memory.layout.build_dir == (tmp_path / "build").resolve()
    digest = memory.blobs.put_bytes(b"remembered")
    assert memory.blobs.get_bytes(digest) == b"remembered"
    assert memory.layout.ledger.exists()


def test_one_cache_whether_the_configuration_or_a_build_directory_asks(tmp_path: Path) -> None:
    import shutil

    from brain_pipeline.state.layout import StateLayout
    from brain_pipeline.state.memory import memory_for_layout

    cfg = load_config(_config(tmp_path))
    first = memory_of(cfg)
    assert memory_for_layout(StateLayout.of(cfg.build_dir)) is first
    # The build directory removed under the open connection: a new ledger file is opened.
    shutil.rmtree(cfg.build_dir)
    again = memory_of(cfg)
    assert again is not first and again.blobs is first.blobs
    assert memory_for_layout(StateLayout.of(cfg.build_dir)) is again
    assert again.layout.ledger.exists()
