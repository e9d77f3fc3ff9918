"""Package namespaces import their modules on first use.

The refusal of `materialize` for a missing fixture must not pay for the evaluation
runner or numpy: the preflight reads the fixture through `evaluation.fixture`, and an
eager `evaluation/__init__` imported everything with it. What a refusal imports is
checked, not how long it takes (a timed unit test would fail on a busy machine).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import brain_pipeline.corpus as corpus
import brain_pipeline.embedding as embedding
import brain_pipeline.evaluation as evaluation
import brain_pipeline.retrieval as retrieval

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "dagster", "brain_pipeline.evaluation.runner", "brain_pipeline.corpus.ingest")


def test_a_missing_fixture_is_refused_without_the_heavy_modules(tmp_path: Path) -> None:
    (tmp_path / "corpus" / "a").mkdir(parents=True)
    (tmp_path / "corpus" / "a" / "x.md").write_text("# x\n", encoding="utf-8")
    config = tmp_path / "corpus_config.yaml"
    config.write_text(
        f"corpus: {{path: {tmp_path / 'corpus'}, candidates: []}}\n"
        f"build_dir: {tmp_path / 'build'}\n"
        "embedding: {provider: none}\n"
        f"evaluation: {{fixture: {tmp_path / 'missing.json'}}}\n"
        f"publish: {{root: {tmp_path / 'agent'}}}\n",
        encoding="utf-8",
    )
    probe = (
        "import sys\n"
        "from brain_pipeline.cli import main\n"
        "code = main(['materialize'])\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, "BRAIN_CONFIG": str(config), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr
    assert "missing.json does not exist" in done.stderr
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.parametrize("package", [corpus, embedding, evaluation, retrieval])
def test_every_exported_name_is_served(package: ModuleType) -> None:
    names = package.__all__
    for name in names:
        assert getattr(package, name) is not None
        assert name in dir(package)
    assert not hasattr(package, "no_such_name")


def test_a_lazy_name_is_the_module_s_own_object() -> None:
    from brain_pipeline.evaluation import run_evaluation
    from brain_pipeline.evaluation.runner import run_evaluation as direct

    assert run_evaluation is direct
