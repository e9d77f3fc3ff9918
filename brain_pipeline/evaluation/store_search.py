"""Searching a built store by hand or in bulk (what `brain-pipeline search` runs).

A store directory holds knowledge-store.json and, optionally, embeddings.bin. Queries
are embedded with the configured provider only when that provider made the store's
vectors; every other case searches lexically and says why, as the agent would.
Passages are printed under the agent's provenance lines. Batch files let any outside
tool evaluate our retrieval: one `{"qid", "query", "area"}` object per line in, one
`{"qid", "ids", "scores"}` object per line out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain_pipeline.corpus.jscompat import is_truthy, js_string
from brain_pipeline.corpus.store import STORE_FILENAME, Chunk, heading_text
from brain_pipeline.retrieval.hybrid import Hit, Retriever
from brain_pipeline.retrieval.vectors import EMBEDDINGS_FILENAME, EmbeddingStore

if TYPE_CHECKING:
    from brain_pipeline.corpus.store_reader import StoreView
    from brain_pipeline.retrieval.view_source import ViewSource
    from brain_pipeline.state.layout import StateLayout


class StoreNotFoundError(FileNotFoundError):
    """No knowledge-store.json where the store was expected."""


@dataclass
class OpenedStore:
    """A store directory's memory-mapped store, its vectors when readable, and what was wrong.

    Chunks are decoded on demand: `source` answers searches from the cached BM25 indexes
    and decodes only the hits.
    """

    directory: Path
    view: StoreView
    embeddings: EmbeddingStore | None
    layout: StateLayout | None
    """Where the sidecar and BM25 indexes are cached; None keeps them in memory only."""
    warnings: list[str] = field(default_factory=list)

    def source(self) -> ViewSource:
        """What a `Retriever` searches: the view plus BM25 indexes cached in `layout`."""
        from brain_pipeline.retrieval.view_source import ViewSource

        return ViewSource(self.view, self.layout)


def open_store(path: Path | str, build_dir: Path | str | None = None) -> OpenedStore:
    """Open a store directory (or a knowledge-store.json path and its neighbour).

    The store is memory-mapped with its sidecar index; the sidecar and BM25 indexes are
    cached in the directory's `state/` when it is the build directory (`build_dir`) or
    already has one (see `store_view.cache_layout`). An embeddings.bin that is not
    PATBEMB1 is ignored with a warning, never misread.
    """
    from brain_pipeline.corpus.store_reader import cache_layout, open_store_view
    from brain_pipeline.embedding.store_file import read_embeddings

    target = Path(path)
    store_file = target / STORE_FILENAME if target.is_dir() else target
    if not store_file.is_file():
        raise StoreNotFoundError(
            f"no {STORE_FILENAME} at {store_file}; build it first (brain-pipeline materialize) "
            "or pass --store DIR"
        )
    directory = store_file.resolve().parent
    layout = cache_layout(directory, build_dir)
    view = open_store_view(store_file, layout)
    warnings: list[str] = []
    embeddings = read_embeddings(directory / EMBEDDINGS_FILENAME, warnings.append, mapped=True)
    return OpenedStore(directory, view, embeddings, layout, warnings)


class BatchFormatError(ValueError):
    """A batch query line is unusable; the message names the line."""


def _heading_text(heading: Any) -> str:
    """A heading as the agent interpolates it (`String()`: numbers as JavaScript prints
    them); an array or object as its JSON, iteratively past json.dumps's depth (deep
    roadmap titles)."""
    if isinstance(heading, list | dict):
        return heading_text(heading)
    return js_string(heading)


def provenance(chunk: Chunk, position: int) -> str:
    """`--- passage N — source § heading ---`, without ` § heading` when there is none."""
    label = chunk.source
    if chunk.has_heading and is_truthy(chunk.heading):
        label += f" § {_heading_text(chunk.heading)}"
    return f"--- passage {position} — {label} ---"


def render_passages(hits: Iterable[Hit]) -> str:
    """Each passage under its provenance line, separated by blank lines."""
    blocks = [f"{provenance(hit.chunk, i)}\n{hit.chunk.content}" for i, hit in enumerate(hits, 1)]
    return "\n\n".join(blocks)


def hits_as_json(hits: Iterable[Hit]) -> list[dict[str, Any]]:
    """Hits as plain JSON objects (heading omitted when the chunk has none)."""
    rows = []
    for hit in hits:
        row: dict[str, Any] = {"id": hit.chunk.id, "score": hit.score, "source": hit.chunk.source}
        if hit.chunk.has_heading:
            row["heading"] = hit.chunk.heading
        row["content"] = hit.chunk.content
        rows.append(row)
    return rows


@dataclass(frozen=True)
class BatchQuery:
    qid: str
    query: str
    area: str


def parse_batch(lines: Iterable[str], source: str, default_area: str | None) -> list[BatchQuery]:
    """Read `{"qid", "query", "area"}` lines (area may default); blank lines are skipped."""
    queries: list[BatchQuery] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BatchFormatError(f"{where}: not valid JSON: {exc.msg}") from exc
        if not isinstance(row, dict):
            raise BatchFormatError(f"{where}: expected an object")
        area = row.get("area", default_area)
        if not isinstance(row.get("query"), str):
            raise BatchFormatError(f"{where}: 'query' must be a string")
        if not isinstance(area, str) or not area:
            raise BatchFormatError(f"{where}: 'area' must be a non-empty string (or pass --area)")
        qid = row.get("qid", str(lineno))
        queries.append(BatchQuery(str(qid), row["query"], area))
    return queries


def run_batch(
    retriever: Retriever, queries: Iterable[BatchQuery], mode: str, limit: int
) -> Iterator[tuple[dict[str, Any], str | None]]:
    """Yield each answer line `{"qid", "ids", "scores"}` and the query's fallback reason."""
    for q in queries:
        result = retriever.search(q.query, q.area, limit=limit, mode=mode)
        line = {
            "qid": q.qid,
            "ids": [hit.chunk.id for hit in result.hits],
            "scores": [hit.score for hit in result.hits],
        }
        yield line, result.fallback
