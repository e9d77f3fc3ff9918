"""The labelling assistant: what BM25 and hybrid retrieve for a query, for a person to judge.

Labels are only as good as the candidates a person looks at. Showing the union of the
lexical and the hybrid top lists (with the rank in each) puts both the passages that
share the query's words and the paraphrases in front of the labeller, so a fixture
does not end up biased toward whichever retriever was used to label it. Retrieval is
the same `Retriever` the evaluation and `brain-pipeline search` use; nothing here ranks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from brain_pipeline.corpus.store import Chunk, heading_text
from brain_pipeline.evaluation.fixture import Fixture
from brain_pipeline.retrieval.hybrid import QueryEmbedder, Retriever
from brain_pipeline.retrieval.vectors import EmbeddingStore

DEFAULT_LIMIT = 20
_FIRST_LINES = 2
_LINE_WIDTH = 160


class LabelError(ValueError):
    """The labelling request cannot be carried out; the message says why."""


@dataclass(frozen=True)
class LabelCandidate:
    """One retrieved chunk: its rank in each list (None when absent), where it comes from."""

    id: str
    bm25_rank: int | None
    hybrid_rank: int | None
    source: str
    heading: str
    first_lines: str
    labelled: bool
    """Already among the query's `relevant` ids in the fixture."""


@dataclass
class LabelCandidates:
    """The union of both top lists, best rank first."""

    query: str
    area: str
    candidates: list[LabelCandidate]
    hybrid_mode: str
    """"hybrid" when vectors answered, else "lexical" (the hybrid list is then BM25's)."""
    hybrid_note: str | None = None
    labelled: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "area": self.area,
            "hybrid_mode": self.hybrid_mode,
            "hybrid_note": self.hybrid_note,
            "labelled": list(self.labelled),
            "candidates": [asdict(c) for c in self.candidates],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def to_text(self) -> str:
        lines = [f"{self.query!r} in {self.area}: {len(self.candidates)} candidate(s)"]
        if self.hybrid_note:
            lines.append(f"note: hybrid answered lexically ({self.hybrid_note})")
        lines.append("bm25 hybrid  id            source § heading")
        for c in self.candidates:
            where = f"{c.source} § {c.heading}" if c.heading else c.source
            mark = "  [labelled]" if c.labelled else ""
            lines.append(
                f"{_rank(c.bm25_rank):>4} {_rank(c.hybrid_rank):>6}  {c.id}  {where}{mark}"
            )
            lines.extend(f"{'':14}{line}" for line in c.first_lines.splitlines())
        if self.labelled:
            lines.append(f"already labelled: {', '.join(self.labelled)}")
        return "\n".join(lines)


def _rank(rank: int | None) -> str:
    return "—" if rank is None else str(rank)


def _first_lines(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()][:_FIRST_LINES]
    return "\n".join(
        line if len(line) <= _LINE_WIDTH else line[: _LINE_WIDTH - 1] + "…" for line in lines
    )


def labelled_ids(fixture: Fixture | None, query: str, area: str) -> list[str]:
    """The ids the fixture already lists for (query, area)."""
    if fixture is None:
        return []
    for q in fixture.queries:
        if q.query == query and q.area == area:
            return list(q.relevant)
    return []


def label_candidates(
    chunks: Sequence[Chunk],
    query: str,
    area: str,
    *,
    fixture: Fixture | None = None,
    embeddings: EmbeddingStore | None = None,
    query_embedder: QueryEmbedder | None = None,
    query_model: str | None = None,
    hybrid_note: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> LabelCandidates:
    """BM25's and hybrid's top `limit` for `query` in `area`, merged by best rank."""
    retriever = Retriever(chunks, embeddings, query_embedder, query_model=query_model)
    if area not in retriever.areas():
        known = ", ".join(retriever.areas()) or "(none: the store is empty)"
        raise LabelError(f"no area {area!r} in the store; areas: {known}")
    if limit < 1:
        raise LabelError("--limit must be at least 1")
    lexical = retriever.search(query, area, limit=limit, mode="lexical")
    hybrid = retriever.search(query, area, limit=limit, mode="hybrid")
    bm25_rank = {hit.chunk.id: i + 1 for i, hit in enumerate(lexical.hits)}
    hybrid_rank = {hit.chunk.id: i + 1 for i, hit in enumerate(hybrid.hits)}
    chunk_of = {hit.chunk.id: hit.chunk for hit in [*lexical.hits, *hybrid.hits]}
    already = labelled_ids(fixture, query, area)
    unranked = limit + 1

    def order(chunk_key: str) -> tuple[int, int, str]:
        b, h = bm25_rank.get(chunk_key, unranked), hybrid_rank.get(chunk_key, unranked)
        return (min(b, h), b, chunk_key)

    candidates = [
        LabelCandidate(
            id=key,
            bm25_rank=bm25_rank.get(key),
            hybrid_rank=hybrid_rank.get(key),
            source=chunk_of[key].source,
            heading=heading_text(chunk_of[key].heading),
            first_lines=_first_lines(chunk_of[key].content),
            labelled=key in already,
        )
        for key in sorted(chunk_of, key=order)
    ]
    note = hybrid.fallback if hybrid.fallback else None
    if hybrid_note and hybrid.mode != "hybrid":
        note = hybrid_note
    return LabelCandidates(query, area, candidates, hybrid.mode, note, already)


@dataclass(frozen=True)
class EditedLabels:
    """What `edit_labels` did to the fixture file."""

    message: str
    backup: str | None
    created: bool = False


NEW_FIXTURE_COMMENT = (
    "{when}: started by `brain-pipeline fixture label`. Each query is asked in one area; "
    "`relevant` lists the chunk ids (hashes of paragraph text) that answer it. Add queries "
    'with `brain-pipeline fixture label "QUESTION" --area AREA --add ID ...`.'
)


def edit_labels(
    fixture_path: Path | str,
    query: str,
    area: str,
    chunks: Sequence[Chunk],
    *,
    add: Sequence[str] = (),
    remove: Sequence[str] = (),
    when: str,
) -> EditedLabels:
    """Label `add` and unlabel `remove` for (query, area) in the fixture file, atomically.

    Extends the existing query, or appends it; creates the file (with a `$comment`)
    when there is none, so a fixture can be started with the tool alone. Every added id
    must be a live chunk of `area`, so a typo cannot add a label that is stale from the
    start; removed ids need not be live (removing stale labels is the point).
    """
    from brain_pipeline.evaluation.fixture_edit import (
        add_query,
        create_fixture_file,
        new_fixture_text,
        remove_ids,
        write_fixture_text,
    )

    if not add and not remove:
        raise LabelError("no ids to add or remove")
    if not query.strip():
        raise LabelError("the query is empty")
    both = sorted(set(add) & set(remove))
    if both:
        raise LabelError(f"both added and removed: {', '.join(both)}")
    if add:
        live = {c.id for c in chunks if c.area == area}
        if not live:
            known = ", ".join(sorted({c.area for c in chunks})) or "(none: the store is empty)"
            raise LabelError(f"no area {area!r} in the store; areas: {known}")
        unknown = [i for i in add if i not in live]
        if unknown:
            raise LabelError(
                f"not live chunk ids of area {area!r}: {', '.join(unknown)} (find an id with "
                f'`brain-pipeline fixture find "TEXT" --area {area}`)'
            )
    path = Path(fixture_path)
    if not path.exists():
        if remove:
            raise LabelError(f"{path} does not exist: there is nothing to remove")
        create_fixture_file(
            path, new_fixture_text(query, area, list(add), NEW_FIXTURE_COMMENT.format(when=when))
        )
        return EditedLabels(f"created with its first query ({len(set(add))} id(s))", None, True)
    original = path.read_bytes()
    text = original.decode("utf-8")
    messages = []
    if remove:
        text, message = remove_ids(text, query, area, list(remove))
        messages.append(message)
    if add:
        text, message = add_query(text, query, area, list(add))
        messages.append(message)
    if text == original.decode("utf-8"):
        return EditedLabels("; ".join(messages), None)
    _, backup = write_fixture_text(path, original, text)
    return EditedLabels("; ".join(messages), str(backup))


@dataclass(frozen=True)
class FoundChunk:
    """A live chunk whose text contains the piece looked for."""

    id: str
    area: str
    source: str
    heading: str
    excerpt: str


def _flat(text: str) -> str:
    return " ".join(text.split()).casefold()


def find_by_text(
    chunks: Sequence[Chunk], piece: str, area: str | None = None, limit: int = 20
) -> list[FoundChunk]:
    """Live chunks (of `area`, or all) containing `piece`, ignoring case and line breaks.

    The way to the id of a paragraph a person knows is there but neither retriever
    ranked: its text, not its meaning, so the answer does not depend on the ranking.
    """
    wanted = _flat(piece)
    if not wanted:
        raise LabelError("the text to find is empty")
    if area is not None and not any(c.area == area for c in chunks):
        known = ", ".join(sorted({c.area for c in chunks})) or "(none: the store is empty)"
        raise LabelError(f"no area {area!r} in the store; areas: {known}")
    found: list[FoundChunk] = []
    seen: set[tuple[str, str]] = set()
    for c in chunks:
        if (area is not None and c.area != area) or (c.id, c.area) in seen:
            continue
        flat = _flat(c.content)
        at = flat.find(wanted)
        if at < 0:
            continue
        seen.add((c.id, c.area))
        plain = " ".join(c.content.split())
        shown = plain if len(plain) == len(flat) else flat  # casefold may change lengths
        start = max(0, at - 60)
        end = at + len(wanted) + 60
        snippet = ("…" if start else "") + shown[start:end] + ("…" if end < len(shown) else "")
        found.append(FoundChunk(c.id, c.area, c.source, heading_text(c.heading), snippet))
        if len(found) >= limit:
            break
    return found
