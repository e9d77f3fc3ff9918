"""The tools' store refresh: built, current, updated, or used as it is (no Dagster)."""

from __future__ import annotations

import shutil

import pytest

from brain_pipeline.corpus.file_chunks import ingest_corpus
from brain_pipeline.steps.refresh_store import (
    AS_IS,
    BUILT,
    CURRENT,
    UPDATED,
    StoreRefreshError,
    refresh_build_store,
)
from brain_pipeline_tests.state.test_lock import Holder, ledger_lock_path
from brain_pipeline_tests.steps.conftest import Project


def test_built_then_current_then_updated(project: Project) -> None:
    assert refresh_build_store(project.cfg).status == BUILT
    assert refresh_build_store(project.cfg).status == CURRENT
    project.write("python/dicts.md", "Dictionaries map keys to values, each key only once.")
    refreshed = refresh_build_store(project.cfg)
    assert refreshed.status == UPDATED
    assert refreshed.store_file.read_bytes() == ingest_corpus(project.corpus).store_bytes()


def test_without_a_corpus_a_built_store_is_used_as_it_is(project: Project) -> None:
    built = refresh_build_store(project.cfg).store_file.read_bytes()
    shutil.rmtree(project.root / "corpus")
    refreshed = refresh_build_store(project.cfg)
    assert refreshed.status == AS_IS and refreshed.note and "no corpus" in refreshed.note
    assert refreshed.store_file.read_bytes() == built


def test_without_a_corpus_or_a_store_the_error_says_what_to_set(project: Project) -> None:
    shutil.rmtree(project.root / "corpus")
    with pytest.raises(StoreRefreshError, match="corpus.path .* or CURATED_CONTENT_PATH"):
        refresh_build_store(project.cfg)


def test_a_busy_build_dir_shows_the_store_as_last_built(project: Project) -> None:
    refresh_build_store(project.cfg)
    project.write("python/dicts.md", "Dictionaries map keys to values, each key only once.")
    holder = Holder(ledger_lock_path(project.cfg.build_dir), "a-run")  # another process
    try:
        refreshed = refresh_build_store(project.cfg)
    finally:
        holder.release()
    assert refreshed.status == AS_IS and refreshed.note and "another process" in refreshed.note


def test_a_busy_build_dir_without_a_store_is_an_error(project: Project) -> None:
    holder = Holder(ledger_lock_path(project.cfg.build_dir), "a-run")
    try:
        with pytest.raises(StoreRefreshError, match="run this command again"):
            refresh_build_store(project.cfg)
    finally:
        holder.release()
