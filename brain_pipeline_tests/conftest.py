"""Session-wide test hygiene: no test may see the developer's keys, buckets or corpus."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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
)


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in LEAKY_ENV:
        monkeypatch.delenv(name, raising=False)
    yield
