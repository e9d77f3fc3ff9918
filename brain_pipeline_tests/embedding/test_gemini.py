"""GeminiEmbedder through the real google-genai SDK against our fake Gemini server."""

from __future__ import annotations

import socket
import traceback

import numpy as np
import pytest

from brain_pipeline.embedding.pacing import RetryPolicy
from brain_pipeline.embedding.protocol import EmbeddingRejected, EmbeddingUnavailable
from brain_pipeline_tests.embedding.conftest import SDK_MODE_VARIABLES
from brain_pipeline_tests.embedding.helpers import API_KEY, gemini
from brain_pipeline_tests.fake_time import FakeTime
from brain_pipeline_tests.peers.fake_gemini import FakeGemini, fake_vector


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_environment_base_url_reaches_our_server_with_documents_task(
    gemini_server: FakeGemini,
) -> None:
    embedder = gemini(dimension=24)  # no base_url: the SDK must read GOOGLE_GEMINI_BASE_URL
    vectors = embedder.embed_documents(["alpha paragraph", "beta paragraph"])
    assert vectors.shape == (2, 24)
    # The answer's own float64 values, not normalised (the builder quantises them as
    # the agent does): bit for bit what the JSON carried.
    assert vectors.dtype == np.float64
    for row, text in zip(vectors, ["alpha paragraph", "beta paragraph"], strict=True):
        assert row.tolist() == fake_vector(text, 24).tolist()
    stats = gemini_server.stats()
    assert stats.requests == 1
    assert stats.task_types == {"RETRIEVAL_DOCUMENT": 2}
    assert stats.api_versions == {"v1": 1}


def test_batches_never_exceed_one_hundred_texts(gemini_server: FakeGemini) -> None:
    texts = [f"text number {i}" for i in range(250)]
    vectors = gemini().embed_documents(texts)
    assert vectors.shape == (250, 16)
    assert gemini_server.stats().batch_sizes == [100, 100, 50]


def test_the_server_refuses_oversized_batches_as_the_service_does(
    gemini_server: FakeGemini,
) -> None:
    from google import genai
    from google.genai import errors

    client = genai.Client(api_key=API_KEY)
    with pytest.raises(errors.ClientError) as caught:
        client.models.embed_content(model="gemini-embedding-001",
                                    contents=[f"t{i}" for i in range(101)])
    assert caught.value.code == 400


def test_query_uses_query_task_and_is_cached(gemini_server: FakeGemini) -> None:
    embedder = gemini()
    first = embedder.embed_query("how are vectors reused")
    second = embedder.embed_query("how are vectors reused")
    np.testing.assert_array_equal(first, second)
    assert first.shape == (16,)
    stats = gemini_server.stats()
    assert stats.requests == 1
    assert stats.task_types == {"RETRIEVAL_QUERY": 1}




def test_quota_refusal_is_waited_out_using_the_stated_delay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No wall clock: the server's quota windows and the client's waits share a fake clock,
    # so the test asserts the schedule of waits, the same on any machine at any load.
    for name in SDK_MODE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    t = FakeTime()
    with FakeGemini(api_key=API_KEY, clock=t.clock, quota_texts=20, window_seconds=1.0) as server:
        embedder = gemini(base_url=server.url, batch_size=10, clock=t.clock, sleep=t.sleep)
        vectors = embedder.embed_documents([f"quota text {i}" for i in range(50)])
        stats = server.stats()
    assert vectors.shape == (50, 16)
    assert stats.texts == 50 and stats.batch_sizes == [10] * 5
    # The pacer (capacity one batch) spaces batches by `pace`. 20 texts per 1 s window in
    # batches of 10: the third batch is refused with 1 - 2·pace s left in the window, the
    # fifth with 0.95 - 2·pace s left (the client resumed 0.05 s into the second window).
    # Each quota wait is the stated delay plus the policy's 0.05 s headroom, nothing more.
    pace = 10 * 60.0 / embedder.pacer.texts_rate_per_minute
    assert stats.rate_limited == 2 == embedder.stats.rate_limited
    expected_sleeps = [pace, pace, 1.05 - 2 * pace, pace, pace, 1.0 - 2 * pace]
    assert t.sleeps == [pytest.approx(s, abs=1e-9) for s in expected_sleeps]
    assert embedder.stats.waited_seconds == pytest.approx(sum(expected_sleeps), abs=1e-9)
    accepted = [at - 1000.0 for at in stats.accepted_at]
    assert accepted == [pytest.approx(a, abs=1e-9) for a in (0, pace, 1.05, 1.05 + pace, 2.05)]


def test_server_errors_are_retried(gemini_server: FakeGemini) -> None:
    gemini_server.configure(script=[500, 503])
    embedder = gemini()
    vectors = embedder.embed_documents(["survives two failures"])
    assert vectors.shape == (1, 16)
    assert gemini_server.stats().requests == 3
    assert embedder.stats.retries == 2


def test_server_errors_give_up_after_the_allowed_attempts(gemini_server: FakeGemini) -> None:
    gemini_server.configure(script=[503] * 10)
    with pytest.raises(EmbeddingUnavailable, match="503"):
        gemini().embed_documents(["never answered"])
    assert gemini_server.stats().requests == 4


def test_a_slow_response_times_out_and_is_retried(gemini_server: FakeGemini) -> None:
    gemini_server.configure(delay_seconds=0.6)
    embedder = gemini(timeout_seconds=0.2,
                      retry_policy=RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.02))
    with pytest.raises(EmbeddingUnavailable, match="ReadTimeout"):
        embedder.embed_documents(["too slow"])
    assert embedder.stats.requests == 2


def test_connection_refused_is_retried_then_reported() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = gemini(base_url=f"http://127.0.0.1:{port}")  # nothing listens there
    with pytest.raises(EmbeddingUnavailable, match="ConnectError"):
        embedder.embed_documents(["nobody home"])
    assert embedder.stats.requests == 4


def _assert_key_free(exc: BaseException, key: str) -> None:
    text = "".join(traceback.format_exception(exc))
    assert key not in text
    assert key not in repr(exc)


@pytest.mark.parametrize(
    ("settings", "overrides", "cause"),
    [
        ({}, {"api_key": "wrong-key-secret-0123456789"}, "API key"),
        ({"forbidden_keys": [API_KEY]}, {}, "refused access"),
        ({}, {"model": "gemini-embedding-404"}, "does not know the model 'gemini-embedding-404'"),
    ],
    ids=["bad-key", "forbidden", "unknown-model"],
)
def test_refusals_stop_at_once_with_a_key_free_message(
    gemini_server: FakeGemini, settings: dict[str, object], overrides: dict[str, object],
    cause: str,
) -> None:
    gemini_server.configure(**settings)
    embedder = gemini(**overrides)
    key = str(overrides.get("api_key", API_KEY))
    with pytest.raises(EmbeddingRejected) as caught:
        embedder.embed_documents(["refused"])
    assert cause in str(caught.value)
    _assert_key_free(caught.value, key)
    assert key not in repr(embedder)
    assert gemini_server.stats().requests == 1  # never retried


def test_v1beta_and_the_http_control_endpoints(gemini_server: FakeGemini) -> None:
    import json
    import urllib.request

    def call(method: str, path: str, body: object = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(gemini_server.url + path, data=data, method=method,
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())

    call("POST", "/config", {"script": [503]})
    embedder = gemini(api_version="v1beta")
    assert embedder.embed_documents(["over v1beta"]).shape == (1, 16)
    stats = call("GET", "/stats")
    assert isinstance(stats, dict)
    assert (stats["requests"], stats["texts"], stats["errors"]) == (2, 1, 1)
    assert stats["api_versions"] == {"v1beta": 2}
    call("POST", "/reset")
    assert gemini_server.stats().requests == 0


EMBEDDING_MODELS = ("gemini-embedding-001", "gemini-embedding-2")


@pytest.mark.parametrize("model", EMBEDDING_MODELS)
def test_every_text_gets_its_own_vector_with_every_embedding_model(
    gemini_server: FakeGemini, model: str
) -> None:
    texts = [f"paragraph {i} about model {model}" for i in range(130)]  # two requests
    embedder = gemini(model=model, dimension=24)
    vectors = embedder.embed_documents(texts)
    assert vectors.shape == (130, 24)
    stats = gemini_server.stats()
    assert stats.batch_sizes == [100, 30]
    assert stats.merged_contents == 0
    for index in (0, 57, 99, 100, 129):  # each row is that text's own single-text vector
        alone = embedder.embed_documents([texts[index]])
        np.testing.assert_allclose(vectors[index], alone[0], rtol=1e-5, atol=1e-6)
        assert vectors[index].tolist() == fake_vector(texts[index], 24).tolist()
    query = embedder.embed_query("a query")
    np.testing.assert_allclose(query, _unit(fake_vector("a query", 24)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("model", "vectors"), [("gemini-embedding-001", 3),
                                                ("gemini-embedding-2", 1)])
def test_the_peer_answers_a_list_of_strings_as_the_service_does(
    gemini_server: FakeGemini, model: str, vectors: int
) -> None:
    """What made gemini-embedding-2 fail: the SDK merges plain strings into one content
    for a multimodal model, and the service (so the peer) answers it with one vector."""
    from google import genai
    from google.genai import types

    texts = ["first", "second", "third"]
    client = genai.Client(api_key=API_KEY)
    response = client.models.embed_content(
        model=model, contents=texts, config=types.EmbedContentConfig(output_dimensionality=8)
    )
    assert len(response.embeddings or []) == vectors
    assert gemini_server.stats().merged_contents == (1 if vectors == 1 else 0)
    if vectors == 1:
        merged = np.asarray(response.embeddings[0].values)  # type: ignore[index]
        np.testing.assert_allclose(merged, fake_vector("first\nsecond\nthird", 8))
        assert not np.allclose(merged, fake_vector("first", 8))
