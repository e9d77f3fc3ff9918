"""The README: the Gemini step runs in the concurrency pool `gemini_embedding` (one slot,
written into the instance's dagster.yaml), so two runs never share one quota. The slot
itself is tested in locks/test_instance.py with a stand-in asset; this pins that the
real `embeddings` asset is in the pool when it calls Gemini, and only then."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from brain_pipeline.definitions import build_definitions
from brain_pipeline.lib.instance import GEMINI_POOL


@pytest.mark.parametrize(
    ("provider", "pool"), [("gemini", GEMINI_POOL), ("local", None), ("none", None)]
)
def test_the_embeddings_step_holds_the_gemini_pool_only_for_gemini(
    tmp_path: Path, provider: str, pool: str | None
) -> None:
    config = tmp_path / "corpus_config.yaml"
    config.write_text(yaml.safe_dump({"embedding": {"provider": provider}}), encoding="utf-8")
    embeddings = build_definitions(str(config)).resolve_assets_def("embeddings")
    assert embeddings.op.pool == pool
    assert GEMINI_POOL == "gemini_embedding"
