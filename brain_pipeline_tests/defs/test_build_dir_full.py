"""A full disk under the build directory: the run fails naming it, and loses nothing."""

from __future__ import annotations

from pathlib import Path

from brain_pipeline_tests.corpus.views import clear_views
from brain_pipeline_tests.defs.conftest import make_project, tiny_fixture, write_tiny_corpus
from brain_pipeline_tests.mounts import small_tmpfs


def test_a_full_build_dir_fails_in_one_line_and_keeps_the_previous_store(
    tmp_path: Path,
) -> None:
    corpus = tmp_path / "corpus"
    fixture = tiny_fixture(write_tiny_corpus(corpus))
    with small_tmpfs(tmp_path / "disk", "1m") as disk:
        project = make_project(tmp_path, corpus, fixture)
        project.build = disk / "build"
        project.write_config(build_dir=str(project.build))
        assert project.materialize().success
        before = project.store_file.read_bytes()
        # A corpus edit whose chunks, store and history cannot fit in what is left.
        paragraphs = [f"Paragraph {i} about routing tables and subnets. " * 8 for i in range(2500)]
        (corpus / "alpha" / "bulk.md").write_text("\n\n".join(paragraphs), encoding="utf-8")
        outcome = project.materialize()
        assert not outcome.success
        failed = [line for line in outcome.lines if line.startswith("  FAILED")]
        assert len(failed) == 1, outcome.lines
        assert "No space left on device" in failed[0] or "disk is full" in failed[0], failed
        assert "\n" not in failed[0]
        # The previous store is intact and published as it was; no torn temporary files.
        assert project.store_file.read_bytes() == before
        published = project.published() / "knowledge-store.json"
        assert published.read_bytes() == before
        leftovers = [p.name for p in project.build.rglob("*.tmp")]
        assert leftovers == []
        clear_views()  # the process keeps store views memory-mapped; let go of the disk
