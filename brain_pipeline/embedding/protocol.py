"""The one small interface every embedding provider implements, its errors and helpers.

The builder, the Dagster asset and the retriever only ever see `Embedder`; which
provider stands behind it is decided once, in `embedding.factory`. Provider modules
import this one and nothing imports them back but the factory.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from brain_pipeline.embedding.pacing import RetryStats

FloatMatrix = npt.NDArray[np.float32]
FloatVector = npt.NDArray[np.float32]
AnswerMatrix = npt.NDArray[np.float32] | npt.NDArray[np.float64]


class Embedder(Protocol):
    """Turns texts into vectors of a fixed dimension.

    `name` is the model name written into embeddings.bin: vectors are only ever reused
    by a later build when both `name` and `dimension` match.
    `max_batch` is how many texts the builder hands over per call (and so per vector pack).
    """

    name: str
    dimension: int
    max_batch: int

    def embed_documents(self, texts: Sequence[str]) -> AnswerMatrix:
        """One row per text (n × dimension), as the model answered it: the builder
        validates every row and quantises from these values (float64 for a service, so
        nothing is rounded before the agent's own arithmetic). May raise
        `EmbeddingInputRefused` for a text the service will not take, and
        `validate.InvalidAnswer` for an answer that does not fit the request."""
        ...

    def embed_query(self, text: str) -> FloatVector:
        """A unit-length float32 vector (dimension,) for a search query."""
        ...


@runtime_checkable
class ReportsStats(Protocol):
    """Providers that talk to a service expose request, 429 and waiting figures."""

    stats: RetryStats


class EmbeddingError(RuntimeError):
    """Embedding could not be done. Messages never contain credentials."""


class EmbeddingRejected(EmbeddingError):
    """The service refused the request for a reason retrying cannot fix (key, access, model)."""


class EmbeddingInputRefused(EmbeddingError):
    """The service refused a request for one of its texts (400 INVALID_ARGUMENT about the
    inputs, e.g. over the token limit). `index` is the text it named (0-based in the
    texts handed to `embed_documents`), or None when it named none: the builder then
    splits the batch until it finds the text. Never raised for a key or model problem."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


class EmbeddingUnavailable(EmbeddingError):
    """The service kept failing (quota exhausted, 5xx, network) after every allowed attempt."""


class LocalModelUnavailable(EmbeddingError):
    """The bundled ONNX model or its tokenizer is missing or not the file we pinned."""


class QueryCache:
    """A tiny LRU of query vectors, so a session of searches embeds each query once."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._items: OrderedDict[str, FloatVector] = OrderedDict()

    def get_or_compute(self, text: str, compute: Callable[[str], FloatVector]) -> FloatVector:
        hit = self._items.get(text)
        if hit is not None:
            self._items.move_to_end(text)
            return hit
        vector = compute(text)
        vector.setflags(write=False)
        self._items[text] = vector
        if len(self._items) > self._size:
            self._items.popitem(last=False)
        return vector


def unit_rows(matrix: npt.ArrayLike) -> FloatMatrix:
    """L2-normalise rows in float32; zero rows stay zero."""
    data = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(data, axis=1, keepdims=True)
    return np.divide(data, norms, out=np.zeros_like(data), where=norms > 0)
