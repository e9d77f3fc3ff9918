"""Each embedding model's documented input limits, a conservative token estimate, and
the `embedding.too_long` policy applied before a text is sent.

Why estimate at all: the service refuses a whole request when one of its texts is over
the model's input limit, so a text known to be too long is better handled here (cut to
the longest head that fits, or skipped) than discovered by a refused request. The
service's tokenizer is not available offline, so the estimate errs on the long side:
ASCII letters cost one token per 3 (real English averages about 4 characters per
token), a space nothing, every other character one token (digits are split one by
one; accented letters, CJK, Cyrillic, Arabic, Devanagari ... are close to one token
per character or cheaper; line breaks and punctuation usually are one) and an astral
character two. A text the service still refuses after truncation is refused like any other
(see `builder`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TooLongPolicy = Literal["truncate", "skip"]
TOO_LONG_POLICIES: tuple[TooLongPolicy, ...] = ("truncate", "skip")


@dataclass(frozen=True)
class ModelLimits:
    """What one request to a model may hold.

    `max_tokens`: input tokens per text. `max_texts`: texts per request.
    `self_truncating`: the model cuts long inputs itself (the bundled local model), so
    nothing is estimated or cut before sending.
    """

    max_tokens: int
    max_texts: int
    self_truncating: bool = False


#: The one table of documented limits. A model not listed gets `FALLBACK_LIMITS`.
MODEL_LIMITS: dict[str, ModelLimits] = {
    "gemini-embedding-001": ModelLimits(max_tokens=2048, max_texts=100),
    "text-embedding-004": ModelLimits(max_tokens=2048, max_texts=100),
    "gemini-embedding-2": ModelLimits(max_tokens=8192, max_texts=100),
    "all-MiniLM-L6-v2-int8": ModelLimits(max_tokens=256, max_texts=64, self_truncating=True),
}
FALLBACK_LIMITS = ModelLimits(max_tokens=2048, max_texts=100)


def limits_for(model: str) -> ModelLimits:
    """The documented limits of `model` (the most common Gemini limits when unknown)."""
    return MODEL_LIMITS.get(model, FALLBACK_LIMITS)


def token_costs(text: str) -> list[float]:
    """The estimated cost of each character, so that any prefix's estimate is a sum.

    An ASCII letter costs 1/3, a space nothing (it joins the next word), an astral
    character 2, any other character (digits, which Gemini's tokenizer splits one by
    one, line breaks, punctuation, symbols, accented letters, non-Latin scripts) 1.
    """
    costs = []
    for char in text:
        if char.isascii() and char.isalpha():
            costs.append(1 / 3)
        elif char == " ":
            costs.append(0.0)
        elif ord(char) > 0xFFFF:
            costs.append(2.0)
        else:
            costs.append(1.0)
    return costs


def estimate_tokens(text: str) -> int:
    """A token count that is at least what the service's tokenizer counts for `text`."""
    return _ceil(sum(token_costs(text)))


def _ceil(value: float) -> int:
    whole = int(value)
    return whole if value - whole < 1e-9 else whole + 1


def longest_fitting_head(text: str, max_tokens: int) -> str:
    """The longest prefix of `text` whose estimate is at most `max_tokens`."""
    total = 0.0
    for index, cost in enumerate(token_costs(text)):
        if _ceil(total + cost) > max_tokens:
            return text[:index]
        total += cost
    return text


@dataclass(frozen=True)
class Prepared:
    """What the builder sends for one text, or why it sends nothing.

    `text` is None when the policy skips it; `estimated_tokens` is the whole text's
    estimate when it was over the limit (truncated or skipped), else None.
    """

    text: str | None
    estimated_tokens: int | None = None

    @property
    def truncated(self) -> bool:
        return self.text is not None and self.estimated_tokens is not None


def prepare(text: str, limits: ModelLimits, policy: TooLongPolicy) -> Prepared:
    """Apply the limit and the policy to one text before it is sent."""
    if limits.self_truncating:
        return Prepared(text)
    estimate = estimate_tokens(text)
    if estimate <= limits.max_tokens:
        return Prepared(text)
    if policy == "skip":
        return Prepared(None, estimate)
    return Prepared(longest_fitting_head(text, limits.max_tokens), estimate)
