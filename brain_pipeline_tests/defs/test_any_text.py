"""Any text the agent's store can hold, the whole pipeline can hold: a corpus with lone
surrogates, invalid UTF-8 and every edge the differential test knows is materialised and
published exactly as `brain-pipeline chunk` writes it, and every command that prints
chunk text prints what it cannot encode as an escape."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline.corpus.store import chunk_id
from brain_pipeline_tests.corpus.corpora import build_edge_corpus
from brain_pipeline_tests.defs.conftest import Project, make_project

KEPT = "A paragraph that is long enough to keep."
SURROGATE_MAP = (
    '{"title": "Lone \\ud800 title", '
    '"topics": [{"label": "Topic \\udfff here", "type": "topic"}]}'
)

#: What a terminal obeys: retitle the window, erase the line and forge another.
ESCAPES = (
    "# Heading \x1b]0;owned\x07\n\nA paragraph long enough, then \x1b[2K\r"
    "forged: all checks passed\x9b31m\n"
)
ESCAPED_ID = chunk_id(
    "A paragraph long enough, then \x1b[2K\rforged: all checks passed\x9b31m"
)


@pytest.fixture
def edge_project(tmp_path: Path) -> Project:
    corpus = tmp_path / "corpus"
    build_edge_corpus(corpus, tmp_path / "outside")
    extra = corpus / "maps" / "roadmaps" / "surrogate-heading.json"
    extra.write_text(SURROGATE_MAP, encoding="ascii")
    (corpus / "maps" / "escapes.md").write_text(ESCAPES, encoding="utf-8")
    fixture = {
        "queries": [{"query": "paragraph long enough keep", "area": "alias-area",
                     "relevant": [chunk_id(KEPT)]}]
    }
    (tmp_path / "project").mkdir()
    project = make_project(tmp_path / "project", corpus, fixture)
    project.write_config(**{"evaluation.thresholds": {}})
    return project


def test_the_edge_corpus_is_published_exactly_as_chunk_writes_it(
    edge_project: Project, tmp_path: Path
) -> None:
    for _ in range(2):  # the second run reads every cache, sidecar and record back
        outcome = edge_project.materialize()
        assert outcome.success, outcome.lines
    reference = tmp_path / "chunk.json"
    assert main(["chunk", str(edge_project.corpus), "-o", str(reference), "-q"]) == 0
    expected = reference.read_bytes()
    assert b"\\ud800" in expected and b"\\udfff" in expected  # the store keeps them
    for kind in ("src", "dist"):
        published = edge_project.published(kind) / "knowledge-store.json"
        if published.exists() or kind == "src":
            assert published.read_bytes() == expected


def _cli(project: Project, *args: str, encoding: str = "utf-8"
         ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, BRAIN_CONFIG=str(project.config_path), PYTHONIOENCODING=encoding)
    return subprocess.run([sys.executable, "-m", "brain_pipeline.cli", *args], env=env,
                          capture_output=True, text=True, encoding=encoding, check=False,
                          timeout=300)


def test_commands_print_lone_surrogates_as_escapes(edge_project: Project) -> None:
    assert edge_project.materialize().success
    surrogate_id = chunk_id("Role: Lone \ud800 title - Description: ")
    shown = _cli(edge_project, "fixture", "show", surrogate_id)
    assert shown.returncode == 0, shown.stderr
    assert "\\ud800" in shown.stdout and "Traceback" not in shown.stderr
    found = _cli(edge_project, "fixture", "find", "Lone", "--area", "maps")
    assert found.returncode == 0, found.stderr
    assert "\\ud800" in found.stdout
    searched = _cli(edge_project, "search", "lone title topic", "--area", "maps")
    assert searched.returncode == 0, searched.stderr
    assert "\\ud800" in searched.stdout or "\\udfff" in searched.stdout
    as_json = _cli(edge_project, "search", "lone title topic", "--area", "maps", "--json")
    assert as_json.returncode == 0, as_json.stderr
    decoded = json.loads(as_json.stdout)
    assert "\ud800" in json.dumps(decoded, ensure_ascii=False) or "\udfff" in json.dumps(
        decoded, ensure_ascii=False
    )
    # A terminal that cannot even print é: still escapes, still valid JSON, same strings.
    narrow = _cli(edge_project, "search", "lone title topic", "--area", "maps", "--json",
                  encoding="ascii")
    assert narrow.returncode == 0, narrow.stderr
    assert json.loads(narrow.stdout) == decoded
    labelled = _cli(edge_project, "fixture", "label", "lone title", "--area", "maps",
                    "--add", surrogate_id)
    assert labelled.returncode == 0, labelled.stderr + labelled.stdout


def test_commands_print_control_characters_as_escapes(edge_project: Project) -> None:
    assert edge_project.materialize().success
    runs = [
        _cli(edge_project, "fixture", "show", ESCAPED_ID),
        _cli(edge_project, "fixture", "find", "forged", "--area", "maps"),
        _cli(edge_project, "search", "paragraph forged checks", "--area", "maps"),
        _cli(edge_project, "search", "paragraph forged checks", "--area", "maps", "--json"),
    ]
    for done in runs:
        assert done.returncode == 0, done.stderr
        assert "forged" in done.stdout
        for control in ("\x1b", "\x07", "\r", "\x9b"):
            assert control not in done.stdout + done.stderr, (done.args, done.stdout)
    assert "\\u001b[2K\\u000dforged" in runs[0].stdout
    assert "Heading \\u001b]0;owned\\u0007" in runs[0].stdout
