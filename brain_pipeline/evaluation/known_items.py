"""Known-item queries made from the store itself: what a gate can ask with no labels.

A *known item* is one passage of the store and the query a learner would type to find it
again. Nobody labels it: the query is made from the passage's own opening (for a heading
chunk, the heading), so the passage is by construction the answer. Asked again of a
later build, it tells whether the agent can still find what it could find before.

The query, as a learner retypes a remembered opening (`learner_query`):

- the first sentence of the passage (at most `OPENING_WORDS` words), markup ignored;
- lower-cased, punctuation dropped, stopwords and one-letter words dropped (the agent's
  own tokenizer decides what a word is), each word once;
- at most `MAX_QUERY_WORDS` words, in reading order; when there are more, the rarest in
  the area are kept;
- no query (the chunk is not asked about) when fewer than two words remain, or when none
  of them is *distinctive*: in at most `DISTINCTIVE_SHARE` of the area's chunks (and at
  most `MIN_DISTINCTIVE_DF` chunks in a tiny area). "Click here for more information"
  has nothing a learner could find it by.

The sample (`sample_area`): per area, chunks in the order of a hash of their id, the
first `size` that have a query. Ids hash the text, so an unchanged passage keeps its
place in the order and its query: the cache (`QueryCache`, chunk id -> query or None)
is consulted first and only new ids are read and tokenised. Deterministic throughout.
Pure: no files (the caller keeps the cache), no Dagster.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from brain_pipeline.corpus.store import Chunk, heading_text
from brain_pipeline.retrieval.text import raw_words, term_of
from brain_pipeline.utils.digest import order_key

OPENING_WORDS = 30
MAX_QUERY_WORDS = 6
DISTINCTIVE_SHARE = 0.02
MIN_DISTINCTIVE_DF = 2
TEXT_KEPT = 1200
"""Characters of a target's text kept in the baseline: enough to recognise its successor."""

_MARKUP = re.compile(r"[#*_`>|~\[\]()<>{}=]+")
_SENTENCE_END = re.compile(r"[.!?;:](?:\s|$)|\n")

DocumentFrequency = Callable[[str], int]
"""term -> in how many of the area's chunks it occurs."""
QueryCache = MutableMapping[str, str | None]
"""chunk id -> its query, or None when it has nothing distinctive (also remembered)."""


@dataclass(frozen=True)
class KnownItem:
    """One passage and the learner's query for it, with where it was asked and found."""

    area: str
    target: str
    """The chunk id that answers the query."""
    query: str
    source: str
    heading: str
    text: str
    """The first `TEXT_KEPT` characters of the passage (to recognise an edited successor)."""
    rank: int | None = None
    """1-based rank of the target in the agent's top 10 when the sample was made."""
    top: tuple[str, ...] = ()
    """The top-10 ids then (what entered the top 10 later displaced the answer)."""

    @property
    def found(self) -> bool:
        return self.rank is not None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["top"] = list(self.top)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KnownItem:
        rank = data.get("rank")
        return cls(
            area=str(data["area"]),
            target=str(data["target"]),
            query=str(data["query"]),
            source=str(data.get("source", "")),
            heading=str(data.get("heading", "")),
            text=str(data.get("text", "")),
            rank=int(rank) if rank is not None else None,
            top=tuple(str(i) for i in data.get("top", ())),
        )


def _opening(content: str) -> str:
    """The first sentence (or line) of a passage, markup removed, at most OPENING_WORDS."""
    text = _MARKUP.sub(" ", content).strip()
    end = _SENTENCE_END.search(text)
    first = text[: end.start()] if end else text
    return " ".join(first.split()[:OPENING_WORDS])


def distinctive_limit(n_docs: int) -> int:
    """Most chunks of an area of `n_docs` a distinctive term may occur in."""
    return max(MIN_DISTINCTIVE_DF, math.ceil(DISTINCTIVE_SHARE * n_docs))


def learner_query(content: str, df: DocumentFrequency, n_docs: int) -> str | None:
    """The query a learner would retype for `content` (see the module doc), or None."""
    words: list[str] = []
    terms: list[str] = []
    for raw in raw_words(_opening(content)):
        term = term_of(raw)
        if not term or term in terms or raw.isdigit():
            continue
        words.append(raw.decode("ascii"))
        terms.append(term)
    if len(words) < 2:
        return None
    frequencies = [df(term) for term in terms]
    limit = distinctive_limit(n_docs)
    if not any(0 < f <= limit for f in frequencies):
        return None
    if len(words) > MAX_QUERY_WORDS:
        rarest = sorted(range(len(words)), key=lambda i: (frequencies[i], i))[:MAX_QUERY_WORDS]
        words = [words[i] for i in sorted(rarest)]
    return " ".join(words)


def id_order(ids: Iterable[str]) -> list[str]:
    """Distinct ids in the order of a hash of each id: a stable, well-mixed order."""
    unique = dict.fromkeys(ids)
    return sorted(unique, key=order_key)


@dataclass(frozen=True)
class AreaSample:
    """The known items of one area and the line saying why there are fewer than asked."""

    area: str
    items: tuple[KnownItem, ...]
    note: str | None = None


def sample_area(
    area: str,
    ids: Sequence[str],
    read: Callable[[Sequence[str]], Sequence[Chunk]],
    df: DocumentFrequency,
    cache: QueryCache,
    size: int,
) -> AreaSample:
    """The first `size` chunks of `area` (in `id_order`) that have a query.

    `read(ids)` decodes those chunks (only ids whose query is not cached, or that are
    picked, are read); `cache` is consulted and filled. Fewer than `size` when the area
    has fewer chunks worth asking about, and `note` says so in one line.
    """
    order = id_order(ids)
    picked: list[str] = []
    position = 0
    batch = max(size, 8)
    while len(picked) < size and position < len(order):
        window = order[position : position + batch]
        position += len(window)
        unknown = [i for i in window if i not in cache]
        if unknown:
            for chunk in read(unknown):
                cache.setdefault(chunk.id, learner_query(chunk.content, df, len(ids)))
        for chunk_id in window:
            if cache.get(chunk_id) and len(picked) < size:
                picked.append(chunk_id)
        batch *= 2
    chunks = {c.id: c for c in read(picked)} if picked else {}
    items = tuple(
        KnownItem(
            area=area,
            target=chunk_id,
            query=str(cache[chunk_id]),
            source=chunks[chunk_id].source,
            heading=heading_text(chunks[chunk_id].heading),
            text=chunks[chunk_id].content[:TEXT_KEPT],
        )
        for chunk_id in picked
        if chunk_id in chunks
    )
    note = None
    if not items:
        note = (
            f"area {area}: none of its {len(ids)} chunk(s) has distinctive words to ask "
            "about; no known items (its chunk count is still watched)"
        )
    elif len(items) < size:
        note = (
            f"area {area}: only {len(items)} of its {len(ids)} chunk(s) have distinctive "
            f"words to ask about (sample_per_area is {size})"
        )
    return AreaSample(area, items, note)
