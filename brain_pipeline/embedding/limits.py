"""Each embedding model's documented input limits and the `embedding.too_long` policy.

Nothing is cut or skipped before it is sent. The service's tokenizer is not available
offline, and any local count is a guess: an earlier version estimated tokens on the
long side (any digit or non-ASCII letter a whole token) and cut texts the service would
have embedded whole, so their vectors differed from the agent's own ingest of the same
text (which sends every text whole). Now every text goes out whole and only the
service's own verdict decides: a text it refuses as over its input limit (400
INVALID_ARGUMENT `... the input token count (N) exceeds the maximum number of tokens
allowed (M)`) is cut in proportion to the service's count N and sent again (`truncate`),
or gets no vector (`skip`); see `builder`. The local model truncates with its own
tokenizer at its own window, which is an exact count, so neither applies to it.

The table records what the documentation states, for the README, the benchmark and
anyone reading a refusal; the builder decides nothing by it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TooLongPolicy = Literal["truncate", "skip"]
TOO_LONG_POLICIES: tuple[TooLongPolicy, ...] = ("truncate", "skip")


@dataclass(frozen=True)
class ModelLimits:
    """What one request to a model may hold, as documented.

    `max_tokens`: input tokens per text. `max_texts`: texts per request.
    """

    max_tokens: int
    max_texts: int


#: The one table of documented limits. A model not listed gets `FALLBACK_LIMITS`.
MODEL_LIMITS: dict[str, ModelLimits] = {
    "gemini-embedding-001": ModelLimits(max_tokens=2048, max_texts=100),
    "text-embedding-004": ModelLimits(max_tokens=2048, max_texts=100),
    "gemini-embedding-2": ModelLimits(max_tokens=8192, max_texts=100),
    "all-MiniLM-L6-v2-int8": ModelLimits(max_tokens=256, max_texts=64),
}
FALLBACK_LIMITS = ModelLimits(max_tokens=2048, max_texts=100)


def limits_for(model: str) -> ModelLimits:
    """The documented limits of `model` (the most common Gemini limits when unknown)."""
    return MODEL_LIMITS.get(model, FALLBACK_LIMITS)


def certainly_fits(text: str, limits: ModelLimits) -> bool:
    """True when no tokenizer can count `text` over `limits.max_tokens`: every token
    covers at least one UTF-8 byte, so a text of at most that many bytes fits. A text
    above the bound may fit too (most do); only the service can say. Used to report how
    many texts the service could possibly refuse, never to cut one."""
    return len(text.encode("utf-8", "surrogatepass")) <= limits.max_tokens
