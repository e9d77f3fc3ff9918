"""A throw-away project for the CLI tests: config, a built store and a fixture."""

from __future__ import annotations

import itertools
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from brain_pipeline.corpus.store import Chunk, serialize_store
from brain_pipeline_tests.evaluation.helpers import make_chunk
from brain_pipeline_tests.state.conftest import postgres_server, postgres_url  # noqa: F401


@dataclass
class Project:
    root: Path
    config: Path
    build: Path
    fixture: Path
    chunks: list[Chunk]

    def configure(self, extra: str = "", provider: str = "none") -> None:
        """(Re)write corpus_config.yaml; `extra` is appended YAML."""
        self.config.write_text(
            f"build_dir: {self.build}\n"
            f"embedding:\n  provider: {provider}\n"
            f"evaluation:\n  fixture: {self.fixture}\n{extra}"
        )

    def write_fixture(self, path: Path, queries: list[tuple[str, str, list[str]]]) -> Path:
        rows = [{"query": q, "area": a, "relevant": r} for q, a, r in queries]
        path.write_text(json.dumps({"$comment": ["test"], "queries": rows}))
        return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    chunks = [
        make_chunk("Amazon VPC gives you a private network.", source="aws/vpc.md", heading="VPC"),
        make_chunk("S3 buckets hold objects.", source="aws/s3.md"),
        make_chunk("IAM roles grant credentials.", source="aws/iam.md", heading="Roles"),
        make_chunk("Python lists are ordered.", area="python", source="py/lists.md"),
    ]
    build = tmp_path / "build"
    build.mkdir()
    (build / "knowledge-store.json").write_bytes(serialize_store(chunks))
    proj = Project(tmp_path, tmp_path / "corpus_config.yaml", build, tmp_path / "eval.json", chunks)
    proj.write_fixture(
        proj.fixture,
        [
            ("private network", "aws", [chunks[0].id]),
            ("buckets", "aws", [chunks[1].id]),
            ("ordered lists", "python", [chunks[3].id]),
        ],
    )
    proj.configure()
    monkeypatch.setenv("BRAIN_CONFIG", str(proj.config))
    monkeypatch.chdir(tmp_path)
    return proj


OLD_BUILD = Path(__file__).parents[1] / "fixtures" / "build-by-main-5d65fac.tar.gz"
_databases = itertools.count()


@pytest.fixture(params=["default", "postgresql+s3"])
def old_project(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A project folder made by main before the ledger, on each pair of backends (the
    embedded default; PostgreSQL and an S3 bucket for several machines)."""
    import boto3

    with tarfile.open(OLD_BUILD) as archive:
        archive.extractall(tmp_path / "project", filter="data")
    monkeypatch.setenv("BRAIN_CONFIG", str(tmp_path / "project" / "brain.yaml"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster-home"))
    (tmp_path / "dagster-home").mkdir()
    if request.param != "default":
        server = request.getfixturevalue("postgres_server")
        database = server.create_database(f"upgrade_{next(_databases)}")
        monkeypatch.setenv("BRAIN_STATE_LEDGER", postgres_url(server, database))
        request.getfixturevalue("s3")
        boto3.client("s3").create_bucket(Bucket="brain-state")
        monkeypatch.setenv("BRAIN_STATE_BLOBS", "s3://brain-state/team/state")
    return tmp_path / "project"
