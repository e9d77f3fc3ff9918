"""Session-wide test hygiene: no test may see the developer's keys, buckets or corpus."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.peers.moto_s3 import (
    TEST_ACCESS_KEY,
    TEST_REGION,
    TEST_SECRET,
    MotoS3Server,
)

# Variables that would point a test at a real service, a real corpus or another config.
LEAKY_ENV = (
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_ENTERPRISE",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_GENAI_API_VERSION",
    "GOOGLE_GEMINI_BASE_URL",
    "GEMINI_EMBEDDING_MODEL",
    "GEMINI_EMBEDDING_DIM",
    "CURATED_CONTENT_PATH",
    "BRAIN_LOCK_WAIT_SECONDS",
    "RETRIEVAL_MODE",
    "S3_BUCKET_NAME",
    "AWS_S3_BUCKET",
    "AWS_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "BRAIN_CONFIG",
    "BRAIN_BUILD_DIR",
    "BRAIN_PUBLISH_ROOT",
    "BRAIN_EVAL_FIXTURE",
    "BRAIN_EMBEDDING_PROVIDER",
    "DAGSTER_HOME",
    "BRAIN_STATE_LEDGER",
    "BRAIN_STATE_BLOBS",
)


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in LEAKY_ENV:
        monkeypatch.delenv(name, raising=False)
    yield


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoS3Server]:
    """moto's standalone S3 server on 127.0.0.1, one child process for the session."""
    with MotoS3Server.start() as server:
        yield server


@pytest.fixture
def s3(moto_server: MotoS3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoS3Server]:
    """A clean moto server reachable by a plain boto3 client through the environment."""
    moto_server.disable_auth()
    moto_server.reset()
    moto_server.requests_settled()
    moto_server.clear_requests()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_server.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", TEST_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", TEST_SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", TEST_REGION)
    try:
        yield moto_server
    finally:
        moto_server.disable_auth()
        moto_server.reset()


@pytest.fixture
def layout(tmp_path: Path) -> StateLayout:
    """A build directory's layout under the test's temporary folder (not created)."""
    return StateLayout.of(tmp_path / "build")


SYSTEM_DEPS = Path(__file__).resolve().parents[1] / "tools" / "system_deps.sh"
"""What the suite needs from the system (Chromium, Node.js, PostgreSQL), the script
`.ci/run` runs too."""


def system_set_up(script: Path = SYSTEM_DEPS) -> str | None:
    """Install the missing system packages (as root, with apt-get); None when all is there,
    else the one line saying the exact command to run."""
    import subprocess

    done = subprocess.run(["bash", str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if done.returncode == 0:
        return None
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"{script} failed (exit {done.returncode})"


LONGEST_FIRST = (
    "brain_pipeline_tests/workers/",
    "brain_pipeline_tests/lib/test_conditions.py",
    "brain_pipeline_tests/defs/test_multiprocess_postgres.py",
    "brain_pipeline_tests/locks/",
    "brain_pipeline_tests/ui/",
)
"""Tests that take minutes each (several worker processes, a daemon, a browser). The suite
runs on every core (pytest-xdist); handed out first, they run side by side instead of
leaving one core busy with them at the end while the others idle."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the longest tests first, keeping the order within each group."""

    def rank(item: pytest.Item) -> int:
        where = item.nodeid
        return next((i for i, p in enumerate(LONGEST_FIRST) if where.startswith(p)),
                    len(LONGEST_FIRST))

    items.sort(key=rank)


def pytest_sessionstart(session: pytest.Session) -> None:
    """`python -m pytest` on a fresh machine does its own set-up, as `.ci/run` does (once,
    in the controlling process, before pytest-xdist starts its workers)."""
    if hasattr(session.config, "workerinput"):
        return
    problem = system_set_up()
    if problem is not None:
        pytest.exit(problem, returncode=pytest.ExitCode.USAGE_ERROR)
