from __future__ import annotations

import logging

import pytest

from brain_pipeline.publishing.gate import publish_decision


def test_passed_evaluation_allows() -> None:
    d = publish_decision(True, force=False, store_chunk_count=10)
    assert d.allowed and not d.forced


@pytest.mark.parametrize("latest", [False, None])
def test_failed_or_missing_evaluation_refuses(latest: bool | None) -> None:
    d = publish_decision(latest, force=False, store_chunk_count=10)
    assert not d.allowed
    assert ("not run" in d.reason) == (latest is None)
    assert "force" in d.reason


@pytest.mark.parametrize("latest", [False, None])
def test_force_overrides_the_evaluation_loudly(
    latest: bool | None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="brain_pipeline.publishing.gate"):
        d = publish_decision(latest, force=True, store_chunk_count=10)
    assert d.allowed and d.forced
    assert "FORCED" in d.reason
    assert any("FORCED" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("latest", [True, False, None])
@pytest.mark.parametrize("force", [True, False])
def test_empty_store_is_never_published(latest: bool | None, force: bool) -> None:
    d = publish_decision(latest, force=force, store_chunk_count=0)
    assert not d.allowed
    assert "empty" in d.reason
