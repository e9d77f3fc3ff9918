"""The agent's original keyword retriever, kept only as the evaluation's baseline.

Nothing under `brain_pipeline.retrieval` can select it: it exists so every evaluation
shows how far BM25 and hybrid retrieval moved from where the agent started.

Semantics (the agent's JavaScript): split the lower-cased query on whitespace, keep terms
longer than 2 characters (not de-duplicated: a repeated term counts twice); a chunk in
the query's area scores one point per term that occurs anywhere in its lower-cased
content as a substring; keep positive scores; a stable sort by score, so ties keep store
order; the first `limit`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from brain_pipeline.corpus.jscompat import JS_WS_CLASS, utf16_length
from brain_pipeline.corpus.store import Chunk

# JavaScript's \s (jscompat): Python's str.split() differs (it splits on \x1c-\x1f, not
# on U+FEFF).
_JS_WHITESPACE = re.compile(f"[{JS_WS_CLASS}]+")


def legacy_terms(query: str) -> list[str]:
    """Whitespace-split lower-cased query terms longer than 2 characters, duplicates kept."""
    return [t for t in _JS_WHITESPACE.split(query.lower()) if utf16_length(t) > 2]


class LegacyRetriever:
    """Substring keyword matching over a store, per area, as the agent first shipped it."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        # Lower-case each chunk once; queries then only do substring tests.
        self._by_area: dict[str, list[tuple[Chunk, str]]] = {}
        for chunk in chunks:
            self._by_area.setdefault(chunk.area, []).append((chunk, chunk.content.lower()))

    def search(self, query: str, area: str, limit: int = 10) -> list[tuple[Chunk, int]]:
        """Top `limit` (chunk, score) of the area, score = number of matching query terms."""
        terms = legacy_terms(query)
        if not terms or limit <= 0:
            return []
        scored: list[tuple[Chunk, int]] = []
        for chunk, text in self._by_area.get(area, []):
            score = sum(1 for term in terms if term in text)
            if score > 0:
                scored.append((chunk, score))
        scored.sort(key=lambda hit: -hit[1])  # list.sort is stable: ties keep store order
        return scored[:limit]
