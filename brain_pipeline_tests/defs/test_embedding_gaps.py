"""A refused text through the whole graph: the run succeeds and publishes every other
vector, the `embedding_gaps` WARN names the chunk, the next run sends nothing, `status`
mentions it, and `--retry-refused` sends it again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline.corpus.store import parse_store
from brain_pipeline.retrieval.vectors import decode_embeddings
from brain_pipeline.steps.health import embedding_gap_rows
from brain_pipeline_tests.defs.conftest import Project
from brain_pipeline_tests.peers.fake_gemini import FakeGemini

API_KEY = "gaps-test-key-91ab"
REFUSED = "This reference paragraph holds the REFUSEME marker the service will not take."


@pytest.fixture
def refusing_project(tiny_project: Project, monkeypatch: pytest.MonkeyPatch
                     ) -> Iterator[tuple[Project, FakeGemini]]:
    (tiny_project.corpus / "alpha" / "table.md").write_text(
        "# Reference table\n\n" + REFUSED + "\n", encoding="utf-8")
    with FakeGemini(api_key=API_KEY, refuse_substrings=["REFUSEME"]) as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
        monkeypatch.setenv("BRAIN_CONFIG", str(tiny_project.config_path))
        tiny_project.write_config(**{"embedding.provider": "auto", "embedding.dimension": 32,
                                     "evaluation.thresholds": {}})
        yield tiny_project, server


def _documents(server: FakeGemini) -> list[str]:
    return list(server.stats().sent_texts)


def test_a_refused_text_warns_publishes_the_rest_and_is_not_resent(
    refusing_project: tuple[Project, FakeGemini], capsys: pytest.CaptureFixture[str],
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    project, server = refusing_project
    outcome = project.materialize()
    assert outcome.success, outcome.lines
    gaps_line = [line for line in outcome.lines if "embedding_gaps" in line]
    assert len(gaps_line) == 1 and "WARN 1 chunk(s) without a vector" in gaps_line[0]
    assert "alpha/table.md" in gaps_line[0] and "requests[" in gaps_line[0]
    chunks = parse_store(project.store_file.read_bytes())
    refused = next(c for c in chunks if c.content == REFUSED)
    published = decode_embeddings((project.published() / "embeddings.bin").read_bytes())
    assert published.ids == [c.id for c in chunks if c.id != refused.id]
    cfg_rows = embedding_gap_rows(_cfg(project))
    assert cfg_rows == [["alpha/table.md", "Reference table", refused.id, cfg_rows[0][3]]]
    assert cfg_rows[0][3].startswith("refused by the service")

    assert main(["status"]) in (0, 2)
    assert "1 chunk(s) without a vector" in capsys.readouterr().out

    server.reset()
    server.configure(api_key=API_KEY, refuse_substrings=["REFUSEME"])
    (project.corpus / "beta" / "new.md").write_text(
        "A brand new paragraph about gliders and still lifes.\n", encoding="utf-8")
    assert project.materialize().success
    assert REFUSED not in _documents(server)  # not re-paid on a later run

    server.reset()
    server.configure(api_key=API_KEY)  # the service takes it now
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster-home"))
    assert main(["materialize", "--retry-refused"]) == 0
    assert "1 refused text(s) will be sent again" in capsys.readouterr().err
    assert REFUSED in _documents(server)
    assert embedding_gap_rows(_cfg(project)) == []
    published = decode_embeddings((project.published() / "embeddings.bin").read_bytes())
    assert refused.id in published.ids


def _cfg(project: Project):  # type: ignore[no-untyped-def]
    from brain_pipeline.config import load_config

    return load_config(project.config_path)
