"""Preflight in-process: each unusable input is one problem naming its key and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.preflight import Needs, check_inputs, check_writable


def _cfg(tmp_path: Path, **extra: str) -> BrainConfig:
    lines = {
        "corpus": f"{{path: {tmp_path / 'corpus'}, candidates: []}}",
        "build_dir": str(tmp_path / "build"),
        "embedding": "{provider: none}",
        "evaluation": f"{{fixture: {tmp_path / 'fixture.json'}}}",
        "publish": f"{{root: {tmp_path / 'agent'}}}",
        **extra,
    }
    config = tmp_path / "corpus_config.yaml"
    config.write_text("".join(f"{k}: {v}\n" for k, v in lines.items()), encoding="utf-8")
    return load_config(config, env={})


def _ready(tmp_path: Path) -> None:
    (tmp_path / "corpus" / "aws").mkdir(parents=True)
    (tmp_path / "corpus" / "aws" / "vpc.md").write_text("# VPC\n", encoding="utf-8")
    rows = [{"query": "vpc", "area": "aws", "relevant": ["0123456789ab"]}]
    (tmp_path / "fixture.json").write_text(json.dumps({"queries": rows}), encoding="utf-8")


def test_usable_inputs_have_no_problem(tmp_path: Path) -> None:
    _ready(tmp_path)
    assert check_inputs(_cfg(tmp_path), env={}) == []
    assert not (tmp_path / "build").exists()  # checking creates nothing


def test_each_missing_input_is_one_problem_in_fixing_order(tmp_path: Path) -> None:
    problems = check_inputs(_cfg(tmp_path), env={})
    assert [p.key for p in problems] == ["corpus.path", "evaluation.fixture"]
    assert "does not exist" in problems[0].message
    assert "create one with" in problems[1].message


def test_an_area_without_readable_files_names_what_it_holds(tmp_path: Path) -> None:
    _ready(tmp_path)
    (tmp_path / "corpus" / "aws" / "vpc.md").unlink()
    (tmp_path / "corpus" / "aws" / "slides.pdf").write_bytes(b"%PDF")
    (problem,) = check_inputs(_cfg(tmp_path), env={})
    assert problem.key == "corpus.path" and "aws:" in problem.message


def test_gemini_without_a_key_says_which_variable(tmp_path: Path) -> None:
    _ready(tmp_path)
    (problem,) = check_inputs(_cfg(tmp_path, embedding="{provider: gemini}"), env={})
    assert problem.key == "embedding.provider" and "GEMINI_API_KEY" in problem.message


def test_a_selection_checks_only_what_it_reads(tmp_path: Path) -> None:
    needs = Needs.for_assets(["knowledge_chunks"])
    assert needs.corpus and not needs.fixture and not needs.publish
    assert [p.key for p in check_inputs(_cfg(tmp_path), needs, env={})] == ["corpus.path"]


def test_a_file_in_the_way_of_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    problem = check_writable("build_dir", tmp_path / "file" / "build", "build directory")
    assert problem is not None and "is not a folder" in problem.message
    assert check_writable("build_dir", tmp_path / "new" / "deeper", "build directory") is None


@pytest.mark.parametrize("text", ["{", '{"queries": "no"}'])
def test_an_unusable_fixture_says_why(tmp_path: Path, text: str) -> None:
    _ready(tmp_path)
    (tmp_path / "fixture.json").write_text(text, encoding="utf-8")
    (problem,) = check_inputs(_cfg(tmp_path), env={})
    assert problem.key == "evaluation.fixture" and problem.message.startswith("fixture unusable")
