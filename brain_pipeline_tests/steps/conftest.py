"""A small project for calling the steps directly: a configuration, a corpus, no Dagster."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.state.layout import StateLayout

TEXT = "A paragraph long enough to be kept as one chunk of the store."


@dataclass
class Project:
    root: Path
    cfg: BrainConfig

    @property
    def corpus(self) -> Path:
        return self.cfg.corpus_root()

    @property
    def layout(self) -> StateLayout:
        return StateLayout.of(self.cfg.build_dir)

    def write(self, relative: str, content: str | bytes) -> Path:
        path = self.root / "corpus" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
        return path


class StepLog:
    """A StepLog that keeps what the step said."""

    def __init__(self) -> None:
        self.infos: list[str] = []
        self.warnings: list[str] = []

    def info(self, msg: str) -> None:
        self.infos.append(msg)

    def warning(self, msg: str) -> None:
        self.warnings.append(msg)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    (tmp_path / "corpus" / "aws").mkdir(parents=True)
    (tmp_path / "corpus" / "aws" / "vpc.md").write_text(f"# VPC\n\n{TEXT}\n", encoding="utf-8")
    (tmp_path / "corpus" / "python").mkdir()
    (tmp_path / "corpus" / "python" / "lists.md").write_text(
        f"# Lists\n\nLists hold items in order. {TEXT}\n", encoding="utf-8"
    )
    config = tmp_path / "corpus_config.yaml"
    config.write_text(
        f"corpus: {{path: {tmp_path / 'corpus'}, candidates: []}}\n"
        f"build_dir: {tmp_path / 'build'}\n"
        "embedding: {provider: none}\n"
        f"evaluation: {{fixture: {tmp_path / 'fixture.json'}}}\n"
        f"publish: {{root: {tmp_path / 'agent'}}}\n",
        encoding="utf-8",
    )
    return Project(tmp_path, load_config(config, env={}))


@pytest.fixture
def log() -> StepLog:
    return StepLog()
