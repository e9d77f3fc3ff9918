"""Gemini embeddings through google-genai, with our own pacing and retry.

The SDK's retry option is deliberately not used: it backs off blindly and ignores the
RetryInfo delay a 429 carries, which is the one figure that says when the quota is back.
The base URL is left to the SDK unless given, so GOOGLE_GEMINI_BASE_URL (which the SDK
reads when no explicit base_url is passed) redirects it — the tests rely on that.

Texts are sent as one `Content` each, never as a list of strings: for multimodal
embedding models (the SDK's test: "gemini" in the name, except gemini-embedding-001 and
gemini-embedding-exp*, so gemini-embedding-2 among them) google-genai merges a list of
strings into ONE multi-part content, for which the service returns ONE vector. A list of
`Content` objects is kept as it is for every model: one `requests[]` entry per text on
the Developer API's `:batchEmbedContents` (the only endpoint the SDK uses there).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Sequence
from typing import Any

import httpx2
import numpy as np
import numpy.typing as npt
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from brain_pipeline.embedding.pacing import (
    Clock,
    Failure,
    FailureKind,
    FatalFailure,
    QuotaPacer,
    RetriesExhausted,
    RetryPolicy,
    RetryStats,
    Sleep,
    call_with_retry,
    retry_delay_from_details,
)
from brain_pipeline.embedding.protocol import (
    AnswerMatrix,
    EmbeddingInputRefused,
    EmbeddingRejected,
    EmbeddingUnavailable,
    FloatVector,
    QueryCache,
    unit_rows,
)
from brain_pipeline.embedding.validate import answer_matrix

DEFAULT_MODEL = "gemini-embedding-001"
DEFAULT_DIMENSION = 256
SERVICE_MAX_BATCH = 100
DOCUMENT_TASK = "RETRIEVAL_DOCUMENT"
QUERY_TASK = "RETRIEVAL_QUERY"


def _redact(text: str, secret: str) -> str:
    """Remove the key from any text that might reach a log or an exception."""
    return text.replace(secret, "***") if secret else text


def describe_client_error(code: int, status: str, message: str, model: str) -> str:
    """A message naming the likely cause of a non-retryable refusal."""
    detail = f"({code} {status}: {message})" if message else f"({code} {status})"
    lowered = message.lower()
    if code in (400, 401) and ("api key" in lowered or "api_key" in lowered or code == 401):
        return f"Gemini rejected the API key; check GEMINI_API_KEY {detail}"
    if code == 403:
        return (
            "Gemini refused access: the key is not allowed to use this API or model "
            f"{detail}"
        )
    if code == 404:
        return f"Gemini does not know the model {model!r} {detail}"
    return f"Gemini rejected the request {detail}"


_NAMED_REQUEST = re.compile(r"requests\[(\d+)\](?:\.(\w+))?")


def input_refusal(code: int, status: str, message: str) -> tuple[bool, int | None]:
    """(is this 400 about the request's texts, the text it names or None).

    A 400 INVALID_ARGUMENT is about the inputs unless it is about the key, or names a
    field of a request other than its content (`requests[0].output_dimensionality`:
    every text would be refused the same way, so splitting the batch cannot help).
    """
    if code != 400 or status != "INVALID_ARGUMENT":
        return False, None
    lowered = message.lower()
    if "api key" in lowered or "api_key" in lowered:
        return False, None
    match = _NAMED_REQUEST.search(message)
    if match is None:
        return True, None
    field = match.group(2)
    if field is not None and field != "content":
        return False, None
    return True, int(match.group(1))


def one_content_per_text(texts: Sequence[str]) -> list[types.Content]:
    """One user `Content` with one text part per text, so each text gets its own vector.

    The role is set as the SDK sets it for plain strings, so the request body for
    gemini-embedding-001 is the same as before this form was used.
    """
    return [types.Content(role="user", parts=[types.Part(text=text)]) for text in texts]


class GeminiEmbedder:
    """`Embedder` over gemini-embedding-001 (or another Gemini embedding model)."""

    def __init__(
        self,
        *,
        api_key: str,
        model: str = DEFAULT_MODEL,
        dimension: int = DEFAULT_DIMENSION,
        texts_per_minute: float = 3000,
        requests_per_minute: float | None = None,
        max_attempts: int = 6,
        batch_size: int = SERVICE_MAX_BATCH,
        base_url: str | None = None,
        api_version: str | None = None,
        timeout_seconds: float = 60.0,
        window_seconds: float = 60.0,
        retry_policy: RetryPolicy | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if not api_key:
            raise EmbeddingRejected("the Gemini provider needs an API key")
        self.name = model
        self.dimension = int(dimension)
        self.pacer = QuotaPacer(
            texts_per_minute,
            requests_per_minute,
            max_batch=max(1, min(batch_size, SERVICE_MAX_BATCH)),
            window_seconds=window_seconds,
            clock=clock,
            sleep=sleep,
        )
        self.max_batch = self.pacer.batch_limit
        self.policy = retry_policy or RetryPolicy(max_attempts=max_attempts)
        self.stats = RetryStats()
        self._api_key = api_key
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._queries = QueryCache()
        options: dict[str, Any] = {"timeout": int(timeout_seconds * 1000)}
        if base_url:
            options["base_url"] = base_url
        if api_version:
            options["api_version"] = api_version
        # One long-lived client: a temporary one is closed by its destructor mid-use.
        self._client = genai.Client(api_key=api_key, http_options=types.HttpOptions(**options))

    def __repr__(self) -> str:  # never show the key
        return f"GeminiEmbedder(model={self.name!r}, dimension={self.dimension})"

    def embed_documents(self, texts: Sequence[str]) -> AnswerMatrix:
        """The service's float64 values, one row per text, not normalised (the builder
        quantises them with the agent's arithmetic)."""
        rows = []
        for start in range(0, len(texts), self.max_batch):
            try:
                rows.append(self._embed_batch(list(texts[start : start + self.max_batch]),
                                              DOCUMENT_TASK))
            except EmbeddingInputRefused as exc:
                index = None if exc.index is None else exc.index + start
                raise EmbeddingInputRefused(str(exc), index) from None
        if not rows:
            return np.zeros((0, self.dimension), dtype=np.float64)
        stacked: npt.NDArray[np.float64] = np.vstack(rows).astype(np.float64, copy=False)
        return stacked

    def embed_query(self, text: str) -> FloatVector:
        return self._queries.get_or_compute(
            text, lambda q: unit_rows(self._embed_batch([q], QUERY_TASK))[0]
        )

    def _embed_batch(self, texts: list[str], task: str) -> AnswerMatrix:
        config = types.EmbedContentConfig(task_type=task, output_dimensionality=self.dimension)
        contents = one_content_per_text(texts)

        def send() -> Any:
            return self._client.models.embed_content(
                model=self.name, contents=contents, config=config
            )

        try:
            response = call_with_retry(
                send,
                self._classify,
                self.policy,
                stats=self.stats,
                before_attempt=lambda: self.pacer.acquire(len(texts)),
                sleep=self._sleep,
                rng=self._rng,
            )
        except FatalFailure as exc:
            if exc.failure.kind is FailureKind.INPUT:
                index = exc.failure.request_index
                named = index if index is not None and 0 <= index < len(texts) else None
                raise EmbeddingInputRefused(str(exc), named) from None
            raise EmbeddingRejected(str(exc)) from None
        except RetriesExhausted as exc:
            raise EmbeddingUnavailable(_redact(str(exc), self._api_key)) from None
        return self._vectors(response, len(texts))

    def _vectors(self, response: Any, expected: int) -> AnswerMatrix:
        """The answer's values as float64, exactly as the JSON carried them; a wrong
        count or dimension raises `validate.InvalidAnswer`."""
        embeddings = response.embeddings or []
        return answer_matrix([e.values or [] for e in embeddings], expected, self.dimension)

    def _classify(self, exc: BaseException) -> Failure | None:
        """Sort an SDK or transport exception into quota / transient / fatal."""
        if isinstance(exc, genai_errors.APIError):
            code = int(exc.code or 0)
            status = str(exc.status or "")
            message = _redact(str(exc.message or ""), self._api_key)
            if code == 429:
                delay = retry_delay_from_details(exc.details)
                return Failure(FailureKind.QUOTA, f"quota exceeded (429 {status})", delay)
            if code >= 500 or code == 408:
                return Failure(FailureKind.TRANSIENT, f"server error {code} {status}: {message}")
            about_inputs, index = input_refusal(code, status, message)
            if about_inputs:
                return Failure(
                    FailureKind.INPUT, f"Gemini refused a text ({code} {status}: {message})",
                    request_index=index,
                )
            return Failure(
                FailureKind.FATAL, describe_client_error(code, status, message, self.name)
            )
        if isinstance(exc, httpx2.TransportError):
            return Failure(FailureKind.TRANSIENT, f"network error: {type(exc).__name__}")
        return None
