"""Importing one module of a package loads only that module.

The refusal of `materialize` for a missing fixture must not pay for the evaluation
runner or numpy: the preflight reads the fixture through `evaluation.fixture.model`, and an
eager `evaluation/__init__` imported everything with it; package `__init__`s re-export
nothing now. What a refusal imports is
checked, not how long it takes (a timed unit test would fail on a busy machine).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = (
    "numpy",
    "dagster",
    "brain_pipeline.evaluation.runner",
    "brain_pipeline.corpus.file_chunks",
)


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
