"""Fixtures: our fake Gemini server on loopback, reached by the real google-genai SDK
through GOOGLE_GEMINI_BASE_URL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from brain_pipeline_tests.embedding.helpers import API_KEY
from brain_pipeline_tests.peers.fake_gemini import FakeGemini

SDK_MODE_VARIABLES = (
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_ENTERPRISE",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_GENAI_API_VERSION",
)


@pytest.fixture
def gemini_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    """A fresh server per test; the SDK finds it only through the environment."""
    for name in SDK_MODE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with FakeGemini(api_key=API_KEY) as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        yield server
