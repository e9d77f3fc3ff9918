"""The agent's tokenizer: lower-case, split on non-alphanumerics, drop stopwords, stem.

Lower-casing matches JavaScript's `String.prototype.toLowerCase`. Only characters whose
lower-case form contains ASCII letters or digits can change a token, and across all of
Unicode there are exactly two: U+0130 (İ -> "i" + U+0307, so the "i" becomes a
one-letter token and is dropped) and U+212A (Kelvin sign -> "k"). Python's `str.lower`
maps both exactly as Node 20 does; the only other disagreements (characters added after
Python's Unicode 14 tables) lower-case to non-ASCII letters, which are separators anyway.
This was checked code point by code point against Node and is pinned by the tests.
"""

from __future__ import annotations

import re

# fmt: off
STOPWORDS: frozenset[str] = frozenset(
    {
        "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
        "because", "been", "before", "being", "between", "both", "but", "by", "can", "could", "did",
        "do", "does", "doing", "done", "down", "during", "each", "few", "for", "from", "further",
        "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "however",
        "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my",
        "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "out",
        "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the",
        "their", "theirs", "them", "then", "there", "these", "they", "this", "those", "through",
        "to", "too", "under", "until", "up", "us", "very", "was", "we", "were", "what", "when",
        "where", "whether", "which", "while", "who", "whom", "why", "will", "with", "would", "you",
        "your", "yours",
    }
)
# fmt: on

IRREGULAR_PLURALS: dict[str, str] = {
    "automata": "automaton",
    "phenomena": "phenomenon",
    "criteria": "criterion",
    "indices": "index",
    "matrices": "matrix",
    "vertices": "vertex",
    "analyses": "analysis",
    "hypotheses": "hypothesis",
    "data": "datum",
}

_ES_SUFFIX = re.compile(r"(?:ch|sh|x|z|s)es$")
_KEEP_S = ("ss", "us", "is")

# Splitting is done on bytes: after lower-casing, every non-ASCII character becomes "?"
# and every byte outside [a-z0-9] a space, so `bytes.split()` yields exactly the pieces of
# the agent's split(/[^a-z0-9]+/), at C speed. One-character pieces are dropped by
# `term_of`, which maps them (and stopwords) to "".
_SEPARATE = bytes(c if (0x30 <= c <= 0x39 or 0x61 <= c <= 0x7A) else 0x20 for c in range(256))

# Memo of raw word -> stemmed term ("" when dropped). Corpora reuse a small vocabulary, so
# this turns per-token filtering and stemming into one dict lookup. Bounded to stay small.
_MEMO: dict[bytes, str] = {}
_MEMO_LIMIT = 500_000


def stem(token: str) -> str:
    """The agent's suffix stripper; irregular plurals are a plain dict lookup.

    The JS original used an object literal, so `constructor` and friends hit built-in
    properties; here they are ordinary words (a deliberate deviation).
    """
    irregular = IRREGULAR_PLURALS.get(token)
    if irregular is not None:
        return irregular
    n = len(token)
    if n > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if n > 4 and _ES_SUFFIX.search(token):
        return token[:-2]
    if n > 3 and token.endswith("s") and not token.endswith(_KEEP_S):
        return token[:-1]
    return token


def raw_words(text: str) -> list[bytes]:
    """The lower-cased [a-z0-9]+ runs of `text` (any length), as ASCII bytes."""
    return text.lower().encode("ascii", "replace").translate(_SEPARATE).split()


def term_of(word: bytes) -> str:
    """One raw word's index term, or "" when it is shorter than 2 or a stopword."""
    term = _MEMO.get(word)
    if term is None:
        text = word.decode("ascii")
        term = "" if len(text) < 2 or text in STOPWORDS else stem(text)
        if len(_MEMO) >= _MEMO_LIMIT:
            _MEMO.clear()
        _MEMO[word] = term
    return term


def clear_memo() -> None:
    """Forget memoised words (benchmarks use it to time cold builds)."""
    _MEMO.clear()


def tokenize(text: str) -> list[str]:
    """lower-case; split on [^a-z0-9]+; keep length >= 2 non-stopwords; stem each."""
    memo = _MEMO
    terms = [memo.get(w) or term_of(w) for w in raw_words(text)]
    return [t for t in terms if t]
